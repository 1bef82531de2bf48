"""Engines over TensorFlow's own tf.distribute strategies."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import time
from typing import Optional

import tensorflow as tf
from tensorflow.python.eager import context  # the coordination service's key-value store

from tfdist.cluster import check_port_free
from tfdist.cluster.tf_config import ordered_tasks
from tfdist.distribute.defaults import (COLLECTIVES, DEFAULT_BYTES_PER_PACK,
                                        DEFAULT_COLLECTIVE_TIMEOUT)
from tfdist.distribute import layer_statistics
from tfdist.distribute.engine import Capabilities, Engine, LateInitError
from tfdist.errors import SAME_RUN_DIRECTORY, ConfigError, TfdistError

log = logging.getLogger("tfdist")

# TensorFlow's own AUTO runs RingReduce on GPUs too: its collective resolver picks NcclReduce only
# for the "nccl" hint or the experimental collective_nccl option (collective_param_resolver_local).
_IMPLEMENTATIONS = {
    "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def collective_for(requested: str, uses_gpus: bool) -> str:
    """--collective: auto is NCCL for a worker that trains on GPUs, else the gRPC ring. Every
    worker decides alone; under one Slurm GPU request all workers have GPUs alike (a job mixing
    GPU and CPU workers fails in TensorFlow anyway: a collective group has one device type)."""
    if requested not in COLLECTIVES:
        raise ConfigError(f"collective={requested!r}: expected one of {', '.join(COLLECTIVES)} "
                          "(--collective).")
    if requested == "auto":
        return "nccl" if uses_gpus else "ring"
    return requested


class DefaultEngine(Engine):
    """One process, one device: TensorFlow's default strategy."""

    name = "default"

    def __init__(self, cluster, roles):
        super().__init__(cluster, roles)
        self.strategy = tf.distribute.get_strategy()

    def distribute_dataset(self, dataset_fn):
        return dataset_fn(tf.distribute.InputContext())


class MirroredEngine(Engine):
    """All GPUs of one task (or `cpu_devices` logical CPUs, for testing on CPU machines)."""

    name = "mirrored"

    def __init__(self, cluster, roles, cpu_devices: int = 0):
        super().__init__(cluster, roles)
        devices = None
        if cpu_devices > 1:
            devices = _logical_cpus(cpu_devices)
        self.strategy = tf.distribute.MirroredStrategy(devices=devices)

    def average_layer_statistics(self, model) -> int:
        return _average_replica_statistics(self.strategy, model)

    def xla_refusal(self) -> Optional[str]:
        devices = self.strategy.extended.worker_devices
        if any("CPU" not in d.upper() for d in devices):
            return None  # several GPUs: not seen here
        return (f"XLA compiles the step for one device, and it reads the variables of all "
                f"{len(devices)} CPU devices' replicas (TensorFlow: \"Trying to access resource "
                "... located in device CPU:1 from device CPU:0\")")


class OneDeviceEngine(Engine):
    name = "one_device"

    def __init__(self, cluster, roles):
        super().__init__(cluster, roles)
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        self.strategy = tf.distribute.OneDeviceStrategy(device)


class CentralStorageEngine(Engine):
    name = "central_storage"

    def __init__(self, cluster, roles):
        super().__init__(cluster, roles)
        self.strategy = tf.distribute.experimental.CentralStorageStrategy()


