"""A plain Keras script (a small CNN on scikit-learn's digits) changed for tfdist: the lines
marked `# tfdist` are all that changed. Under Slurm every task runs this same file:

    sbatch jobs/multi_worker.sbatch runs/digits -- python jobs/examples/keras_digits.py --epochs=10

The chief writes MODEL_DIR/result.json (MODEL_DIR: --model_dir, else $MODEL_DIR, which the batch
scripts set).
"""

import argparse
import json
import os

import tfdist  # tfdist: first, so that TensorFlow loads with the Keras every strategy supports
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def build_model():
    return tf.keras.Sequential([
        tf.keras.layers.Input((8, 8, 1)),
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32, help="per replica")
    parser.add_argument("--lr", type=float, default=0.05, help="for one replica")
    parser.add_argument("--model_dir", default=os.environ.get("MODEL_DIR", "runs/keras_digits"))
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 8, 8, 1).astype("float32")
    x_train, x_test, y_train, y_test = train_test_split(x,
                                                        y,
                                                        test_size=0.2,
                                                        random_state=0,
                                                        stratify=y)

    rt = tfdist.init(
    )  # tfdist: cluster, role and strategy from SLURM_* (several tasks: multi_worker)
    tf.keras.utils.set_random_seed(0)

    def train_data(ctx):  # tfdist: the input pipeline as a function of its tf.distribute context
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size, drop_remainder=True)

    with rt.scope():  # tfdist: variables made under the strategy
        model = build_model()
        optimizer = tf.keras.optimizers.SGD(rt.scale_lr(args.lr), momentum=0.9)  # tfdist: lr x N
        model.compile(
            optimizer=rt.optimizer(optimizer),  # tfdist: (Horovod wraps it)
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"])
    steps = len(x_train) // rt.global_batch_size(args.batch_size)  # tfdist: global batch
    history = model.fit(
        rt.dataset(train_data),  # tfdist: dataset and callbacks from rt
        epochs=args.epochs,
        steps_per_epoch=steps,
        callbacks=rt.callbacks(),
        verbose=2 if rt.is_chief else 0)

    test_loss, test_accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    if rt.is_chief:  # tfdist: one task writes
        os.makedirs(args.model_dir, exist_ok=True)
        result = dict(strategy=rt.strategy_name,
                      world_size=rt.world_size,
                      num_replicas=rt.num_replicas,
                      epochs=len(history.history["loss"]),
                      test_accuracy=float(test_accuracy),
                      test_loss=float(test_loss))
        with open(os.path.join(args.model_dir, "result.json"), "w") as f:
            json.dump(result, f)
        print(f"keras_digits: {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
