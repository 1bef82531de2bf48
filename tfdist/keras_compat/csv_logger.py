"""Keras 3's CSVLogger fit again after a fit that did not end (an exception, a stop): the rows of
the new fit go to the file it opens, as Keras 3.15 writes them.

Keras 3.8's `CSVLogger.on_train_begin` opens its file anew (mode "w" unless append=True) but
keeps the CSV writer of the previous fit when that fit never reached `on_train_end` (which drops
it): the new rows go through the old, still open file object at its old offset into the file just
truncated, behind a run of NUL bytes where the header and the earlier rows were. Measured
(2026-11-27, TensorFlow 2.18.1): after a fit interrupted in its second epoch and a fit resumed at
epoch 1 with the same callback (BackupAndRestore's resume, tests/train/test_own_callbacks.py),
Keras 3.8.0's file held the NULs with epoch 1's row on the first line and epoch 2's after it (a
reader that skips the header line sees epoch 2 only); Keras 3.15.1 (its on_train_begin closes
the old file and drops the writer and keys) wrote the header and both rows. tf-keras keeps the
writer too, but its file (a tf.io.gfile.GFile) opens on the first write, so the old one goes on
appending to a file never truncated: left as it is.

Corrected by doing what Keras 3.15 does before Keras's own `on_train_begin` runs: where a previous
fit's writer is left, close its file and forget the writer and the column names (Keras 3.15's
finds none left). Tied to the source of `CSVLogger.on_train_begin` (keras_compat.known_sources): on
code tfdist did not run this on, Keras's own runs, and the log says so where the correction would
have acted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging

from tfdist.keras_compat.known_sources import known

log = logging.getLogger("tfdist")
NAME = "CSVLogger.on_train_begin"
_MARK = "_tfdist_csv_logger"


def apply(module) -> None:
    """Correct `module` (keras.src.callbacks.csv_logger) in place, once."""
    cls = module.CSVLogger
    if getattr(cls.on_train_begin, _MARK, False):
        return
    version = importlib.metadata.version("keras")
    cls.on_train_begin = forget_unended_fit(cls.on_train_begin, known(NAME, cls.on_train_begin),
                                            version)


def forget_unended_fit(original, is_known: bool, version: str):

    @functools.wraps(original)
    def on_train_begin(self, logs=None):
        if getattr(self, "writer", None) is not None:  # a fit that did not reach on_train_end
            if not is_known:
                log.warning(
                    "Keras %s's %s is code tfdist did not run its correction on: this "
                    "CSVLogger's previous fit did not end, and Keras may write this fit's rows "
                    "through that fit's file (Keras 3.8 lost them). Fix: a new CSVLogger for "
                    "each fit, or keras>=3.15.", version, NAME)
            else:
                old = getattr(self, "csv_file", None)
                if old is not None and not old.closed:
                    old.close()
                self.writer, self.keys = None, None
        return original(self, logs)

    setattr(on_train_begin, _MARK, True)
    return on_train_begin