class _ClusterEngine(Engine):
    """What the engines over a TF_CONFIG cluster share."""

    def unreachable_tasks(self) -> list[str]:
        # A TCP connect to each peer's server port: a task whose process is gone refuses it (a
        # frozen one still accepts: its heartbeat tells that one). Ranks as explain_failure's.
        tf_config = self.roles.tf_config
        if tf_config is None:
            return []
        me = tf_config["task"]
        order = _rank_order(tf_config, self._type_order())
        gone = []
        for rank, (task_type, index) in enumerate(order):
            if (task_type, index) == (me["type"], me["index"]) or task_type == "evaluator":
                continue
            address = tf_config["cluster"][task_type][index]
            host, port = address.rsplit(":", 1)
            try:
                with socket.create_connection((host, int(port)), timeout=2):
                    pass
            except OSError:
                gone.append(f"{task_type} {index} (rank {rank}, {address})")
        return gone

    def explain_failure(self, error: BaseException) -> Optional[str]:
        return explain_lost_task(error, self.roles.tf_config, type_order=self._type_order())

    def _type_order(self) -> Optional[tuple[str, ...]]:
        # tfdist numbers the tasks it lays out chief, ps, workers (cluster.roles); a TF_CONFIG
        # of the user's is numbered as TensorFlow lists it (cluster.tf_config.ordered_tasks).
        return None if self.cluster.tf_config is not None else ("chief", "ps", "worker",
                                                                "evaluator")


def explain_lost_task(error: BaseException,
                      tf_config,
                      type_order: Optional[tuple[str, ...]] = None) -> Optional[str]:
    """Name the task that a gRPC/collective error says was lost, with its rank and address;
    ranks follow `type_order` (default: TensorFlow's order of a TF_CONFIG)."""
    lost = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
            tf.errors.DeadlineExceededError, tf.errors.UnknownError, tf.errors.InternalError)
    if not isinstance(error, lost) or tf_config is None:
        return None
    text = str(error)
    me = tf_config["task"]
    order = _rank_order(tf_config, type_order)
    for task_type, index in re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", text):
        index = int(index)
        if (task_type, index) == (me["type"], me["index"]) or (task_type, index) not in order:
            continue
        address = tf_config["cluster"][task_type][index]
        reason = "socket closed" if "Socket closed" in text else type(error).__name__
        return (f"Lost {task_type} {index} (rank {order.index((task_type, index))}, {address}): "
                f"{reason} while this task ({me['type']} {me['index']}) was training. That task "
                "died or its node failed; check its log. Training stops here; re-run with "
                f"{SAME_RUN_DIRECTORY} to resume from the last checkpoint.")
    return None


def _rank_order(tf_config, type_order: Optional[tuple[str, ...]]) -> list[tuple[str, int]]:
    """(task type, index) of every task, in rank order."""
    order = [(t, i) for t, i, _ in ordered_tasks(tf_config)]
    if type_order:
        order.sort(key=lambda task: (type_order.index(task[0]), task[1]))
    return order


def _average_replica_statistics(strategy, model, on_read_too: bool = False) -> int:
    """A model's layer statistics averaged over `strategy`'s replicas where each replica keeps its
    own (Keras 3; tf-keras makes them on-read variables, averaged whenever they are read, whose
    copies `on_read_too` averages as well)."""
    from tfdist.keras_compat import adapter

    if strategy.num_replicas_in_sync < 2 or (adapter(model).STATISTICS_AVERAGED_BY_STRATEGY
                                             and not on_read_too):
        return 0
    return layer_statistics.average(model, layer_statistics.strategy_averaging(strategy))


