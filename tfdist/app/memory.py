"""Memory of one training replica, read from the built Keras model and optimizer (no training):
weights, gradients, optimizer slots (the real optimizer's variables after `build`), and an
activation estimate (every layer's output for one sample, kept for the backward pass); then the
bytes each strategy puts on one replica's device, and the largest per-replica batch that fits.

`measure_step_peak` runs real training steps and reads TensorFlow's own allocator statistics
(`tf.config.experimental.get_memory_info`), to check the estimate on a machine.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from tfdist.errors import ConfigError

# TensorFlow's measured peak over this estimate for the bundled models on CPU (get_memory_info with
# the BFC allocator, oneDNN on; 2026-11-23): 0.61-1.44 over cnn, mlp, resnet_small, resnet50 x
# batch 32, 256 x SGD, Adam x float32, mixed_bfloat16 (32 configurations; one configuration varies
# by about +-10 % from run to run). The bound we state (docs/planning.md, `tfdist plan`) and test.
# On an AVX2-only CPU (2026-11-25) the small cnn measured 8-9x at batch 32 and 2.5x at 256: a
# convolution workspace of about 30 MB that dwarfs a model of a few MB; the others stayed inside.
CPU_PEAK_FACTOR = (0.5, 1.7)

# Each replica holds everything: the all-reduce strategies.
REPLICATED = ("mirrored", "multi_worker", "horovod", "one_device")
# Variables (and so optimizer slots) live elsewhere: on the ps tasks, or on the CPU.
VARIABLES_ELSEWHERE = ("parameter_server", "central_storage")
STRATEGIES = REPLICATED + VARIABLES_ELSEWHERE


@dataclasses.dataclass
class ModelMemory:
    """Bytes of one model under one optimizer and precision policy."""

    params: int  # elements of every model variable (what model.count_params() counts)
    trainable_params: int
    weight_bytes: int  # every variable of the model, in its own dtype
    gradient_bytes: int  # one gradient per trainable variable, in its dtype
    slot_bytes: int  # the optimizer's variables after build: momenta, Adam's m and v, counters
    slot_variables: int  # how many the optimizer made
    compute_copy_bytes: int  # mixed precision: each step's low-precision copy of the weights
    # One sample's activations: every layer's output (kept for the backward pass), plus twice the
    # largest one (the gradients in flight at the layer being differentiated: of its output and
    # of its input).
    forward_bytes_per_sample: int
    backward_bytes_per_sample: int

    @property
    def activation_bytes_per_sample(self) -> int:
        return self.forward_bytes_per_sample + self.backward_bytes_per_sample

    def activation_bytes(self, batch_size: int) -> int:
        return self.activation_bytes_per_sample * batch_size

    def fixed_bytes(self, strategy: str) -> int:
        """What one replica's device holds whatever the batch size."""
        if strategy in VARIABLES_ELSEWHERE:
            # The step reads the variables into the device (a copy) and sends gradients back; the
            # slots stay with the variables (ps tasks or CPU).
            return self.weight_bytes + self.gradient_bytes + self.compute_copy_bytes
        return self.weight_bytes + self.gradient_bytes + self.slot_bytes + self.compute_copy_bytes

    def replica_bytes(self, strategy: str, batch_size: int) -> int:
        """Estimated peak bytes on one replica's device for a training step."""
        return self.fixed_bytes(strategy) + self.activation_bytes(batch_size)

    def largest_batch(self, strategy: str, memory_bytes: int) -> int:
        """The largest per-replica batch whose estimate fits in `memory_bytes` (0: none)."""
        room = memory_bytes - self.fixed_bytes(strategy)
        if room <= 0 or self.activation_bytes_per_sample == 0:
            return 0
        return room // self.activation_bytes_per_sample


def _bytes(variable) -> int:
    return int(np.prod(variable.shape)) * tf.as_dtype(variable.dtype).size


