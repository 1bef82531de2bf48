"""How many batches this task's input pipeline has delivered: what tells the progress watchdog
which rank of a stalled synchronous job waits for its input.

Keras fetches the batch inside the traced step, so nothing outside can see a step waiting for
it. A rank whose pipeline hangs has delivered fewer batches than the others, which got theirs
and wait in the all-reduce. A map at the end of the pipeline adds 1 to a variable per batch
(no Python, no host sync per step); the watchdog's thread reads it only when the job stalls.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfdist.distribute.default_strategy import outside


class InputCounter:
    """Wraps dataset functions (`counted`) and reads the total (`read`)."""

    def __init__(self):
        # This task's own: outside the program's default strategy (distribute.default_strategy).
        with outside(), tf.device("/cpu:0"):
            self.variable = tf.Variable(0,
                                        dtype=tf.int64,
                                        trainable=False,
                                        name="tfdist_input_batches")

    @classmethod
    def possible(cls) -> bool:
        # Made inside a strategy's scope of the script's own (not the default tfdist.init() set,
        # which `outside` leaves) it would be a distributed variable (MultiWorkerMirrored
        # initializes those with a collective): then nothing is counted.
        with outside():
            return not tf.distribute.has_strategy()

    def counted(self, dataset_fn):
        variable = self.variable

        def count(*element):
            variable.assign_add(1, read_value=False)
            return element if len(element) > 1 else element[0]

        return lambda ctx: dataset_fn(ctx).map(count)

    def read(self) -> Optional[int]:
        return int(self.variable.numpy())
