"""jobs/task.sh, what every task of a batch job runs under srun, with real processes and signals
(no Slurm: the signals a step's end sends are sent here by hand).

SIGTERM must not end task.sh before its command: where Slurm finds a step's processes by their
parents (proctrack/linuxproc, as in the test cluster), a command orphaned by task.sh's death
escapes the SIGKILL after KillWait; a rank stuck in TensorFlow's teardown after a requeue then
held its port until the requeued run's task found it in use.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO

TASK = REPO / "jobs" / "task.sh"

# A command that says when its SIGTERM handler is in place, records the signal, and ends with
# status 75 (preempted, as tfdist's tasks do) only once the test lets it.
COMMAND = """
import os, signal, sys, time
folder = sys.argv[1]
def on_term(signum, frame):
    open(os.path.join(folder, "terminated"), "w").close()
signal.signal(signal.SIGTERM, on_term)
with open(os.path.join(folder, "ready.tmp"), "w") as f:
    f.write(f"{os.getpid()} {os.getppid()}")
os.rename(os.path.join(folder, "ready.tmp"), os.path.join(folder, "ready"))
while not os.path.exists(os.path.join(folder, "release")):
    time.sleep(0.05)
sys.exit(int(sys.argv[2]))
"""


def start(tmp_path: Path, status: int, rank: int = 1) -> subprocess.Popen:
    env = dict(os.environ,
               SLURM_PROCID=str(rank),
               SLURM_NTASKS="2",
               SLURMD_NODENAME="node",
               TFDIST_PREEMPT_GRACE="3600")
    return subprocess.Popen(
        ["bash", str(TASK), sys.executable, "-c", COMMAND,
         str(tmp_path),
         str(status)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"task.sh ended ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} within {timeout} s"
        time.sleep(0.05)


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def children_of(pid: int) -> list[str]:
    """The names of a process's children (Linux /proc); a child gone meanwhile is left out."""
    names = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            names.append(Path(f"/proc/{child}/comm").read_text().strip())
        except OSError:
            pass
    return names


def test_sigterm_is_passed_on_and_task_sh_outlives_its_command(tmp_path):
    proc = start(tmp_path, status=75)
    try:
        wait_for(tmp_path / "ready", proc)
        child, _ = map(int, (tmp_path / "ready").read_text().split())
        os.kill(proc.pid, signal.SIGTERM)  # task.sh only, as a signal to the shell would
        wait_for(tmp_path / "terminated", proc)  # passed on to the command
        # The command still runs (it has not been let go), so task.sh must still be there, its
        # parent: the step's SIGKILL, which follows parents, still reaches it.
        assert proc.poll() is None, proc.communicate()[0]
        assert parent_of(child) == proc.pid
        (tmp_path / "release").touch()
        # Rank 1's status 75 after a SIGTERM: the step is ending, so no hold (an hour here: a
        # held exit would not come within this wait, on any machine).
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 75, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_commands_status_passes_through(tmp_path):
    (tmp_path / "release").touch()
    proc = start(tmp_path, status=3, rank=0)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    assert "tfdist job: task 0 of 2 on node (pid " in out


def test_rank_1_preempted_without_a_signal_holds_its_exit_until_ended(tmp_path):
    # Status 75 on rank 1 with no SIGTERM yet: it holds (rank 0 may still be checkpointing)
    # until srun ends it; then it exits 75.
    (tmp_path / "release").touch()
    proc = start(tmp_path, status=75)
    try:
        # The hold is task.sh waiting on a `sleep` of its own once its command has ended; a
        # task.sh that did not hold would end here instead.
        deadline = time.monotonic() + 120
        while "sleep" not in children_of(proc.pid):
            assert proc.poll() is None, "rank 1's status 75 was not held"
            assert time.monotonic() < deadline, "task.sh did not start its hold"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 75, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
