"""What every test gets: a tag in its environment that the processes it starts inherit, so that
tests.helpers.assert_nothing_left finds whatever of them is left."""

import os
import uuid

import pytest

from tests.helpers import JOB_TAG

pytest_plugins = ["tests.cpu_time"]  # each test's CPU seconds in the JUnit XML


@pytest.fixture(autouse=True)
def _job_tag(monkeypatch):
    monkeypatch.setenv(JOB_TAG, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
