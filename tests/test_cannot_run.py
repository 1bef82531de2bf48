"""A test that cannot run on this machine is a skip outside CI and a failure under CI=true
(tests/cannot_run.py), with its reason and fix: the real-Slurm part on a machine that is not root or
has no network namespaces, and the others that say so the same way."""

from __future__ import annotations

import pytest

from tests import cannot_run
from tests.slurm import conftest as slurm_conftest


@pytest.mark.parametrize("ci, expected", [("true", "failed"), ("1", "failed"), ("", "skipped"),
                                          ("false", "skipped"), (None, "skipped")])
def test_a_test_that_cannot_run_fails_under_ci_and_is_skipped_elsewhere(ci, expected):
    environ = {} if ci is None else {"CI": ci}
    text = "Skipped: " + cannot_run.message("no frobnicator", "apt-get install frobnicator")
    assert cannot_run.outcome(text, environ) == expected
    # A test's own skip of a case that does not apply stays a skip, in CI too.
    assert cannot_run.outcome("Skipped: chattr +i is not available", environ) == "skipped"


def test_the_slurm_part_cannot_run_without_root_and_says_so():
    reason = slurm_conftest._cannot_run_reason(platform="linux", euid=1000)
    assert reason == "the test Slurm cluster needs root (network namespaces, bridge, /etc/hosts)"
    text = cannot_run.message(slurm_conftest.SKIPPED + reason, slurm_conftest.FIX)
    assert cannot_run.outcome(text, {"CI": "true"}) == "failed"
    assert cannot_run.outcome(text, {}) == "skipped"
    assert "`tools/slurm/cluster.sh check` says what is missing" in text
    reason = slurm_conftest._cannot_run_reason(platform="darwin", euid=0)
    assert reason == "the test Slurm cluster needs Linux network namespaces; this is darwin"
