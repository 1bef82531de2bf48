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
