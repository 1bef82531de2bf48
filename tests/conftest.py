"""What every test gets: a tag in its environment that the processes it starts inherit, so that
tests.helpers.assert_nothing_left finds whatever of them is left."""

import os
import uuid

import pytest

from tests.helpers import JOB_TAG

# The suite's Keras is the users': TensorFlow's default, its switch unset (tf.keras is Keras 3), in
# this process (its in-process tests import TensorFlow after this file) and in every process a
# test starts. A switch exported by the caller's shell is dropped here, before any test module
# imports TensorFlow, so that the suite tests the same Keras on every machine. tf-keras is asked
# for where a test means it: `tfdist train --keras=2`, or the switch in the environment it passes
# (tests.helpers.keras_environ), as a user of tf-keras exports it.
os.environ.pop("TF_USE_LEGACY_KERAS", None)

# Each test's CPU seconds in the JUnit XML; what a test that cannot run here becomes (a skip, or
# under CI a failure).
pytest_plugins = ["tests.cpu_time", "tests.cannot_run"]


@pytest.fixture(autouse=True)
def _job_tag(monkeypatch):
    monkeypatch.setenv(JOB_TAG, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")


@pytest.fixture(autouse=True)
def _program_as_before():
    """A test that calls tfdist.init() in this process leaves the program as it found it: no
    default strategy of tfdist's and no hooks on Keras's compile, fit and save (which the next
    test in the same process, e.g. one of its own strategy, would otherwise meet)."""
    yield
    import sys

    if "tfdist.keras_compat.user_fit" not in sys.modules:
        return
    from tfdist.keras_compat import user_fit

    for hooks in user_fit._HOOKS.values():
        hooks.clear()
    if "tfdist.distribute.default_strategy" in sys.modules and "tensorflow" in sys.modules:
        sys.modules["tfdist.distribute.default_strategy"].clear()
