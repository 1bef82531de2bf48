"""The small set of questions every engine (TF strategy or Horovod) answers the same way."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any, Callable, Optional

from tfdist.cluster import Cluster, Roles
from tfdist.errors import TfdistError
from tfdist.options import check_options

DatasetFn = Callable[[Any], Any]  # tf.distribute.InputContext -> tf.data.Dataset


class LostTaskError(TfdistError, RuntimeError):
    """Another task of the job died or became unreachable during training."""


class LateInitError(TfdistError, RuntimeError):
    """tfdist.init() ran after TensorFlow had started its runtime (an op, a dataset, a model)."""


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an engine's model.fit can do; training code asks these instead of the engine's name."""

    # Keras calls on_train_batch_* hooks (ParameterServerStrategy refuses such callbacks).
    batch_callbacks: bool = True
    # Every step takes one batch from each input pipeline, so a resumed run can skip to the exact
    # step (parameter-server workers race: there is no such position).
    exact_resume: bool = True
    # Every training task takes part in a checkpoint save (MultiWorkerMirrored reads sync-on-read
    # variables with a collective); elsewhere only the chief saves.
    collective_checkpoint: bool = False
    # Each replica keeps layer statistics of its own (BatchNormalization's moving mean and
    # variance), which average_layer_statistics averages at epoch ends and before a checkpoint
    # (parameter servers hold the one copy of every variable: nothing to average).
    replica_statistics: bool = True
    # The tasks agree on each batch inside its fetch where the input may end in a partial batch
    # (tf.distribute's get_next_as_optional all-reduces "has data" over MultiWorkerMirrored's
    # workers): a task's input wait may be a wait for another task.
    batches_agreed: bool = False


class Engine:
    """A distribution engine configured for this task. Subclasses set `strategy`.

    An engine's options (what tfdist.init passes on: `compression`, `collective`, ...) are the
    keyword parameters of its constructor after `cluster` and `roles` (option_names); any other
    is an error naming it."""

    name = ""
    capabilities = Capabilities()

    def __init__(self, cluster: Cluster, roles: Roles, **unknown: Any):
        check_options(unknown, self.option_names(), f"the {self.name} engine")
        self.cluster, self.roles = cluster, roles
        self.strategy = None

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The options this engine takes: its constructor's named parameters after cluster and
        roles (a subclass passes none of its own on to Engine.__init__)."""
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        parameters = list(inspect.signature(cls.__init__).parameters.values())[3:]
        return tuple(p.name for p in parameters if p.kind in named)

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def rank(self) -> int:
        """This task's rank among the job's tasks."""
        return self.cluster.rank

    @property
    def world_size(self) -> int:
        return self.cluster.world_size

    @property
    def is_chief(self) -> bool:
        """The task that writes (checkpoints, logs, results): rank 0, which is TF_CONFIG's chief
        or, without one, worker 0 (the cluster layer orders the ranks so), and Horovod's rank 0."""
        return self.rank == 0

    def scope(self) -> contextlib.AbstractContextManager:
        return self.strategy.scope()

    def distribute_dataset(self, dataset_fn: DatasetFn) -> Any:
        """What `model.fit` takes, with dataset_fn called once per input pipeline."""
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return optimizer

    def callbacks(self) -> list:
        return []

    def average_layer_statistics(self, model) -> int:
        """Give `model`'s layer statistics (BatchNormalization's moving mean and variance) their
        mean over every replica where each replica keeps its own copy; every rank calls it at the
        same points (tfdist.distribute.layer_statistics). Returns how many variables it covers: 0
        where there is one replica, or where the strategy averages them itself."""
        return 0

    def xla_refusal(self) -> Optional[str]:
        """Why a training step compiled with XLA (Keras's `jit_compile=True`) cannot run under
        this engine as set up, with what TensorFlow says, or None where it can or where tfdist has
        not seen it fail (measured: docs/benchmarks.md#xla). Asked only where the engine trains
        several replicas or tasks (tfdist.runtime)."""
        return None

    def serve(self) -> None:
        """Serve the job until training is over on a task that runs no model.fit
        (parameter_server's ps and workers); returns at once where every task trains."""

    def chief_finished(self) -> bool:
        """Non-blocking: whether the chief has come and gone, the end for a task that does not
        train (parameter_server's ps, workers and evaluator). False where the engine does not
        watch the chief: every task trains beside it, and none outlives it to ask."""
        return False

    def explain_failure(self, error: BaseException) -> Optional[str]:
        """A one-paragraph explanation when `error` means a peer task was lost, else None."""
        return None

    def training_ranks(self) -> list[int]:
        """The ranks that run model.fit (and so a progress watchdog): all of them, but only the
        chief under parameter_server."""
        return list(range(self.world_size))

    def unreachable_tasks(self) -> list[str]:
        """Peer tasks that cannot be reached outside TensorFlow (their port refuses), named for
        a log line; [] where the engine has no such side channel. Never blocks long."""
        return []

    def any_task(self, flag: bool) -> bool:
        """True on every training task when `flag` is true on at least one (collective: every
        training task must call it at the same point)."""
        return any(row[0] > 0 for row in self.gather_floats([1.0 if flag else 0.0]))

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        """`values` (the same length on every task) of every training task, one row per task in
        rank order (collective, like any_task)."""
        return [list(values)]

    def barrier(self) -> None:
        """Wait until every training task reaches this point."""

    def shutdown(self) -> None:
        """Release the engine's resources; safe to call twice."""
