"""keras_digits.py written with Keras 3 (`import keras`): a plain Keras script (a small CNN on
scikit-learn's digits) changed for tfdist: the lines marked `# tfdist` are all that changed. Under
Slurm every task runs this same file:

    sbatch jobs/multi_worker.sbatch runs/digits -- python jobs/examples/keras3_digits.py --epochs=10

With a model directory (--model_dir, else $MODEL_DIR, which the batch scripts set) it checkpoints
every epoch; on SIGTERM or the time-limit signal every task stops after the same step, the chief
checkpoints it, the job is requeued (jobs/ set TFDIST_REQUEUE=1) or the script exits with status
75, and the next run resumes at that very step. The chief writes MODEL_DIR/metrics.json.
"""

import argparse
import json
import os

import tfdist  # tfdist: anywhere among the imports (it corrects Keras 3 under multi_worker)
import keras
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def build_model():
    return keras.Sequential([
        keras.layers.Input((8, 8, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32, help="per replica")
    parser.add_argument("--lr", type=float, default=0.05, help="for one replica")
    # tfdist: the run directory (the jobs/ scripts set $MODEL_DIR)
    parser.add_argument("--model_dir", default=os.environ.get("MODEL_DIR", "runs/keras3_digits"))
    parser.add_argument("--verbose", type=int, default=2, help="Keras's fit verbosity")
    parser.add_argument("--steps_per_execution", type=int, default=1, help="Keras's compile option")
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 8, 8, 1).astype("float32")
    x_train, x_test, y_train, y_test = train_test_split(x,
                                                        y,
                                                        test_size=0.2,
                                                        random_state=0,
                                                        stratify=y)

    rt = tfdist.init()  # tfdist: cluster, role and strategy (several tasks: multi_worker)
    start = rt.resume(args.model_dir)  # tfdist: where a stopped run left off (else step 0)
    keras.utils.set_random_seed(0)

    def train_data(ctx):  # tfdist: the input pipeline as a function of its tf.distribute context
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size, drop_remainder=True)

    with rt.scope():  # tfdist: variables made under the strategy
        model = build_model()
        optimizer = keras.optimizers.SGD(rt.scale_lr(args.lr), momentum=0.9)  # tfdist: lr x N
        model.compile(
            optimizer=rt.optimizer(optimizer),  # tfdist: (Horovod wraps it)
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            steps_per_execution=args.steps_per_execution)
    steps = len(x_train) // rt.global_batch_size(args.batch_size)  # tfdist: global batch
    # tfdist: checkpoints, resume, preemption, samples/s, TensorBoard, metrics.json
    callbacks = rt.callbacks(model_dir=args.model_dir, batch_size=args.batch_size)
    model.fit(
        rt.dataset(train_data, skip_steps=start.steps_done),  # tfdist: resumed at its batch
        epochs=args.epochs,
        steps_per_epoch=steps,
        callbacks=callbacks,
        verbose=args.verbose if rt.is_chief else 0)  # tfdist: the chief's progress only

    test_loss, test_accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    # tfdist: into metrics.json (the chief writes)
    metrics = callbacks.summary.add(final=dict(test_accuracy=test_accuracy, test_loss=test_loss))
    if rt.is_chief:  # tfdist: one task prints
        result = {k: metrics[k] for k in ("strategy", "world_size", "num_replicas", "epochs")}
        print(f"keras3_digits: {json.dumps(dict(result, test_accuracy=test_accuracy))}", flush=True)


if __name__ == "__main__":
    main()
