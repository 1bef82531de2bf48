"""The small model registry of `tfdist train --model=NAME`."""

from __future__ import annotations

from typing import Callable

from tfdist.errors import ConfigError

# Each builder takes the Keras to build with (`keras`: tf_keras, or Keras 3's `keras` module; both
# offer the same names for what is used here), so that neither is imported for the other's run.


def cnn(input_shape, num_classes, keras):
    """The digits CNN: two convolutions, one hidden dense layer (no dropout: exact replays)."""
    layers = keras.layers
    return keras.Sequential([
        layers.Input(input_shape),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ],
                            name="cnn")


def mlp(input_shape, num_classes, keras):
    layers = keras.layers
    return keras.Sequential([
        layers.Input(input_shape),
        layers.Flatten(),
        layers.Dense(256, activation="relu"),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ],
                            name="mlp")


def resnet_small(input_shape, num_classes, keras, width=32, blocks=3):
    """A small ResNet (three residual blocks), the benchmark model that fits a 2-core machine."""
    layers = keras.layers
    inputs = layers.Input(input_shape)
    x = layers.Conv2D(width, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    for _ in range(blocks):
        y = layers.Conv2D(width, 3, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU()(y)
        y = layers.Conv2D(width, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        x = layers.ReLU()(layers.Add()([x, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x), name="resnet_small")


def resnet50(input_shape, num_classes, keras):
    """Keras applications' ResNet-50 with random weights (nothing is downloaded)."""
    layers = keras.layers
    inputs = layers.Input(input_shape)
    x = inputs
    if min(input_shape[:2]) < 32:  # ResNet-50 needs at least 32x32 inputs
        x = layers.Resizing(32, 32)(x)
    if input_shape[-1] != 3:
        x = layers.Conv2D(3, 1)(x)
    base = keras.applications.ResNet50(weights=None,
                                       include_top=False,
                                       input_shape=tuple(x.shape[1:]),
                                       pooling="avg")
    return keras.Model(inputs, layers.Dense(num_classes)(base(x)), name="resnet50")


MODELS: dict[str, Callable] = {
    "cnn": cnn,
    "mlp": mlp,
    "resnet_small": resnet_small,
    "resnet50": resnet50,
}


def build_model(name: str, input_shape, num_classes: int, keras):
    """A fresh, uncompiled model of `keras` (tf_keras or Keras 3's module); outputs logits."""
    if name not in MODELS:
        raise ConfigError(f"Unknown model {name!r}: expected one of {', '.join(MODELS)} (--model).")
    model = MODELS[name](tuple(input_shape), num_classes, keras=keras)
    if keras.mixed_precision.global_policy().compute_dtype != "float32":
        # Mixed precision: logits (and so the loss) in float32, for numerical stability. (A Keras 3
        # Sequential has `inputs` and `outputs` but no `input`/`output`: it was never called.)
        logits = keras.layers.Activation("linear", dtype="float32")(model.outputs[0])
        model = keras.Model(model.inputs[0], logits, name=model.name)
    return model


def compile_classifier(model, optimizer, keras, steps_per_execution: int = 1):
    """`model` (logits out) compiled as `tfdist train` trains it: cross-entropy, accuracy."""
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"],
                  steps_per_execution=steps_per_execution)
    return model


def compiled_model(name: str, info: dict, optimizer, keras, steps_per_execution: int = 1):
    """`tfdist train`'s model for a pipeline's `info`, compiled for its classes (a plain copy, for
    evaluation, with the default optimizer)."""
    return compile_classifier(build_model(name, info["input_shape"], info["num_classes"], keras),
                              optimizer, keras, steps_per_execution)
