"""A Keras 3 model trained under --strategy=parameter_server (chief + ps + workers via `tfdist
launch`): `python ps_script.py OUT_DIR [EPOCHS]`. The chief writes OUT_DIR/result.json and a
tfdist checkpoint each epoch; the last task is the evaluator: it evaluates each checkpoint
(tfdist.train.sidecar) and writes OUT_DIR/evaluations.json."""

import json
import os
import sys

import tfdist

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import digits_data  # noqa: E402
from tfdist.train.checkpoint import make_checkpoint  # noqa: E402

out_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8
rt = tfdist.init(strategy="parameter_server", evaluator=True)  # ps, workers serve here and exit
(x_train, y_train), (x_test, y_test) = digits_data.load_data()
model_dir = os.path.join(out_dir, "run")
# 4 steps in each scheduled call: an epoch of 50 steps is 12 calls of 4 and one of the 2 left.
SPE = 4


def build_model():
    model = keras.Sequential([
        keras.Input((8, 8)),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.002),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"],
                  steps_per_execution=SPE)
    return model


if rt.is_evaluator:
    from tfdist.train.sidecar import evaluate_checkpoints

    test = lambda: tf.data.Dataset.from_tensor_slices((x_test / 255.0, y_test)).batch(64)  # noqa
    evaluations = evaluate_checkpoints(model_dir, build_model, test, rt.engine.chief_finished)
    with open(os.path.join(out_dir, "evaluations.json"), "w") as f:
        json.dump(evaluations, f)
    sys.exit(0)


def dataset_fn(input_context):
    batch = input_context.get_per_replica_batch_size(64)
    ds = tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train)).repeat()
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.shuffle(1400).batch(batch).prefetch(2)


with rt.scope():
    model = build_model()

try:  # arrays: refused with the way to do it
    model.fit(x_train / 255.0, y_train, epochs=1, steps_per_epoch=5, verbose=0)
    refused = ""
except tfdist.TfdistError as e:
    refused = f"{type(e).__name__}: {e}"

batches = []  # the indices the batch hooks get in the first epoch
history = model.fit(
    rt.dataset(dataset_fn),
    epochs=epochs,
    steps_per_epoch=50,
    validation_data=(x_test / 255.0, y_test),
    callbacks=[
        make_checkpoint(model_dir, True, {"strategy": "parameter_server"}),
        keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: len(batches) < 13 and batches.append(batch))
    ],
    verbose=2)
_, accuracy = model.evaluate(x_test / 255.0, y_test, verbose=0)
predicted = model.predict(x_test[:5] / 255.0, verbose=0).argmax(axis=1).tolist()
with open(os.path.join(out_dir, "result.json"), "w") as f:
    json.dump(
        {
            "test_accuracy": float(accuracy),
            "workers": len(rt.roles.tf_config["cluster"]["worker"]),
            "history": {
                k: [float(v) for v in vs]
                for k, vs in history.history.items()
            },
            "predicted": predicted,
            "iterations": int(model.optimizer.iterations.numpy()),
            "refused": refused,
            "batches": batches,
            "keras": keras.__version__,
            "labels": y_test[:5].tolist(),
        }, f)