class MultiWorkerEngine(_ClusterEngine):
    """Synchronous data parallelism over tasks: MultiWorkerMirroredStrategy."""

    name = "multi_worker"
    capabilities = Capabilities(collective_checkpoint=True, batches_agreed=True)

    def __init__(self,
                 cluster,
                 roles,
                 collective: str = "auto",
                 bytes_per_pack: int = DEFAULT_BYTES_PER_PACK,
                 collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT):
        super().__init__(cluster, roles)
        # The GPUs left visible by tfdist.distribute.devices are the ones this worker trains on.
        self.collective = collective_for(collective, bool(tf.config.get_visible_devices("GPU")))
        log.info("multi_worker: gradients all-reduced with %s (--collective=%s)",
                 self.collective.upper(), collective)
        _export_tf_config(roles)
        check_port_free(roles.port, cluster.host, cluster.rank)
        comm = tf.distribute.experimental.CommunicationOptions(
            bytes_per_pack=bytes_per_pack,
            timeout_seconds=collective_timeout or None,
            implementation=_IMPLEMENTATIONS[self.collective])
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(
                cluster_resolver=_resolver(roles), communication_options=comm)
        except RuntimeError as err:
            if "must be configured at program startup" not in str(err):
                raise
            raise LateInitError(
                "tfdist.init() (MultiWorkerMirroredStrategy) must come before TensorFlow runs its "
                "first op: this script built a tensor, dataset or model first. Fix: call "
                "tfdist.init() right after the imports, before loading data or building the "
                "model.") from None
        self._gather_fn = None
        self._barriers = 0

    def average_layer_statistics(self, model) -> int:
        # tf-keras's on-read copies too: a save reads this task's own copy, which is then the
        # mean (a chief's save alone can wait for no collective: tfdist.distribute.own_values).
        return _average_replica_statistics(self.strategy, model, on_read_too=True)

    def xla_refusal(self) -> Optional[str]:
        if self.collective != "ring":
            return None  # NCCL: TensorFlow compiles it (not seen here: no GPU)
        return ("TensorFlow's XLA compiles NCCL collectives only, and this run all-reduces with "
                "RING (--collective=ring, the default on CPU workers; TensorFlow: \"Only "
                "compiling NCCL/auto collective is supported, got: ring\")")

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        if self._gather_fn is None:
            strategy = self.strategy

            @tf.function(reduce_retracing=True)
            def _gather(x):
                per_replica = strategy.run(lambda: tf.expand_dims(x, 0))
                return strategy.gather(per_replica, axis=0)

            self._gather_fn = _gather
        gathered = self._gather_fn(tf.constant(values, tf.float32)).numpy()
        # One row per replica, task by task: keep each task's first.
        per_task = max(1, self.num_replicas_in_sync // self.cluster.world_size)
        return [[float(v) for v in row] for row in gathered[::per_task]]

    def barrier(self) -> None:
        """A collective, then a hand-shake through the coordination service that rank 0 hosts:
        the others return once rank 0 has passed the collective, rank 0 once they all have. A
        collective alone lets a task return (and exit) while a peer still pulls its part of the
        collective from it, and that peer then fails with "Lost worker" (seen under load)."""
        self.gather_floats([0.0])
        ctx = context.context()
        if ctx.coordination_service is None or self.cluster.world_size < 2:
            return
        self._barriers += 1
        key = f"tfdist/barrier/{self._barriers}"
        if self.is_chief:
            ctx.set_config_key_value(f"{key}/passed", "1")
            for rank in range(1, self.cluster.world_size):
                ctx.get_config_key_value(f"{key}/{rank}")  # blocks until that rank has passed
        else:
            ctx.get_config_key_value(f"{key}/passed")
            try:
                ctx.set_config_key_value(f"{key}/{self.cluster.rank}", "1")
            except tf.errors.OpError:
                pass  # rank 0 has seen it and may leave before its answer reaches us


class ParameterServerEngine(_ClusterEngine):
    """Asynchronous training: the chief runs model.fit, ps and worker tasks serve."""

    name = "parameter_server"
    capabilities = Capabilities(batch_callbacks=False, exact_resume=False, replica_statistics=False)

    def __init__(self, cluster, roles, chief_timeout: float = 600.0):
        super().__init__(cluster, roles)
        _export_tf_config(roles)
        check_port_free(roles.port, cluster.host, cluster.rank)
        self.chief_timeout = chief_timeout
        self._chief_watch = _ChiefWatch(roles.tf_config["cluster"]["chief"][0], chief_timeout)
        if roles.task_type == "chief":
            self.strategy = tf.distribute.experimental.ParameterServerStrategy(_resolver(roles))
        else:
            self.strategy = tf.distribute.get_strategy()

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync if self.roles.trains else 0

    def training_ranks(self) -> list[int]:
        return [self.rank]  # the chief; ps and workers serve

    def xla_refusal(self) -> Optional[str]:
        return ("the variables live on the parameter servers and XLA compiles a worker's step for "
                "the worker's own device (TensorFlow: \"Trying to access resource ... located in "
                "device /job:ps/... from device /job:worker/...\")")

    def chief_finished(self) -> bool:
        """Non-blocking: whether the chief has come and gone (the end for the other tasks)."""
        return self._chief_watch.finished()

    def distribute_dataset(self, dataset_fn):
        # Each worker builds its own input pipeline; model.fit then needs steps_per_epoch.
        import tf_keras  # here: a Keras 3 process need not load tf-keras

        return tf_keras.utils.experimental.DatasetCreator(dataset_fn)

    def serve(self) -> None:
        """Serve as ps or worker until the chief has come and gone."""
        if self.roles.trains or self.roles.is_evaluator:
            return
        cluster = _training_cluster(self.roles)
        server = tf.distribute.Server(tf.train.ClusterSpec(cluster),
                                      job_name=self.roles.task_type,
                                      task_index=self.roles.task_index,
                                      protocol="grpc",
                                      start=True)
        # The chief reads the variables from here to checkpoint when preempted: a scheduler's
        # SIGTERM/SIGUSR1 must not end this task first. It ends once the chief is gone.
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
        log.info("%s %d serving on port %d until the chief finishes", self.roles.task_type,
                 self.roles.task_index, self.roles.port)
        while not self._chief_watch.finished():
            time.sleep(1.0)
        del server  # the process exits next; TensorFlow offers no clean server stop


class ChiefTimeout(TfdistError, TimeoutError):
    """The parameter-server chief never came up."""


class _ChiefWatch:
    """Whether the chief's server was reachable and then is not: the chief has exited.

    A refused connection says so at once. A connection that times out may be a loaded machine
    or a dead node: only `unreachable_for` seconds of nothing but timeouts say the chief is gone.
    """

    def __init__(self, address: str, timeout: float, unreachable_for: float = 60.0):
        self.address, self.timeout, self.unreachable_for = address, timeout, unreachable_for
        self.seen, self.start = False, time.monotonic()
        self.unreachable_since = None

    def finished(self) -> bool:
        host, port = self.address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                self.seen, self.unreachable_since = True, None
                return False
        except ConnectionRefusedError:
            gone = self.seen
        except OSError:  # timed out, or no route: say so only once it lasts
            now = time.monotonic()
            self.unreachable_since = self.unreachable_since or now
            gone = self.seen and now - self.unreachable_since >= self.unreachable_for
        if gone:
            return True
        if not self.seen and time.monotonic() - self.start > self.timeout:
            raise ChiefTimeout(f"The chief at {self.address} did not come up within "
                               f"{self.timeout:.0f} s; is task 0 running? Check its log.")
        return False


def _training_cluster(roles) -> dict:
    """The cluster that trains: the evaluator reads checkpoints and runs no server."""
    return {k: v for k, v in roles.tf_config["cluster"].items() if k != "evaluator"}


def _export_tf_config(roles) -> None:
    # Keras callbacks (BackupAndRestore, ModelCheckpoint) read the task type from TF_CONFIG.
    os.environ["TF_CONFIG"] = json.dumps(roles.tf_config)


def _resolver(roles):
    return tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec(
        _training_cluster(roles)),
                                                                task_type=roles.task_type,
                                                                task_id=roles.task_index,
                                                                rpc_layer="grpc")


def _logical_cpus(n: int) -> list[str]:
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or []) != n:
        tf.config.set_logical_device_configuration(cpu,
                                                   [tf.config.LogicalDeviceConfiguration()] * n)
    return [f"/cpu:{i}" for i in range(n)]


def single_task_engine() -> type[Engine]:
    """auto in one task: all its GPUs when there are several, else the default strategy."""
    if len(tf.config.get_visible_devices("GPU")) > 1:
        return MirroredEngine
    return DefaultEngine
