"""The real two-node Slurm test cluster for the tests in this folder, and helpers to submit jobs.

The cluster (tools/slurm/cluster.sh: munge, slurmctld and two slurmd, each node in its own network
namespace on a bridge) is started once per session by the `slurm` fixture and stopped at the end,
unless it was started by hand (`make slurm-up`), TFDIST_SLURM_KEEP=1 is set, or another pytest
session on this machine still uses it (each session holds a shared lock on USERS_LOCK; the last
one out stops the cluster). Other test folders may import `slurm` and `jobdir` from here.
Where the machine cannot make network namespaces (or we are not root) the tests cannot run
(tests/cannot_run.py: skipped, failed under CI), and the reason is said loudly: a banner when the
first one cannot run and another at the end of the run, besides the `-ra` summary.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cannot_run import cannot_run, in_ci
from tests.helpers import (  # noqa: F401  (for the tests here)
    PYTHON, REPO, TFDIST, WAIT, clean_environ)

CLUSTER_SH = REPO / "tools" / "slurm" / "cluster.sh"
PROBES = Path(__file__).resolve().parent / "probes"

NODES = ("tfdist-node1", "tfdist-node2")
NODE_ADDRS = {"tfdist-node1": "10.250.0.11", "tfdist-node2": "10.250.0.12"}
CONTROLLER_ADDR = "10.250.0.1"

_TERMINAL = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE"
}

USERS_LOCK = Path("/run/lock/tfdist-slurm.users")


def _conf_dir() -> Path:
    return Path(os.environ.get("TFDIST_SLURM_DIR", "/run/tfdist-slurm"))


@dataclass
class Job:
    """A finished (or timed-out) batch job and the directory its files were written to."""
    job_id: str
    state: str
    exit_code: int
    signal: int
    workdir: Path
    info: dict = field(default_factory=dict)

    @property
    def log(self) -> str:
        """The batch script's stdout and stderr (slurm-<id>.out)."""
        path = self.workdir / f"slurm-{self.job_id}.out"
        return path.read_text() if path.exists() else ""

    def read(self, name: str) -> str:
        return (self.workdir / name).read_text()

    def json_files(self, pattern: str) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.workdir.glob(pattern))]

    def describe(self) -> str:
        return (f"job {self.job_id}: state {self.state}, exit code {self.exit_code}:{self.signal}\n"
                f"--- slurm-{self.job_id}.out ---\n{self.log}")


class SlurmCluster:
    """Submit to and query the test cluster."""

    def __init__(self, conf: Path):
        self.conf = conf
        self.nodes = NODES
        self.node_addrs = dict(NODE_ADDRS)

    def env(self) -> dict:
        return clean_environ(SLURM_CONF=self.conf)

    def cmd(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        proc = subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def job_info(self, job_id: str) -> dict:
        """`scontrol show job` as a dict (empty once Slurm has forgotten the job)."""
        out = self.cmd("scontrol", "show", "job", "-o", job_id, check=False)
        info = {}
        for item in out.split():
            key, _, value = item.partition("=")
            info.setdefault(key, value)
        return info

    def submit(self, script: str, *sbatch_args: str, workdir: Path, name: str = "job.sh") -> str:
        """Write `script` to workdir/name and sbatch it; returns the job id. Output goes to
        workdir/slurm-<id>.out and the job runs in workdir."""
        workdir.mkdir(parents=True, exist_ok=True)
        if not script.startswith("#!"):
            script = "#!/bin/bash\n" + script
        path = workdir / name
        path.write_text(script)
        path.chmod(0o755)
        out = self.cmd("sbatch", "--parsable", f"--chdir={workdir}",
                       f"--output={workdir}/slurm-%j.out", *sbatch_args, str(path))
        return out.strip().split(";")[0]

    def wait(self, job_id: str, workdir: Path, timeout: float = 300, poll: float = 0.25) -> Job:
        """Poll `scontrol show job` until the job ends (no accounting here, so no sacct).
        On timeout the job is cancelled and the test fails with its log."""
        deadline = time.monotonic() + timeout
        info: dict = {}
        while time.monotonic() < deadline:
            info = self.job_info(job_id)
            if info.get("JobState") in _TERMINAL:
                code, _, sig = info.get("ExitCode", "0:0").partition(":")
                return Job(job_id, info["JobState"], int(code), int(sig or 0), workdir, info)
            time.sleep(poll)
        self.cmd("scancel", job_id, check=False)
        job = Job(job_id, info.get("JobState", "?"), -1, 0, workdir, info)
        pytest.fail(f"job {job_id} did not finish within {timeout:.0f} s "
                    f"(last state {job.state}, reason {info.get('Reason')})\n{job.describe()}")

    def cancel_left(self, root: Path) -> list[str]:
        """Cancels the jobs still queued or running whose working directory is under `root` (a
        test's own, which every job of a test runs in) and prints the end of their logs; returns
        their ids. What a test killed at its time limit (pytest-timeout) or failed before its job
        ended leaves: without this it would run on ahead of the next tests' jobs."""
        out = self.cmd("squeue", "-h", "-o", "%i|%T|%Z", check=False)
        left = []
        for line in out.splitlines():
            job_id, state, workdir = (line.split("|", 2) + ["", ""])[:3]
            if Path(workdir).resolve().is_relative_to(root.resolve()):
                left.append(f"{job_id} ({state})")
                self.cmd("scancel", job_id.strip(), check=False)
        if left:
            print(f"cancelled the job(s) this test left: {', '.join(left)}", file=sys.stderr)
            for log in sorted(root.rglob("*.out")):
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-100:])
                print(f"--- {log} (last 100 lines) ---\n{tail}", file=sys.stderr)
        return left

    def sbatch(self, script: str, *sbatch_args: str, workdir: Path, timeout: float = 300) -> Job:
        """Submit and wait for the end (like `sbatch --wait`, without its up-to-10-s polling)."""
        return self.wait(self.submit(script, *sbatch_args, workdir=workdir), workdir, timeout)


