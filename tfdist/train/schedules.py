"""Learning-rate warmup and decay that behave the same under every engine.

Goyal et al. (2017): start at the single-replica rate and ramp linearly to the scaled rate over the
first steps, then follow a schedule. The rate is a function of the optimizer's step counter, which
is checkpointed, so a resumed run continues the schedule exactly.
"""

from __future__ import annotations

import math

import tensorflow as tf

SCHEDULES = ("constant", "cosine", "step")


@tf.keras.utils.register_keras_serializable(package="tfdist")
class WarmupSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
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
        super().__init__()
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule={schedule!r}: expected one of {', '.join(SCHEDULES)} "
                             "(--lr_schedule).")
        if schedule == "cosine" and total_steps <= warmup_steps:
            raise ValueError(f"cosine decay needs total_steps ({total_steps}) > warmup_steps "
                             f"({warmup_steps}).")
        if schedule == "step" and decay_steps < 1:
            raise ValueError(f"step decay needs decay_steps >= 1; received {decay_steps}.")
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
        return dict(start_lr=self.start_lr,
                    peak_lr=self.peak_lr,
                    warmup_steps=self.warmup_steps,
                    schedule=self.schedule,
                    total_steps=self.total_steps,
                    decay_steps=self.decay_steps,
                    decay_rate=self.decay_rate)
