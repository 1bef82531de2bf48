"""Horovod behind the same face as the TF strategies."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfdist.distribute import horovod_setup, layer_statistics
from tfdist.distribute.engine import Engine


class HorovodEngine(Engine):
    """One process per replica; gradients all-reduced by Horovod (gloo) inside the optimizer."""

    name = "horovod"

    def __init__(self,
                 cluster,
                 roles,
                 compression: str = "none",
                 backward_passes_per_step: int = 1,
                 **options):
        super().__init__(cluster, roles, **options)
        self.hvd = horovod_setup.init_horovod(cluster, roles)
        self.compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self.strategy = tf.distribute.get_strategy()

    @property
    def num_replicas_in_sync(self) -> int:
        return self.hvd.size()

    @property
    def rank(self) -> int:
        return self.hvd.rank()  # also right under horovodrun, which tfdist's cluster does not read

    @property
    def world_size(self) -> int:
        return self.hvd.size()

    def distribute_dataset(self, dataset_fn):
        return dataset_fn(horovod_setup.input_context())

    def wrap_optimizer(self, optimizer):
        return horovod_setup.distributed_optimizer(
            optimizer,
            compression=self.compression,
            backward_passes_per_step=self.backward_passes_per_step)

    def callbacks(self) -> list:
        return horovod_setup.horovod_callbacks()

    def average_layer_statistics(self, model) -> int:
        # Both Kerases: without a strategy each rank's statistics are its own.
        if self.cluster.world_size < 2:
            return 0
        import horovod.tensorflow as hvd  # initialised with Horovod's Keras module

        return layer_statistics.average(model, layer_statistics.horovod_averaging(hvd))

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
                "here; re-run with the same --model_dir to resume from the last checkpoint.")

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        gathered = self.hvd.allgather(tf.constant([values], tf.float32),
                                      name="tfdist_gather_floats")
        return [[float(v) for v in row] for row in gathered.numpy()]

    def barrier(self) -> None:
        horovod_setup.barrier()

    def shutdown(self) -> None:
        horovod_setup.shutdown()