def layer_outputs(model: tf_keras.Model, top: bool = True) -> list[int]:
    """Bytes of every layer output for one sample, in graph order (nested models: their layers'
    outputs), the input included once."""
    sizes = []
    for layer in model.layers:
        if isinstance(layer, tf_keras.Model):
            sizes += layer_outputs(layer, top=False)
            continue
        if isinstance(layer, tf_keras.layers.InputLayer) and not top:
            continue  # a nested model's input is its caller's output, counted there
        for node in layer._inbound_nodes:
            for tensor in tf.nest.flatten(node.outputs):
                shape = list(tensor.shape[1:])
                if any(d is None for d in shape):
                    raise ConfigError(f"Layer {layer.name!r} outputs shape {tensor.shape} with "
                                      "unknown sizes: give the model a fixed input shape "
                                      "(--input_shape).")
                sizes.append(int(np.prod(shape)) * tf.as_dtype(tensor.dtype).size)
    return sizes


def model_memory(model: tf_keras.Model, optimizer) -> ModelMemory:
    """ModelMemory of a built model, with `optimizer` (a Keras optimizer) built for it."""
    trainable = model.trainable_variables
    optimizer.build(trainable)
    slot_vars = list(optimizer.variables)
    policy = tf_keras.mixed_precision.global_policy()
    low = tf.as_dtype(policy.compute_dtype)
    outputs = layer_outputs(model)
    copies = 0
    if low != tf.float32:
        copies = sum(int(np.prod(v.shape)) * low.size for v in trainable if v.dtype == tf.float32)
    return ModelMemory(params=sum(int(np.prod(v.shape)) for v in model.weights),
                       trainable_params=sum(int(np.prod(v.shape)) for v in trainable),
                       weight_bytes=sum(_bytes(v) for v in model.weights),
                       gradient_bytes=sum(_bytes(v) for v in trainable),
                       slot_bytes=sum(_bytes(v) for v in slot_vars),
                       slot_variables=len(slot_vars),
                       compute_copy_bytes=copies,
                       forward_bytes_per_sample=sum(outputs),
                       backward_bytes_per_sample=2 * max(outputs))


def measure_step_peak(model: tf_keras.Model,
                      batch_size: int,
                      steps: int = 2,
                      device: str = "CPU:0") -> dict[str, int]:
    """TensorFlow's own peak bytes in use on `device` during training steps of a compiled model
    (after one untimed step that traces the function and creates the optimizer slots), and the
    bytes still in use after them (the variables and slots)."""
    shape = (batch_size, ) + tuple(model.input_shape[1:])
    rng = np.random.default_rng(0)
    x = rng.random(shape, dtype=np.float32)
    classes = int(model.output_shape[-1])
    y = rng.integers(0, classes, size=(batch_size, ), dtype=np.int32)
    model.train_on_batch(x, y)  # traces the step, builds the slots
    tf.config.experimental.reset_memory_stats(device)
    for _ in range(steps):
        model.train_on_batch(x, y)
    info = tf.config.experimental.get_memory_info(device)
    return {"peak_bytes": int(info["peak"]), "current_bytes": int(info["current"])}


def parse_bytes(text: str) -> int:
    """`80GB` (10^9), `80GiB` (2^30), `512MB`, `16G` (= GB), or a plain number of bytes."""
    units = {
        "": 1,
        "B": 1,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
        "K": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
        "KIB": 2**10,
        "MIB": 2**20,
        "GIB": 2**30,
        "TIB": 2**40
    }
    raw = text.strip().upper().replace(" ", "")
    number = raw.rstrip("KMGTIB")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if unit not in units or not value > 0:
        raise ConfigError(f"--gpu_memory={text!r}: expected a size such as 80GB, 40GiB or "
                          "16000MB.")
    return int(value * units[unit])


def human(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}" if abs(n) < 10 * size else f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def as_dict(mem: ModelMemory) -> dict[str, Any]:
    return dict(dataclasses.asdict(mem),
                activation_bytes_per_sample=mem.activation_bytes_per_sample)
