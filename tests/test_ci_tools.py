"""The test-suite tools of `make test` and `.ci/run`: tools/run_tests.py runs its three parts and
returns the first failing part's status; tools/slowest_tests.py reads pytest's own JUnit XML."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

from tests.helpers import REPO

SUITE = textwrap.dedent("""
    import subprocess
    import sys
    import time

    import pytest


    @pytest.mark.slurm
    def test_beside():
        pass


    def test_quick(tmp_path):  # each part's tmp_path root exists
        assert tmp_path.is_dir()


    def test_slow():
        time.sleep(0.3)


    def test_busy_child():  # CPU in a process it starts, little wall time of its own to sleep
        subprocess.run([sys.executable, "-c", "sum(range(10 ** 7))"], check=True)


    @pytest.mark.alone
    def test_alone():
        pass
""")


def test_slowest_tests_reads_pytests_junit_xml(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    xml = tmp_path / "out.xml"
    r = subprocess.run([
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p",
        "tests.cpu_time", f"--junitxml={xml}", "-W", "ignore::pytest.PytestUnknownMarkWarning",
        "test_suite.py"
    ],
                       cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(REPO)),
                       capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout
    out = subprocess.run(
        [sys.executable,
         str(REPO / "tools" / "slowest_tests.py"), "--top", "2", "stack",
         str(xml)],
        capture_output=True,
        text=True,
        check=True).stdout.splitlines()
    # No figure of the machine's speed is checked: the two slowest are the sleeper (0.3 s) and
    # the test whose child sums (its order against the sleep depends on the machine), the
    # costliest in CPU is the latter: the sleeper's CPU is near 0 on any machine.
    assert out[0].startswith("ci: stack: 5 tests, ") and out[0].endswith("the 2 slowest:"), out
    assert {line.rsplit("::", 1)[-1] for line in out[1:3]} == {"test_slow", "test_busy_child"}, out
    assert out[3] == "ci: stack: the 2 costliest in CPU (what the budget is spent on):", out
    assert len(out) == 6 and out[4].endswith("test_suite.py::test_busy_child"), out


def test_run_tests_runs_each_test_in_its_part_and_fails_with_the_first_failing_part(tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE + "\n\n@pytest.mark.alone\ndef test_fails():"
                                            "\n    assert False\n")
    name = f"selftest-{tmp_path.name}"
    reports = REPO / "build" / "test-reports"
    try:
        r = subprocess.run([
            sys.executable,
            str(REPO / "tools" / "run_tests.py"), name, "not test_nothing_is_named_so", "--",
            f"--rootdir={tmp_path}",
            str(tmp_path / "test_suite.py")
        ],
                           cwd=tmp_path,
                           capture_output=True,
                           text=True,
                           timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "pytest exit status per part: others 0, slurm 0, alone 1" in r.stdout, r.stdout
        # The others in one pytest-xdist worker per core (none on a 1-core machine).
        cores = os.cpu_count() or 1
        assert (f"created: {cores}/{cores} workers" in r.stdout) == (cores > 1), r.stdout
        ran = {
            part:
            sorted(
                case.get("name")
                for case in ET.parse(reports / f"{name}-{part}.xml").getroot().iter("testcase"))
            for part in ("slurm", "main", "alone")
        }
        assert ran == {
            "slurm": ["test_beside"],
            "main": ["test_busy_child", "test_quick", "test_slow"],
            "alone": ["test_alone", "test_fails"]
        }, ran
        # The Slurm part's output is shown once it has ended.
        assert "---- run_tests: " + name + ": the Slurm tests (pytest exit status 0)" in r.stdout
    finally:
        for path in reports.glob(f"{name}-*"):
            path.unlink()
