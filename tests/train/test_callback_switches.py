"""--nometer and --nopreemption leave their callbacks out of the list, and the signals alone."""

import signal

import pytest

import tfdist
from tfdist.train.callbacks import training_callbacks
from tfdist.train.preemption import PreemptionHandler
from tfdist.train.throughput import ThroughputMeter


def kinds(callbacks):
    return {type(c) for c in callbacks} | {base for c in callbacks for base in type(c).__mro__}


@pytest.fixture
def default_signals():
    """SIGTERM and SIGUSR1 at their defaults during the test; the test process's own after."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    for sig in handlers:
        signal.signal(sig, signal.SIG_DFL)
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_meter_and_preemption_by_default(tmp_path, default_signals):
    engine = tfdist.init(strategy="one_device").engine
    cbs = training_callbacks(engine, str(tmp_path), batch_size=8, tensorboard=False)
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the handler catches them
    assert {ThroughputMeter, PreemptionHandler} <= kinds(cbs)
    assert cbs.meter is not None and cbs.preemption is not None


def test_switched_off_they_are_not_there(tmp_path, default_signals):
    engine = tfdist.init(strategy="one_device").engine
    cbs = training_callbacks(engine,
                             str(tmp_path),
                             batch_size=8,
                             tensorboard=False,
                             meter=False,
                             preemption=False)
    assert not {ThroughputMeter, PreemptionHandler} & kinds(cbs)
    assert cbs.meter is None and cbs.preemption is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_nothing_runs_per_step_in_python_by_default(strategy):
    """Without model_dir (no step checkpoints, no preemption agreement) tfdist's callbacks, the
    watchdog and the meter included, have no batch hook: Keras's fit then runs none of its per-step
    callback machinery (the watchdog polls the optimizer's step counter from its thread)."""
    import tensorflow as tf

    rt = tfdist.init(strategy=strategy)
    with rt.scope():
        model = tf.keras.Sequential([tf.keras.Input((4, )), tf.keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse")
    cbs = rt.callbacks(batch_size=8)
    assert cbs.watchdog is not None and cbs.meter is not None
    hooks = tf.keras.callbacks.CallbackList(list(cbs), model=model)
    assert not hooks._should_call_train_batch_hooks, [
        type(c).__name__ for c in cbs if c._implements_train_batch_hooks()
    ]
    # The same list with a callback that has one: Keras does call them (the check can fail).
    hooks = tf.keras.callbacks.CallbackList(
        list(cbs) +
        [tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: None)],
        model=model)
    assert hooks._should_call_train_batch_hooks
