"""The test-suite tools of `make test` and `.ci/run`: tools/run_tests.py runs its three parts and
returns the first failing part's status; tools/slowest_tests.py reads pytest's own JUnit XML;
tools/keras3_releases.py picks the Keras releases to measure and reads each pytest run's output."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

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


def keras3_releases():
    """tools/keras3_releases.py as a module (its pure parts: no TensorFlow, no network)."""
    spec = importlib.util.spec_from_file_location("keras3_releases",
                                                  REPO / "tools" / "keras3_releases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


METADATA = textwrap.dedent("""\
    Metadata-Version: 2.1
    Name: tensorflow
    Version: 2.18.1
    Requires-Dist: absl-py >=1.0.0
    Requires-Dist: keras-nlp ; extra == "nlp"
    Requires-Dist: keras >=3.5.0
    Requires-Dist: tensorboard <2.19,>=2.18
""")
LISTING = textwrap.dedent("""\
    keras (3.15.1)
    Available versions: 3.15.1, 3.15.0, 3.14.1, 3.14.0, 3.9.2, 3.9.0, 3.5.0, 3.4.1, 3.0.0, 2.15.0
""")


def test_keras3_releases_takes_the_newest_patch_of_each_minor_tensorflow_admits():
    tool = keras3_releases()
    requirement = tool.keras_requirement(METADATA)
    assert str(requirement.specifier) == ">=3.5.0"
    assert tool.newest_patches(LISTING, requirement) == ["3.5.0", "3.9.2", "3.14.1", "3.15.1"]
    everything = ["3.0.0", "3.4.1", "3.5.0", "3.9.2", "3.14.1", "3.15.1"]
    assert tool.newest_patches(LISTING, None) == everything
    assert tool.keras_requirement("Requires-Dist: keras-nlp\n") is None


def pytest_output(*sections, summary):
    """A `pytest -q` output with these failure sections (test id, text) and summary line."""
    parts = ["F.F" if sections else "..", "=" * 20 + " FAILURES " + "=" * 20]
    parts += [f"{'_' * 10} {test} {'_' * 10}\n{text}" for test, text in sections]
    parts += ["=" * 10 + " short test summary info " + "=" * 10]
    parts += [f"FAILED tests/x.py::{test} - AssertionError: assert 1 == 0" for test, _ in sections]
    return "\n".join(parts + [summary]) + "\n"


UNKNOWN = ("tfdist.keras_compat.known_sources.KerasCorrectionUnknown: Keras 3.6.0 changed "
           "`keras.src.backend.tensorflow.trainer.TensorFlowTrainer._maybe_symbolic_build`, "
           "which tfdist corrects so that ...; tfdist ran that correction on the code of Keras "
           "3.8.0 only and does not patch code it has not run. Fix: ...")
# A task's traceback in a test's report (`tfdist launch` prefixes each line with the rank), under
# TensorFlow's heading: the error is the line after it.
TRACEBACK = ("E   AssertionError: rank 0 exited 1:\nE     [0] Traceback (most recent call last):\n"
             "E     [0] ValueError: in user code:\nE     [0]\n"
             "E     [0]     ValueError: Attempt to convert a value (PerReplica:{...})\n"
             "E   assert 1 == 0\ntests/x.py:12: AssertionError")


@pytest.mark.parametrize(
    "output,code,cell",
    [
        ("..\n2 passed in 95.31s (0:01:35)\n", 0, "passes"),
        ("s\nSKIPPED [1] tests/horovod/x.py:9: Horovod is not installed\n1 skipped in 0.5s\n", 0,
         "skipped: Horovod is not installed"),
        (pytest_output(
            ("test_a[3]", "E   AssertionError: " + UNKNOWN), summary="1 failed, 1 passed in 60.0s"),
         1, "refused: KerasCorrectionUnknown, 1 of 2 passed"),
        (pytest_output(("test_b", "tfdist train: error: Keras 3.8.0's `fit` takes no distributed "
                        "dataset (a DistributedDatasetsFromFunction, ...)"),
                       summary="1 failed in 30.2s"), 1, "refused: DistributedInputUnsupported"),
        (pytest_output(("test_c", TRACEBACK), summary="1 failed, 1 passed in 70.0s"), 1,
         "fails: ValueError: Attempt to convert a value (PerReplica:{...}), 1 of 2 passed"),
        # A refusal beside a failure of another kind: the failure is what the group says.
        (pytest_output(("test_a", UNKNOWN), ("test_c", TRACEBACK), summary="2 failed in 9.0s"), 1,
         "fails: ValueError: Attempt to convert a value (PerReplica:{...}); also refused: "
         "KerasCorrectionUnknown"),
        ("ERROR: not found: /work/tests/x.py::test_gone\nno tests ran in 0.01s\n", 4,
         "fails: ERROR: not found: /work/tests/x.py::test_gone"),
    ],
    ids=[
        "passed", "skipped", "refused", "refused-by-the-cli", "failed", "refused-and-failed",
        "no-such-test"
    ])
def test_keras3_releases_reads_a_pytest_output_as_passed_failed_or_refused(output, code, cell):
    assert keras3_releases().classify(output, code).cell() == cell


def test_keras3_releases_names_the_functions_a_refusal_names():
    verdict = keras3_releases().classify(
        pytest_output(("test_a", UNKNOWN), summary="1 failed in 1.0s"), 1)
    assert (verdict.kind, verdict.refused) == ("refused", ("KerasCorrectionUnknown", ))
    assert verdict.functions == ("TensorFlowTrainer._maybe_symbolic_build", )


def run_tests(tmp_path, name: str, selection: str, suite: str, env=None):
    (tmp_path / "test_suite.py").write_text(suite)
    return subprocess.run([
        sys.executable,
        str(REPO / "tools" / "run_tests.py"), name, selection, "--", f"--rootdir={tmp_path}", "-p",
        "tests.cannot_run",
        str(tmp_path / "test_suite.py")
    ],
                          cwd=tmp_path,
                          capture_output=True,
                          text=True,
                          timeout=300,
                          env=dict(env or _outside_ci(), PYTHONPATH=str(REPO), TESTS_WORKERS="1"))


def _outside_ci() -> dict:
    """This environment less CI (.ci/run exports CI=true): a run as outside CI."""
    return {k: v for k, v in os.environ.items() if k != "CI"}


CANNOT = textwrap.dedent("""
    import pytest

    from tests.cannot_run import cannot_run


    def test_runs():
        pass


    @pytest.mark.alone
    def test_needs_what_is_missing():
        cannot_run("no frobnicator here", "apt-get install frobnicator")
