"""Horovod behind the same face as the TF strategies: the engine sets Horovod up for this task and
answers the runtime's questions with it.

Set-up (HorovodEngine.__init__), by what started the task:
- horovodrun (tfdist.cluster.horovodrun, on `Cluster.horovodrun`): its environment is used as it
  is, `hvd.init()`; so is an MPI launcher's for a Horovod built with MPI only (MPI's init).
- otherwise (srun, `tfdist launch`, mpirun with a Horovod built with gloo): HOROVOD_* from
  `roles.horovod`, rank 0 serves the rendezvous on the address the other ranks reach it at, every
  rank checks in (HorovodSetupError naming the missing ranks after HOROVOD_GLOO_TIMEOUT_SECONDS,
  default 30), then `hvd.init()`, and rank 0 stops the rendezvous once every rank has initialised
  (unless dynamic process sets or elastic mode need it): tfdist.distribute.horovod_rendezvous.
Then Horovod's rank and size are checked against the cluster's (or horovodrun's).

`horovod.tensorflow.keras` is bound to tf-keras by tfdist.keras_compat.horovod_binding, whatever the
order of the user's imports.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import tensorflow as tf

from tfdist.cluster import horovodrun
from tfdist.cluster.mpi import ENVIRONMENTS as MPI_LAUNCHERS
from tfdist.distribute import horovod_rendezvous as rendezvous
from tfdist.distribute import layer_statistics
from tfdist.distribute.defaults import COMPRESSIONS
from tfdist.distribute.engine import Engine
from tfdist.distribute.horovod_setup import HorovodSetupError, import_horovod_keras
from tfdist.errors import SAME_RUN_DIRECTORY, ConfigError

log = logging.getLogger("tfdist")

MPI_ENVIRONMENTS = frozenset(env.name for env in MPI_LAUNCHERS)
# Horovod needs its rendezvous after hvd.init() only to add process sets later, or to re-form the
# rings of an elastic job (measured: docs/security.md).
RENDEZVOUS_AFTER_INIT = ("HOROVOD_DYNAMIC_PROCESS_SETS", "HOROVOD_ELASTIC")


def check_optimizer_options(compression: str, backward_passes_per_step: int) -> None:
    """ConfigError unless `compression` is one of COMPRESSIONS and backward_passes_per_step >= 1."""
    if compression not in COMPRESSIONS:
        raise ConfigError(
            f"compression={compression!r}: expected one of {', '.join(COMPRESSIONS)}.")
    if backward_passes_per_step < 1:
        raise ConfigError(f"backward_passes_per_step={backward_passes_per_step}: expected >= 1.")


class HorovodEngine(Engine):
    """One process per replica; gradients all-reduced by Horovod (gloo) inside the optimizer.

    Options: `compression` ("none", or "fp16": gradients sent as fp16), `backward_passes_per_step`
    (gradients applied every that many batches, the aggregated ones averaged). Making the engine
    sets Horovod up (the module's docstring); a Horovod already initialised in this process (an
    earlier engine) is only checked.
    """

    name = "horovod"

    def __init__(self,
                 cluster,
                 roles,
                 compression: str = "none",
                 backward_passes_per_step: int = 1):
        super().__init__(cluster, roles)
        self._rendezvous: Optional[rendezvous.RendezvousService] = None  # rank 0's, while open
        self.hvd = self._init_horovod(os.environ)
        self.compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self.strategy = tf.distribute.get_strategy()

    # -----------------------------------------------------------------------------------------
    # Set-up

    def _init_horovod(self, environ):
        """Set Horovod up for this task (the module's docstring) and return
        `horovod.tensorflow.keras` (as `hvd`)."""
        cluster = self.cluster
        hvd = import_horovod_keras()
        ranks = cluster.horovodrun
        expected = (ranks.rank, ranks.size) if ranks else (cluster.rank, cluster.world_size)
        if hvd.is_initialized():
            self._check_ranks(hvd, expected)
            return hvd
        seconds = rendezvous.gloo_timeout(environ)
        own_rendezvous = False
        if ranks is not None:
            log.info("Horovod: using the environment of horovodrun as it is.")
            hvd.init()
        elif cluster.environment in MPI_ENVIRONMENTS and hvd.mpi_built() and not hvd.gloo_built():
            log.info("Horovod: built with MPI only; it initialises through %s's MPI.",
                     cluster.environment)
            hvd.init()
        else:
            stale = horovodrun.inherited(environ, cluster)
            if stale:
                log.warning(stale)
            environ[rendezvous.TIMEOUT_VAR] = f"{seconds:g}"  # gloo's own timeouts, as ours
            env = rendezvous.set_horovod_environ(self.roles, environ)
            if cluster.world_size > 1:
                addr = env["HOROVOD_GLOO_RENDEZVOUS_ADDR"]
                port = int(env["HOROVOD_GLOO_RENDEZVOUS_PORT"])
                if cluster.rank == 0:
                    self._rendezvous = rendezvous.serve_rendezvous(
                        cluster, port, host=rendezvous.rendezvous_bind_address(cluster, addr))
                try:
                    rendezvous.check_in(cluster, addr, port, seconds)
                except HorovodSetupError:
                    self._stop_rendezvous()
                    raise
            own_rendezvous = cluster.world_size > 1
            hvd.init()
        self._check_ranks(hvd, expected)
        if own_rendezvous:
            self._close_rendezvous(hvd, environ)
        log.info("Horovod rank %d of %d (local rank %d of %d) ready.", hvd.rank(), hvd.size(),
                 hvd.local_rank(), hvd.local_size())
        return hvd

    @staticmethod
    def _check_ranks(hvd, expected: tuple[int, int]) -> None:
        got = (hvd.rank(), hvd.size())
        if got != expected:
            hvd.shutdown()
            raise HorovodSetupError(
                f"Horovod started as rank {got[0]} of {got[1]}, but this task is rank "
                f"{expected[0]} of {expected[1]}. Is this Horovod built with gloo (`horovodrun "
                "--check-build`)?")

    def _close_rendezvous(self, hvd, environ) -> None:
        """Every rank: wait until all ranks have initialised Horovod (then no rank talks to the
        rendezvous any more: each ends its gloo rendezvous with a barrier and a last DELETE before
        its hvd.init() returns), then rank 0 stops serving it. Kept for a job that needs it
        later."""
        later = [v for v in RENDEZVOUS_AFTER_INIT if environ.get(v, "").lower() in ("1", "true")]
        if later:
            if self._rendezvous is not None:
                log.info("Horovod rendezvous kept open for the whole job: %s is set.", later[0])
            return
        hvd.allreduce(tf.constant(0.0), name="tfdist_rendezvous_done", op=hvd.Sum)
        if self._rendezvous is not None:
            server = self._rendezvous
            self._stop_rendezvous()
            log.debug("Horovod rendezvous on %s:%d closed: every rank has initialised.",
                      server.host, server.port)

    def _stop_rendezvous(self) -> None:
        server, self._rendezvous = self._rendezvous, None
        if server is not None:
            server.stop()

    def _initialised(self):
        """`hvd`, or HorovodSetupError once Horovod is shut down."""
        if not self.hvd.is_initialized():
            raise HorovodSetupError("Horovod is not initialised in this process: it was shut down "
                                    "(HorovodEngine.shutdown). Make a new engine (tfdist.init) to "
                                    "use it again.")
        return self.hvd

    # -----------------------------------------------------------------------------------------
    # What the runtime asks

    @property
    def num_replicas_in_sync(self) -> int:
        return self.hvd.size()

    @property
    def rank(self) -> int:
        return self.hvd.rank()  # also right under horovodrun, whose ranks the cluster's are not

    @property
    def world_size(self) -> int:
        return self.hvd.size()

    def input_context(self):
        """The tf.distribute.InputContext of this rank: one input pipeline per rank."""
        hvd = self._initialised()
        return tf.distribute.InputContext(num_input_pipelines=hvd.size(),
                                          input_pipeline_id=hvd.rank(),
                                          num_replicas_in_sync=hvd.size())

    def distribute_dataset(self, dataset_fn):
        from tfdist.distribute.rank_split import mark

        # This rank's already: the two lines' fit (tfdist.distribute.horovod_fit) leaves it.
        return mark(dataset_fn(self.input_context()))

    def wrap_optimizer(self, optimizer):
        """Horovod's DistributedOptimizer around a tf_keras optimizer: gradients averaged across
        the ranks, optionally sent as fp16, and applied every `backward_passes_per_step` batches
        (the aggregated gradients averaged, so the learning rate means the same as with one
        pass)."""
        check_optimizer_options(self.compression, self.backward_passes_per_step)
        hvd = self._initialised()
        return hvd.DistributedOptimizer(optimizer,
                                        compression=getattr(hvd.Compression, self.compression),
                                        backward_passes_per_step=self.backward_passes_per_step,
                                        average_aggregated_gradients=True)

    def callbacks(self) -> list:
        """Broadcast of the initial variables from rank 0, and metric averaging across ranks.
        Put them before callbacks that read the metrics (checkpoints, loggers)."""
        hvd = self._initialised()
        return [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
        ]

    def average_layer_statistics(self, model) -> int:
        # Both Kerases: without a strategy each rank's statistics are its own.
        if self.cluster.world_size < 2:
            return 0
        import horovod.tensorflow as hvd  # initialised with Horovod's Keras module

        return layer_statistics.average(model, layer_statistics.horovod_averaging(hvd))

    def xla_refusal(self) -> Optional[str]:
        # Horovod registers XLA kernels for its ops in GPU builds only, and only with
        # HOROVOD_ENABLE_XLA_OPS=1 (horovod/tensorflow/xla_mpi_ops.cc; not seen here: no GPU).
        if (tf.config.get_visible_devices("GPU")
                and os.environ.get("HOROVOD_ENABLE_XLA_OPS") == "1"):
            return None
        return ("Horovod's all-reduce has no XLA kernel except in a GPU build with "
                "HOROVOD_ENABLE_XLA_OPS=1 (TensorFlow: \"No registered 'HorovodAllreduce' "
                "OpKernel for XLA_CPU_JIT devices\")")

    def explain_failure(self, error: BaseException) -> Optional[str]:
        # Either Horovod's own shutdown notice or gloo's socket error reaches the op first.
        signs = ("Horovod has been shut down", "Connection reset by peer",
                 "Connection closed by peer", "gloo")
        if not isinstance(error, tf.errors.OpError) or not any(s in str(error) for s in signs):
            return None
        size, rank = self.cluster.world_size, self.cluster.rank
        who = f"rank {1 - rank}" if size == 2 else "another rank"
        return (f"Horovod shut down while rank {rank} of {size} was training: {who} stopped or "
                "lost its connection (the first failing rank's log has the cause). Training stops "
                f"here; re-run with {SAME_RUN_DIRECTORY} to resume from the last checkpoint.")

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        gathered = self.hvd.allgather(tf.constant([values], tf.float32),
                                      name="tfdist_gather_floats")
        return [[float(v) for v in row] for row in gathered.numpy()]

    def barrier(self) -> None:
        """Wait until every rank is here (an allreduce of one number: Horovod 0.28's TensorFlow
        API has no barrier)."""
        hvd = self._initialised()
        hvd.allreduce(tf.constant(0.0), name="tfdist_barrier", op=hvd.Sum)

    def shutdown(self) -> None:
        """Shut Horovod down and stop the rendezvous server; safe to call twice."""
        if self.hvd.is_initialized():
            self.hvd.shutdown()
        self._stop_rendezvous()
