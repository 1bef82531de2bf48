"""What `tfdist train` trains, and how: one TrainConfig, whose defaults are also the flags' (no
TensorFlow, so the flags can be defined without loading it)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tfdist.errors import ConfigError
from tfdist.tf_environ import legacy_keras

KERASES = (2, 3)  # tfdist.keras_compat.KERASES, here without importing anything
OPTIMIZERS = ("sgd", "adam")
MIXED_PRECISION = ("float32", "mixed_float16", "mixed_bfloat16")
SCHEDULES = ("constant", "cosine", "step")
AUTO = "auto"  # --steps_per_execution: chosen from the first epoch (tfdist.app.auto_steps)
# The optimizer, single-replica rate and epochs a strategy trains with when the flag is not given.
# Asynchronous parameter-server updates are stale: SGD with momentum reached 0.95-0.99 test accuracy
# on digits from run to run (0.964 with the old defaults), Adam at 0.001 for 20 epochs >= 0.97 on
# every seed tried (15 epochs: 0.975-0.983 over seeds 1-5; 10 epochs: 0.969 once).
BASE_DEFAULTS = {"optimizer": "sgd", "lr": 0.05, "epochs": 10}
STRATEGY_DEFAULTS = {"parameter_server": {"optimizer": "adam", "lr": 0.001, "epochs": 20}}


def default_keras() -> int:
    """The Keras tf.keras is (TensorFlow's choice, the user's switch): 2 (tf-keras) where
    TF_USE_LEGACY_KERAS=1, else 3."""
    return 2 if legacy_keras() else 3


def strategy_defaults(strategy: str) -> dict[str, Any]:
    """optimizer, lr and epochs for `strategy` (BASE_DEFAULTS unless it has its own)."""
    return dict(BASE_DEFAULTS, **STRATEGY_DEFAULTS.get(strategy, {}))


def given_or_default(name: str, value: Any, strategy: str) -> Any:
    """A flag's value, else `strategy`'s default for it (optimizer, lr or epochs)."""
    return value if value is not None else strategy_defaults(strategy)[name]


@dataclasses.dataclass
class TrainConfig:
    model: str = "cnn"
    # The Keras that builds the model and optimizer: 2 (tf-keras) or 3 (Keras 3); None: the one
    # tf.keras is (default_keras).
    keras: Optional[int] = None
    pipeline: str = "digits"
    strategy: str = "auto"
    num_ps: int = 1
    evaluator: bool = False  # parameter_server: the last task evaluates the checkpoints
    port: Optional[int] = None
    epochs: Optional[int] = None  # None: the strategy's (strategy_defaults)
    batch_size: int = 32  # per replica
    lr: Optional[float] = None  # single-replica rate, scaled by lr_scaling; None: the strategy's
    lr_scaling: str = "linear"
    warmup_epochs: float = 0.0  # ramp from lr to the scaled rate (Goyal et al., 2017)
    lr_schedule: str = "constant"  # after warmup: constant, cosine or step
    lr_decay_epochs: float = 0.0  # step schedule: decay every this many epochs
    lr_decay_rate: float = 0.1
    optimizer: Optional[str] = None  # None: the strategy's
    mixed_precision: str = "float32"
    task_gpus: str = "auto"  # which GPUs each task uses (tfdist.cluster.gpus)
    gpu_memory_growth: bool = True
    model_dir: Optional[str] = None
    checkpoint_steps: int = 0  # 0: checkpoint at each epoch end only
    requeue: Optional[bool] = None  # on preemption under Slurm, requeue; None: $TFDIST_REQUEUE
    restart: bool = False  # ignore (and remove) a previous run in model_dir: train anew
    # seconds without a step before the job ends naming the stuck rank; None: $TFDIST_WATCHDOG_
    # TIMEOUT, else auto; "0"/"off": no watchdog (tfdist.train.watchdog)
    watchdog_timeout: Optional[str] = None
    tensorboard: bool = True
    # "A:B": trace training steps A..B with TensorFlow's profiler (tfdist.train.profiling); None:
    # $PROFILE_STEPS, else off. profile_ranks: "0,3"; None: $PROFILE_RANKS, else every rank.
    profile_steps: Optional[str] = None
    profile_ranks: Optional[str] = None
    meter: bool = True  # samples/s and input wait counted in each step (tfdist.train.throughput)
    preemption: bool = True  # with model_dir: a signal stops at an agreed step (train.preemption)
    seed: int = 0
    shuffle: bool = True
    steps_per_epoch: int = 0  # 0: one pass over the training split
    # Keras's compile option: steps in one call of the step function; "auto": chosen after the
    # first epoch (tfdist.app.auto_steps).
    steps_per_execution: Any = AUTO
    data_dir: Optional[str] = None
    pipeline_options: dict[str, Any] = dataclasses.field(default_factory=dict)  # the recipe's
    verbose: Optional[int] = None  # None: progress bar on a terminal, one line per epoch otherwise
    engine_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.keras is None:
            self.keras = default_keras()
        if self.keras not in KERASES:
            raise ConfigError(f"keras={self.keras!r}: expected one of "
                              f"{', '.join(map(str, KERASES))} (--keras).")
        for name, allowed in (("optimizer", OPTIMIZERS), ("mixed_precision", MIXED_PRECISION),
                              ("lr_schedule", SCHEDULES)):
            if getattr(
                    self,
                    name) not in allowed and not (name == "optimizer" and self.optimizer is None):
                raise ConfigError(f"{name}={getattr(self, name)!r}: expected one of "
                                  f"{', '.join(allowed)} (--{name}).")
        check_lr_course(self.lr_schedule, self.lr_decay_epochs)
        self.steps_per_execution = steps_per_execution_setting(self.steps_per_execution)

    def for_strategy(self, strategy: str) -> "TrainConfig":
        """This config with the strategy's optimizer, lr and epochs where none was given."""
        missing = {k: v for k, v in strategy_defaults(strategy).items() if getattr(self, k) is None}
        return dataclasses.replace(self, **missing)


def steps_per_execution_setting(value: Any) -> Any:
    """--steps_per_execution as given: AUTO or a count of at least 1; else a ConfigError."""
    text = str(value).strip().lower()
    if text == AUTO:
        return AUTO
    count = int(text) if text.isdigit() else 0
    if count < 1:
        raise ConfigError(f"steps_per_execution={value!r}: expected a count of at least 1, or "
                          f"'{AUTO}' (tfdist chooses it after the first epoch).")
    return count


def check_lr_course(schedule: str, decay_epochs: float) -> None:
    """Refuses a step schedule without its interval before anything is built (train and plan)."""
    if schedule == "step" and decay_epochs <= 0:
        raise ConfigError(f"lr_schedule='step' with lr_decay_epochs={decay_epochs:g}: the step "
                          "schedule multiplies the rate by --lr_decay_rate every --lr_decay_epochs "
                          "epochs; set --lr_decay_epochs > 0 (e.g. 30).")


DEFAULTS = TrainConfig()
