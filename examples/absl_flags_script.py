"""An absl script (`absl.app` and `absl.flags`, as TensorFlow's Model Garden and many research
codes write their entry points): its own flags (--epochs, --learning_rate) and, beside them,
tfdist's (--strategy, --batch_size, --lr_scaling, ... : `tfdist train`'s runtime flags), on
scikit-learn's digits. Run it: `tfdist launch -n 2 -- python examples/absl_flags_script.py`, or
`sbatch jobs/multi_worker.sbatch runs/absl -- python examples/absl_flags_script.py --epochs=8`;
`python examples/absl_flags_script.py --helpfull` lists both sets of flags. On 2 workers: 0.93
and 0.95 test accuracy (Keras 3.15.1, 2026-11-27; tests/field/test_field_local.py trains it).

tfdist's four lines (marked `# tfdist`): the import of its flag definitions, `define_flags()` at
the top beside the script's own, `init_from_flags()` in `main` (tfdist.init() from the parsed
flags: `--strategy=auto` by default), and the global batch from tfdist's `--batch_size`, which
is per replica (the script defines no batch size of its own: absl takes each name once).
Options: `--epochs`, `--learning_rate`, and tfdist's (`--helpfull`; docs/reference/cli.md).
Optional argument: a directory for the result file that tfdist's tests read (examples/results.py).
"""

from absl import app, flags
import tensorflow as tf

from tfdist.cli import flags as tfdist_flags  # tfdist

import digits_data
import results

FLAGS = flags.FLAGS
flags.DEFINE_integer("epochs", 8, "Epochs to train.")
flags.DEFINE_float("learning_rate", 0.001, "Adam's learning rate.")
tfdist_flags.define_flags()  # tfdist: --strategy, --batch_size, --lr_scaling, ...


def build_model():
    return tf.keras.Sequential([
        tf.keras.Input(shape=(8, 8, 1)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


def main(argv):
    strategy = tfdist_flags.init_from_flags().strategy  # tfdist
    (x_train, y_train), (x_test, y_test) = digits_data.load_data()
    x_train = x_train[..., None].astype("float32") / 255
    x_test = x_test[..., None].astype("float32") / 255

    with strategy.scope():
        model = build_model()
        model.compile(optimizer=tf.keras.optimizers.Adam(FLAGS.learning_rate),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    model.fit(
        x_train,
        y_train,
        batch_size=FLAGS.batch_size * strategy.num_replicas_in_sync,  # tfdist: per replica
        epochs=FLAGS.epochs,
        verbose=2)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print("Test accuracy:", accuracy)
    results.save(argv[1] if len(argv) > 1 else None, model, accuracy)


if __name__ == "__main__":
    app.run(main)
