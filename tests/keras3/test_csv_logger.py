"""Keras 3's CSVLogger fit again after a fit that an exception ended (tfdist.keras_compat
.csv_logger): the file holds the header and the new fit's rows, nothing of the old writer's. On
Keras 3.8.0 without the correction the file started with NUL bytes and the new fit's first row
(on one line with them), then its second."""

import numpy as np
import pytest


class Interrupted(Exception):
    pass


def test_a_fit_after_an_interrupted_one_writes_the_header_and_its_rows(tmp_path):
    import keras

    import tfdist  # noqa: F401  # its corrections, applied on import

    path = tmp_path / "log.csv"
    model = keras.Sequential([keras.Input((1, )), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class StopInSecondEpoch(keras.callbacks.Callback):

        def __init__(self):
            super().__init__()
            self.armed = True

        def on_train_batch_end(self, batch, logs=None):
            if self.armed and self.epoch == 1:
                self.armed = False
                raise Interrupted

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

    callbacks = [keras.callbacks.CSVLogger(str(path)), StopInSecondEpoch()]
    x = np.ones((4, 1), "float32")
    with pytest.raises(Interrupted):
        model.fit(x, x, batch_size=2, epochs=3, callbacks=callbacks, verbose=0)
    model.fit(x, x, batch_size=2, epochs=3, initial_epoch=1, callbacks=callbacks, verbose=0)

    text = path.read_text()
    assert "\0" not in text, repr(text)
    lines = text.splitlines()
    assert lines[0].split(",")[0] == "epoch" and [line.split(",")[0]
                                                  for line in lines[1:]] == ["1", "2"], lines


def test_code_tfdist_did_not_run_the_correction_on_is_left_alone_and_said(caplog):
    from tfdist.keras_compat.csv_logger import forget_unended_fit

    calls = []

    class Logger:
        writer, keys, csv_file = "a previous fit's writer", ["loss"], None

        def on_train_begin(self, logs=None):
            calls.append(logs)

    logger = Logger()
    with caplog.at_level("WARNING", logger="tfdist"):
        forget_unended_fit(Logger.on_train_begin, False, "3.99.0")(logger, {"a": 1})
    assert calls == [{"a": 1}] and logger.writer == "a previous fit's writer"
    assert "Keras 3.99.0's CSVLogger.on_train_begin is code tfdist did not run" in caplog.text
