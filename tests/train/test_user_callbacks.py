"""tfdist.train.user_callbacks.install: only a training task that is not the chief of several
sends the script's callbacks and saves elsewhere; the chief, one task (mirrored) and an init()
again after it leave Keras's own. The runs on 2 workers: test_own_callbacks.py."""

from types import SimpleNamespace

import pytest

from tfdist.keras_compat import user_fit
from tfdist.train import user_callbacks

METHODS = ("fit", "save", "save_weights")


def registered():
    return {m for m in METHODS if any(n == user_callbacks.__name__ for n, _ in user_fit._HOOKS[m])}


@pytest.fixture(autouse=True)
def no_keras_wrapped(monkeypatch):
    monkeypatch.setattr(user_fit, "_install", lambda: None)
    yield
    for method in METHODS:
        user_fit.off(method, user_callbacks.__name__)


@pytest.mark.parametrize("is_chief,world_size,hooked", [(False, 2, True), (True, 2, False),
                                                        (True, 1, False)],
                         ids=["worker 1 of 2", "chief of 2", "one task"])
def test_who_is_redirected(is_chief, world_size, hooked):
    user_callbacks.install(
        SimpleNamespace(is_chief=is_chief, world_size=world_size, rank=int(not is_chief)))
    assert registered() == (set(METHODS) if hooked else set())


def test_install_again_as_chief_removes_the_hooks():
    user_callbacks.install(SimpleNamespace(is_chief=False, world_size=2, rank=1))
    user_callbacks.install(SimpleNamespace(is_chief=True, world_size=2, rank=0))
    assert registered() == set()
