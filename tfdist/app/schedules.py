"""Learning-rate warmup and decay that behave the same under every engine.

Goyal et al. (2017): start at the single-replica rate and ramp linearly to the scaled rate over the
first steps, then follow a schedule. The rate is a function of the optimizer's step counter, which
is checkpointed, so a resumed run continues the schedule exactly.
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfdist.errors import ConfigError
from tfdist.app.config import OPTIMIZERS, SCHEDULES
from tfdist.keras_compat import keras_module


class _Warmup:
    """lr(step) = start + (peak - start) * step / warmup_steps while step < warmup_steps; then
    constant peak, cosine decay to 0 at total_steps, or peak * decay_rate ** (k // decay_steps)
    with k the steps after warmup."""

    def __init__(self,
                 start_lr: float,
                 peak_lr: float,
                 warmup_steps: int,
                 schedule: str = "constant",
                 total_steps: int = 0,
                 decay_steps: int = 0,
                 decay_rate: float = 0.1):
        if schedule not in SCHEDULES:
            raise ConfigError(f"schedule={schedule!r}: expected one of {', '.join(SCHEDULES)} "
                              "(--lr_schedule).")
        if schedule == "cosine" and total_steps <= warmup_steps:
            raise ConfigError(f"cosine decay needs total_steps ({total_steps}) > warmup_steps "
                              f"({warmup_steps}).")
        if schedule == "step" and decay_steps < 1:
            raise ConfigError(f"step decay needs decay_steps >= 1; received {decay_steps}.")
        self.start_lr, self.peak_lr = float(start_lr), float(peak_lr)
        self.warmup_steps, self.schedule = int(warmup_steps), schedule
        self.total_steps, self.decay_steps = int(total_steps), int(decay_steps)
        self.decay_rate = float(decay_rate)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = float(max(self.warmup_steps, 1))
        ramp = self.start_lr + (self.peak_lr - self.start_lr) * step / warmup
        after = step - float(self.warmup_steps)
        if self.schedule == "cosine":
            span = float(self.total_steps - self.warmup_steps)
            decayed = 0.5 * self.peak_lr * (1.0 + tf.cos(math.pi * tf.minimum(after, span) / span))
        elif self.schedule == "step":
            decayed = self.peak_lr * self.decay_rate**tf.floor(after / float(self.decay_steps))
        else:
            decayed = tf.constant(self.peak_lr, tf.float32)
        return tf.where(step < float(self.warmup_steps), ramp, decayed)

    def get_config(self):
        names = ("start_lr", "peak_lr", "warmup_steps", "schedule", "total_steps", "decay_steps",
                 "decay_rate")  # the constructor's arguments
        return {name: getattr(self, name) for name in names}


_schedules: dict[int, type] = {}


def warmup_schedule(keras_version: int) -> type:
    """The warmup schedule (_Warmup) of Keras `keras_version` (2: tf-keras, 3: Keras 3), a
    LearningRateSchedule of that Keras registered as "tfdist>WarmupSchedule"; made when first
    asked, so that a run of one Keras does not load the other."""
    if keras_version not in _schedules:
        keras = keras_module(keras_version)
        register = (keras.saving.register_keras_serializable
                    if keras_version == 3 else keras.utils.register_keras_serializable)
        cls = type("WarmupSchedule", (_Warmup, keras.optimizers.schedules.LearningRateSchedule), {
            "__doc__": f"The warmup schedule of {keras.__name__}: see _Warmup.",
            "__module__": __name__
        })
        _schedules[keras_version] = register(package="tfdist")(cls)
    return _schedules[keras_version]


def make_optimizer(name: str, lr, keras):
    """`tfdist train --optimizer`: SGD with momentum 0.9, or Adam, at rate (or schedule) lr, of
    `keras` (tf_keras or Keras 3's module)."""
    if name == "sgd":
        return keras.optimizers.SGD(lr, momentum=0.9)
    if name == "adam":
        return keras.optimizers.Adam(lr)
    raise ConfigError(f"Unknown optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}.")


def learning_rate(cfg, peak: float, steps: int):
    """`tfdist train`'s rate: the scaled `peak`, or a WarmupSchedule (of the Keras `cfg.keras`)
    when warming up or decaying (cfg: a TrainConfig; steps: per epoch)."""
    if cfg.warmup_epochs <= 0 and cfg.lr_schedule == "constant":
        return peak
    schedule = warmup_schedule(cfg.keras)
    return schedule(start_lr=cfg.lr,
                    peak_lr=peak,
                    warmup_steps=round(cfg.warmup_epochs * steps),
                    schedule=cfg.lr_schedule,
                    total_steps=cfg.epochs * steps,
                    decay_steps=round(cfg.lr_decay_epochs * steps),
                    decay_rate=cfg.lr_decay_rate)
