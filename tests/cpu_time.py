"""A pytest plugin: each test's CPU seconds, as the property `cpu_s` of its JUnit XML test case.

Wall time grows with whatever runs beside a test (3-7x between an idle and a loaded machine);
CPU time does not, and CPU is what a 2-core CI machine runs out of: tools/slowest_tests.py adds
it up and names the tests that spend it."""

import resource

import pytest


def _cpu_seconds() -> float:
    """CPU time of this pytest process and of every process it started and waited for (their
    children included, when each waited for its own): Slurm jobs' CPU is slurmd's, not counted."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._tfdist_cpu_start = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Set-up to teardown; a module fixture's processes count in the first test that asks."""
    if call.when == "teardown" and hasattr(item, "_tfdist_cpu_start"):
        item.user_properties.append(("cpu_s", f"{_cpu_seconds() - item._tfdist_cpu_start:.1f}"))
    yield
