"""tfdist.train.user_callbacks.install: only a training task that is not the chief of several
sends the script's callbacks and saves elsewhere; the chief, one task (mirrored) and an init()
again after it leave Keras's own. Every save reads the task's own values only where the engine's
saves run collectives (multi_worker) over several tasks. The runs on 2 workers:
test_own_callbacks.py, test_chief_save.py."""

from types import SimpleNamespace

import pytest

from tfdist.distribute.engine import Capabilities
from tfdist.keras_compat import user_fit
from tfdist.train import user_callbacks

METHODS = ("fit", "save", "save_weights")
PLAIN = Capabilities()  # saves without collectives (horovod, one task)
COLLECTIVE = Capabilities(collective_checkpoint=True)  # multi_worker


def registered(name=user_callbacks.__name__):
    return {m for m in METHODS if any(n == name for n, _ in user_fit._HOOKS[m])}


@pytest.fixture(autouse=True)
def no_keras_wrapped(monkeypatch):
    monkeypatch.setattr(user_fit, "_install", lambda: None)
    yield
    for method in METHODS:
        user_fit.off(method, user_callbacks.__name__)
        user_fit.off(method, user_callbacks._OWN_VALUES)


@pytest.mark.parametrize("is_chief,world_size,hooked", [(False, 2, True), (True, 2, False),
                                                        (True, 1, False)],
                         ids=["worker 1 of 2", "chief of 2", "one task"])
def test_who_is_redirected(is_chief, world_size, hooked):
    user_callbacks.install(
        SimpleNamespace(is_chief=is_chief,
                        world_size=world_size,
                        rank=int(not is_chief),
                        capabilities=PLAIN))
    assert registered() == (set(METHODS) if hooked else set())


def test_install_again_as_chief_removes_the_hooks():
    user_callbacks.install(SimpleNamespace(is_chief=False, world_size=2, rank=1,
                                           capabilities=PLAIN))
    user_callbacks.install(SimpleNamespace(is_chief=True, world_size=2, rank=0, capabilities=PLAIN))
    assert registered() == set()


@pytest.mark.parametrize("is_chief,world_size,capabilities,own_values",
                         [(True, 2, COLLECTIVE, True), (False, 2, COLLECTIVE, True),
                          (True, 1, COLLECTIVE, False), (True, 2, PLAIN, False)],
                         ids=["chief of 2", "worker 1 of 2", "one task", "horovod of 2"])
def test_whose_saves_read_own_values(is_chief, world_size, capabilities, own_values):
    """A chief's save alone must wait for nobody: under multi_worker of several tasks every
    task's save reads its own values; elsewhere (no collective in a save) Keras's own."""
    user_callbacks.install(
        SimpleNamespace(is_chief=is_chief,
                        world_size=world_size,
                        rank=int(not is_chief),
                        capabilities=capabilities))
    assert registered(
        user_callbacks._OWN_VALUES) == ({"save", "save_weights"} if own_values else set())
    user_callbacks.install(SimpleNamespace(is_chief=True, world_size=1, rank=0,
                                           capabilities=PLAIN))  # init() again: removed
    assert registered(user_callbacks._OWN_VALUES) == set()
