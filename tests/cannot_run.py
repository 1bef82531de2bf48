"""A test that cannot run on this machine (no root or network namespaces for the Slurm cluster, no
`mpirun`, no Horovod, no docs extra, ...) says so with `cannot_run(reason, fix)` or the mark
`unless(condition, reason, fix)`, and this plugin (tests/conftest.py loads it) decides, here and
nowhere else, what that is:

- outside CI a skip, whose reason and fix the `-ra` summary prints;
- under CI (`CI=true`, as .ci/run and CI services set it) a failure with the same reason and fix:
  a suite that could not run a part of itself has not passed.

Only skips made through this module count: a test's own `pytest.skip` for a case that does not
apply (a file system without `chattr +i`) stays a skip everywhere.

PYTEST_DONT_REWRITE: tests/helpers.py imports it before pytest loads it as a plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

CANNOT_RUN = "cannot run here: "  # every skip this module makes starts so


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this run is CI's: the CI variable set as CI services and .ci/run set it."""
    return environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def message(reason: str, fix: str) -> str:
    return f"{CANNOT_RUN}{reason}; fix: {fix}"


def cannot_run(reason: str, fix: str) -> NoReturn:
    """Ends the test: a skip outside CI, a failure under it (see pytest_runtest_makereport)."""
    pytest.skip(message(reason, fix))


def unless(condition: bool, reason: str, fix: str) -> pytest.MarkDecorator:
    """A skipif mark that cannot_run's rules apply to: skips outside CI, fails under it."""
    return pytest.mark.skipif(not condition, reason=message(reason, fix))


def outcome(skip_text: str, environ: Mapping[str, str] = os.environ) -> str:
    """What a skip whose text is `skip_text` becomes: "failed" for one of this module's under
    CI, else "skipped"."""
    return "failed" if in_ci(environ) and CANNOT_RUN in skip_text else "skipped"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if not report.skipped:
        return
    # A skip's longrepr is (path, line, "Skipped: TEXT").
    text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if outcome(text) == "failed":
        report.outcome = "failed"
        report.longrepr = (f"{text.removeprefix('Skipped: ')}\n(CI=true: a part of the suite that "
                           "cannot run fails CI instead of being skipped; outside CI it is a skip)")
