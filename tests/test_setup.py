"""Set-up that says what it needs: the prerequisite check of `make install` / a Horovod build,
and the loud notice when the real-Slurm tests cannot run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "tools" / "check_prereqs.sh"


def check(target, path, python):
    return subprocess.run(["/bin/bash", str(CHECK), target],
                          env=dict(os.environ, PATH=path, PYTHON=python),
                          capture_output=True,
                          text=True)


def test_a_machine_with_everything_passes_silently():
    for target in ("install", "horovod"):
        r = check(target, os.environ["PATH"], os.path.realpath(sys.executable))
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), r.stderr


def test_a_horovod_build_without_compilers_prints_the_apt_line(tmp_path):
    # A PATH with make and Python only: what a minimal image has.
    (tmp_path / "make").symlink_to("/usr/bin/make")
    (tmp_path / "python3").symlink_to(os.path.realpath(sys.executable))
    r = check("horovod", str(tmp_path), "python3")
    assert r.returncode == 1
    assert "no 'cmake' on PATH" in r.stderr and "no 'g++' on PATH" in r.stderr
    assert r.stderr.splitlines()[-1] == "  apt-get install -y cmake g++"


def test_make_install_stops_first_without_a_python_that_makes_venvs(tmp_path):
    venv = tmp_path / "venv"
    r = subprocess.run(
        ["make", "-C",
         str(REPO), "install", f"VENV={venv}", "PYTHON=/nonexistent/python3"],
        capture_output=True,
        text=True)
    assert r.returncode != 0
    assert "tfdist: make install needs what this machine lacks:" in r.stderr
    assert "  apt-get install -y python3 python3-venv" in r.stderr.splitlines()
    assert not venv.exists()  # nothing was attempted


def _user_namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "true"]).returncode == 0
    except OSError:
        return False


def _as_non_root(tmp_path, ci: str) -> subprocess.CompletedProcess:
    # In a user namespace of its own this process is uid 65534: not root, as for most users.
    return subprocess.run([
        "unshare", "--user", sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
        f"--basetemp={tmp_path / 'bt'}", "-q", "tests/slurm/test_requeue.py"
    ],
                          cwd=REPO,
                          capture_output=True,
                          text=True,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", CI=ci))


@pytest.mark.skipif(not _user_namespaces(), reason="needs `unshare --user`")
def test_skipped_slurm_tests_are_announced_loudly(tmp_path):
    r = _as_non_root(tmp_path, ci="")
    assert r.returncode == 0, r.stdout[-3000:]
    out = r.stdout
    # Once when it happens, once at the end: not only in the -ra summary.
    assert "SKIPPING THE REAL-SLURM TESTS" in out
    assert "1 REAL-SLURM TESTS WERE SKIPPED" in out
    assert out.count("why: the test Slurm cluster needs root") == 2, out
    assert out.index("WERE SKIPPED") < out.index("short test summary info")


@pytest.mark.skipif(not _user_namespaces(), reason="needs `unshare --user`")
def test_slurm_tests_that_cannot_run_fail_ci_saying_why_and_the_fix(tmp_path):
    r = _as_non_root(tmp_path, ci="true")
    assert r.returncode == 1, r.stdout[-3000:]
    out = r.stdout
    assert "THE REAL-SLURM TESTS CANNOT RUN" in out, out
    assert "1 REAL-SLURM TESTS FAILED (CI=true)" in out, out
    assert "1 error" in out, out
    assert ("cannot run here: real-Slurm tests need network namespaces: the test Slurm cluster "
            "needs root") in out, out
    assert "fix: run the tests as root on Linux with network namespaces" in out, out
