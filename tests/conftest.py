"""What every test gets: a tag in its environment that the processes it starts inherit, so that
tests.helpers.assert_nothing_left finds whatever of them is left."""

import os
import uuid

import pytest

from tests.helpers import JOB_TAG

# The suite's own Keras is tf-keras: TensorFlow's switch, set here before any test module imports
# TensorFlow and inherited by every process a test starts (the Slurm jobs too), as a user who
# exported it has it. `tfdist train` without --keras and `tf.keras` in the tests' own scripts then
# train tf-keras; Keras 3 is asked for where a test means it (--keras=3, `import keras`).
# TensorFlow's default, the switch unset (tf.keras is Keras 3), is what a user's login shell has:
# the field scripts run there (tests/field/helpers.py user_environ), and tests/test_keras_choice.py
# checks that tfdist keeps either.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

# Each test's CPU seconds in the JUnit XML; what a test that cannot run here becomes (a skip, or
# under CI a failure).
pytest_plugins = ["tests.cpu_time", "tests.cannot_run"]


@pytest.fixture(autouse=True)
def _job_tag(monkeypatch):
    monkeypatch.setenv(JOB_TAG, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
