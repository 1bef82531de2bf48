"""A single-device Keras script, unchanged but for tfdist's two lines (marked), that trains a small
model and saves it with `model.save` after fit, run under `tfdist launch -n 2 --strategy horovod`.
argv: KERAS (2: tf.keras under TF_USE_LEGACY_KERAS=1; 3: `import keras`; tf_keras_import:
`import tf_keras` directly, the switch not set, so that tf.keras, and the Keras Horovod's Keras API
is bound to, is Keras 3),
OUT (a folder), MODE (`train`: the script; `load`: a fresh process without tfdist or Horovod loads
what the chief saved and compares it with the chief's weights).

`train` writes OUT/model.keras, OUT/model.h5, with tf-keras OUT/model_savedmodel (the chief's;
each rank's weights in
OUT/weights.<rank>.npz with the class names of its optimizer's MRO). `load` loads both files with
the Keras that saved them, checks that the optimizer is the script's own class and config, the
weights the chief's, and that Horovod was never imported, and prints `loaded <file>: <class>`."""

import json
import os
import sys

import numpy as np

KERAS, OUT, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
if KERAS == "2":
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
elif KERAS == "tf_keras_import":
    import tf_keras as keras

    assert "TF_USE_LEGACY_KERAS" not in os.environ
else:
    import keras
# tf-keras also saves a SavedModel (a folder); Keras 3's model.save has no such format.
FILES = ("model.keras", "model.h5") + (("model_savedmodel", ) if KERAS != "3" else ())
CONFIG = {"learning_rate": 0.05, "momentum": 0.5}


def optimizer_state(optimizer):
    """Every variable of `optimizer` (its step count first), flattened into one vector."""
    return np.concatenate([np.asarray(v, "float64").ravel() for v in optimizer.variables])


if MODE == "load":
    rank0 = np.load(os.path.join(OUT, "weights.0.npz"))
    for name in FILES:
        model = keras.models.load_model(os.path.join(OUT, name))
        optimizer = model.optimizer
        assert type(optimizer).__module__.startswith(keras.__name__.split(".")[0]), type(optimizer)
        assert type(optimizer).__name__ == "SGD", type(optimizer)
        config = optimizer.get_config()
        assert config["name"].lower() == "sgd", config  # Keras's own name (not DistributedSGD)
        for key, value in CONFIG.items():
            assert abs(float(config[key]) - value) < 1e-7, config
        for i, weight in enumerate(model.get_weights()):
            np.testing.assert_array_equal(weight, rank0[f"arr_{i}"])
        if name.endswith(".keras"):  # the optimizer's state too (its steps, its momentum)
            np.testing.assert_array_equal(optimizer_state(optimizer), rank0["optimizer"])
        print(f"loaded {name}: {type(optimizer).__module__}.{type(optimizer).__name__} "
              f"{json.dumps({k: float(config[k]) for k in CONFIG})}")
    assert not [m for m in sys.modules if m.split(".")[0] in ("horovod", "tfdist")], "imported"
    sys.exit(0)

import tfdist  # noqa: E402  tfdist

tfdist.init()  # tfdist

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
keras.utils.set_random_seed(1)
model = keras.Sequential([
    keras.Input(shape=(8, )),
    keras.layers.Dense(4, activation="relu"),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer=keras.optimizers.SGD(**CONFIG),
              loss="binary_crossentropy",
              metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=1, verbose=2)
for name in FILES:
    model.save(os.path.join(OUT, name))
rank = os.environ.get("TFDIST_LAUNCH_RANK", "0")
np.savez(os.path.join(OUT, f"weights.{rank}.npz"),
         mro=np.array([c.__name__ for c in type(model.optimizer).__mro__]),
         optimizer=optimizer_state(model.optimizer),
         *model.get_weights())
