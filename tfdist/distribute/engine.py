"""The small set of questions every engine (TF strategy or Horovod) answers the same way."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional

from tfdist.cluster import Cluster, Roles

DatasetFn = Callable[[Any], Any]  # tf.distribute.InputContext -> tf.data.Dataset


class LostTaskError(RuntimeError):
    """Another task of the job died or became unreachable during training."""


class LateInitError(RuntimeError):
    """tfdist.init() ran after TensorFlow had started its runtime (an op, a dataset, a model)."""


class Engine:
    """A distribution engine configured for this task. Subclasses set `strategy`."""

    name = ""

    def __init__(self, cluster: Cluster, roles: Roles, **options: Any):
        self.cluster, self.roles, self.options = cluster, roles, options
        self.strategy = None

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def is_chief(self) -> bool:
        return self.roles.is_chief

    @property
    def trains(self) -> bool:
        """False for tasks that only serve (parameter servers, parameter-server workers) and for
        the parameter-server evaluator."""
        return True

    @property
    def evaluates(self) -> bool:
        """True for the parameter-server evaluator: it evaluates the chief's checkpoints."""
        return False

    def chief_finished(self) -> bool:
        """Non-blocking: whether the chief has come and gone (the evaluator's end)."""
        raise NotImplementedError(f"{self.name} has no task that waits for the chief")

    def scope(self) -> contextlib.AbstractContextManager:
        return self.strategy.scope()

    def distribute_dataset(self, dataset_fn: DatasetFn) -> Any:
        """What `model.fit` takes, with dataset_fn called once per input pipeline."""
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return optimizer

    def callbacks(self) -> list:
        return []

    def explain_failure(self, error: BaseException) -> Optional[str]:
        """A one-paragraph explanation when `error` means a peer task was lost, else None."""
        return None

    def serve(self) -> None:
        """Run this task's server until the job is done (tasks that do not train)."""

    def any_task(self, flag: bool) -> bool:
        """True on every training task when `flag` is true on at least one (collective: every
        training task must call it at the same point)."""
        return any(row[0] > 0 for row in self.gather_floats([1.0 if flag else 0.0]))

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        """`values` (the same length on every task) of every training task, in rank order
        (collective, like any_task; a task with several local replicas appears once per
        replica)."""
        return [list(values)]

    def barrier(self) -> None:
        """Wait until every training task reaches this point."""

    def shutdown(self) -> None:
        """Release the engine's resources; safe to call twice."""