def _cannot_run_reason(platform: str = sys.platform, euid: int | None = None) -> str | None:
    """Why the test cluster cannot run on this machine (None: it can). `platform` and `euid` are
    this machine's unless a test fakes them."""
    if not platform.startswith("linux"):
        return f"the test Slurm cluster needs Linux network namespaces; this is {platform}"
    if (os.geteuid() if euid is None else euid) != 0:
        return "the test Slurm cluster needs root (network namespaces, bridge, /etc/hosts)"
    proc = subprocess.run(["bash", str(CLUSTER_SH), "check"], capture_output=True, text=True)
    if proc.returncode != 0:
        return (proc.stderr.strip() or proc.stdout.strip()).replace("slurm-cluster: error: ", "")
    return None


def _cluster_sh(command: str, timeout: float = WAIT) -> subprocess.CompletedProcess:
    env = dict(os.environ, TFDIST_SLURM_STARTED_BY="tests")
    return subprocess.run(["bash", str(CLUSTER_SH), command],
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env=env)


SKIPPED = "real-Slurm tests need network namespaces: "
FIX = ("run the tests as root on Linux with network namespaces (`ip netns add` works): "
       "`tools/slurm/cluster.sh check` says what is missing")
_skip_reason: list[str] = []


def _banner(terminal, title: str, reason: str) -> None:
    terminal.write_line("")
    terminal.write_sep("!", title, red=True, bold=True)
    terminal.write_line(f"why: {reason}", red=True, bold=True)
    then = "fail: CI=true" if in_ci() else "are skipped"
    terminal.write_line(
        "They need root and Linux network namespaces (`tools/slurm/cluster.sh "
        f"check` says what is missing): the batch-job, requeue and multi-node tests "
        f"{then}.")


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    reports = stats.get("skipped", []) + stats.get("error", []) + stats.get("failed", [])
    skipped = [r for r in reports if SKIPPED in str(r.longrepr)]
    if skipped and _skip_reason:
        then = "FAILED (CI=true)" if in_ci() else "WERE SKIPPED"
        _banner(terminalreporter, f"{len(skipped)} REAL-SLURM TESTS {then}", _skip_reason[0])


@pytest.fixture(scope="session")
def slurm(request):
    """The running test cluster (started here if needed, stopped at the end of the session when
    this session started it and is the last one using it)."""
    reason = _cannot_run_reason()
    if reason:
        _skip_reason.append(reason)
        plugins = request.config.pluginmanager
        terminal, capture = (plugins.get_plugin(name)
                             for name in ("terminalreporter", "capturemanager"))
        if terminal is not None and capture is not None:
            with capture.global_and_fixture_disabled():  # to the terminal, now, not captured
                title = "THE REAL-SLURM TESTS CANNOT RUN" if in_ci(
                ) else "SKIPPING THE REAL-SLURM TESTS"
                _banner(terminal, title, reason)
        cannot_run(SKIPPED + reason, FIX)
    USERS_LOCK.parent.mkdir(parents=True, exist_ok=True)
    users = os.open(USERS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(users, fcntl.LOCK_SH)  # waits while another session is taking the cluster down
    try:
        conf = _conf_dir() / "slurm.conf"
        t0 = time.monotonic()
        try:
            # Within the first Slurm test's pytest timeout (this fixture's set-up counts there):
            # a start-up that hangs is reported with its output, not killed mid-apt by pytest.
            proc = _cluster_sh("up")
        except subprocess.TimeoutExpired as e:
            said = [
                o.decode(errors="replace") if isinstance(o, bytes) else (o or "")
                for o in (e.stdout, e.stderr)
            ]  # bytes even under text=True
            proc = subprocess.CompletedProcess(e.cmd, f"timed out after {WAIT} s", *said)
        if proc.returncode != 0:
            logs = ""
            for log in sorted((_conf_dir() / "log").glob("*.log")):
                logs += f"\n--- {log} ---\n" + "\n".join(log.read_text().splitlines()[-20:])
            pytest.fail(f"tools/slurm/cluster.sh up failed ({proc.returncode}):\n{proc.stdout}"
                        f"{proc.stderr}{logs}\n(make slurm-down cleans up)")
        print(f"\ntest Slurm cluster up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        yield SlurmCluster(conf)
        started_by = _conf_dir() / "started-by"
        by_tests = started_by.exists() and started_by.read_text().strip() == "tests"
        if by_tests and os.environ.get("TFDIST_SLURM_KEEP") != "1":
            try:  # the last session out takes it down
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            _cluster_sh("down", timeout=120)
    finally:
        os.close(users)


@pytest.fixture
def jobdir(tmp_path: Path, request):
    """A directory for one job's script and output (the tasks share the file system). At the
    test's end, also when it failed or pytest-timeout stopped it, the jobs it left queued or
    running (any working directory under its tmp_path) are cancelled, their logs printed."""
    d = tmp_path / "job"
    d.mkdir()
    yield d
    if "slurm" in request.fixturenames:
        try:
            cluster = request.getfixturevalue("slurm")
        except (pytest.skip.Exception, pytest.fail.Exception):  # no cluster, so no job
            return
        cluster.cancel_left(tmp_path)