""")


def test_run_tests_fails_a_part_that_collects_no_test_and_skips_a_part_the_selection_rules_out(
        tmp_path):
    name = f"selftest-{tmp_path.name}"
    try:
        # No test is marked slurm: the Slurm part collects none (pytest's exit status 5).
        r = run_tests(tmp_path, name, "not test_nothing_is_named_so", CANNOT)
        assert r.returncode == 5, r.stdout + r.stderr
        assert "pytest exit status per part: others 0, slurm 5, alone 0" in r.stdout, r.stdout
        assert f"run_tests: {name}: the slurm part collected no test: a failure" in r.stdout
        # Outside CI the test that cannot run is a skip, its reason and fix in the summary.
        assert (f"run_tests: {name}: alone: 1 skipped: cannot run here: no frobnicator here; "
                "fix: apt-get install frobnicator") in r.stdout, r.stdout
        # "not slurm" rules the Slurm part out: it is not run, and nothing fails.
        r = run_tests(tmp_path, name, "not slurm", CANNOT)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"run_tests: {name}: the slurm part is not selected" in r.stdout, r.stdout
        # Under CI the same test fails, saying why and how to fix it.
        r = run_tests(tmp_path, name, "not slurm", CANNOT, env=dict(os.environ, CI="true"))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "pytest exit status per part: others 0, slurm 0, alone 1" in r.stdout, r.stdout
        assert "no frobnicator here; fix: apt-get install frobnicator" in r.stdout, r.stdout
        assert "CI=true: a part of the suite that cannot run fails CI" in r.stdout, r.stdout
    finally:
        for path in (REPO / "build" / "test-reports").glob(f"{name}-*"):
            path.unlink()


def test_run_tests_knows_which_parts_a_selection_rules_out():
    spec = importlib.util.spec_from_file_location("run_tests", REPO / "tools" / "run_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = module.markers()
    assert {"slurm", "alone", "default_stack", "newest"} <= set(names), names
    # make test-newest's selection: no Slurm part, the others.
    newest = "not slurm and not default_stack and (not slow or newest)"
    assert not module.can_select(module.narrowed(newest, "slurm"), names)
    assert module.can_select(module.narrowed(newest, "not slurm and not alone"), names)
    assert module.can_select(module.narrowed(newest, "alone and not slurm"), names)
    assert module.can_select(module.narrowed("", "slurm"), names)
    assert not module.can_select("alone and not alone", names)


def test_every_wait_a_test_writes_fits_in_its_timeout():
    """A test's own wait (a process's timeout, a deadline) ends before pytest-timeout's, so that
    the test fails with the process's output or the job's log and cancels its Slurm jobs: no single
    wait over tests.helpers.WAIT; a test that waits on several things in turn sets its limit with
    timeout_for (tests/slurm/test_jobs.py, test_sweep_jobs.py, test_requeue.py)."""
    from tests.helpers import TEST_TIMEOUT, WAIT
    import configparser
    import re
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    assert config.getint("tool:pytest", "timeout") == TEST_TIMEOUT
    # Not a wait: a watch's own setting. (The cluster's start counts: its fixture's set-up runs
    # inside the first Slurm test's timeout.)
    not_waits = {"tests/distribute/test_chief_watch.py"}
    wait = re.compile(r"(?:timeout=|timeout: float = |monotonic\(\) \+ )(\d+)\b")
    longer = [
        f"{path.relative_to(REPO)}: {m.group(0)}" for path in sorted((REPO / "tests").rglob("*.py"))
        if str(path.relative_to(REPO)) not in not_waits for m in wait.finditer(path.read_text())
        if int(m.group(1)) > WAIT
    ]
    assert not longer, longer
