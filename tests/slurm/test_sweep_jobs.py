"""`tfdist sweep` on the real two-node test cluster: a sweep of a user's own absl script
(tests/slurm/probes/sweep_digits.py) as one job array of 4 one-node elements, through
jobs/multi_worker.sbatch. One element gets the time limit's signal mid-epoch: it checkpoints,
requeues itself (not the array) and ends with the weights of its twin that ran through; one
crashes after its first epoch, is shown failed with its error line, and once the cause is gone
`tfdist sweep resubmit --failed` resumes it to the end. The status table shows every element's
settings, state, requeues and final accuracy."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from tests.helpers import PYTHON, TFDIST, timeout_for
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SCRIPT = __import__("tests.slurm.conftest", fromlist=["PROBES"]).PROBES / "sweep_digits.py"


def sweep(slurm, jobdir, *args, env=None, timeout=60):
    """`tfdist sweep ARGS` as a user runs it on the login node (here: the test machine)."""
    proc = subprocess.run([TFDIST, "sweep", *map(str, args)],
                          cwd=jobdir,
                          env={
                              **slurm.env(),
                              **(env or {})
                          },
                          capture_output=True,
                          text=True,
                          timeout=timeout)
    return proc


def element_log(directory, index):
    logs = sorted((directory / "logs").glob(f"*_{index}.out"))
    return logs[-1].read_text() if logs else ""


# Its waits in turn: submit; element 0 paused (queueing included: this session's jobs run one at a
# time, leftovers are cancelled); the 4 elements done (the whole test took 61 s here); status;
# resubmitted element 3 done; status twice, the same sweep again.
PAUSED, DONE = 300, 300


@timeout_for(60, PAUSED, DONE, 60, DONE, 60, 60)
def test_a_sweep_runs_requeues_one_element_and_resubmits_a_failed_one(slurm, jobdir):
    directory, marker, go = jobdir / "sweep", jobdir / "broken", jobdir / "go"
    marker.write_text("")
    settings = jobdir / "settings.txt"
    # 0 and 1 train alike (--tag changes nothing); 3 crashes after epoch 1 while `marker` exists.
    settings.write_text(f"--lr=0.05 --tag=a\n--lr=0.05 --tag=b\n--lr=0.1 --tag=a\n"
                        f"--lr=0.1 --tag=b --fail_marker={marker}\n")
    # Every element waits at step 50 (mid-epoch 2 of 4) until signalled or `go` exists, so the
    # signal finds element 0 training on any machine.
    started = sweep(slurm,
                    jobdir,
                    directory,
                    f"--settings_file={settings}",
                    "--sbatch=--nodes=1 --ntasks-per-node=1 --time=15",
                    "--",
                    PYTHON,
                    SCRIPT,
                    "--epochs=4",
                    env={
                        PAUSE_AFTER_STEP: f"50:{go}",
                        "TFDIST_VERBOSE": "1"
                    })
    assert started.returncode == 0, started.stderr
    array = re.search(r"submitted array (\d+): element\(s\) 0-3 of 4", started.stdout).group(1)
    deadline = time.monotonic() + PAUSED
    while "paused at global step" not in element_log(directory, 0):
        assert time.monotonic() < deadline, slurm.cmd("squeue")
        time.sleep(0.5)
    # What the time limit sends to the element's one task (all nodes share this machine's pids).
    # Not `scancel --signal`: it retries while the element requeues itself and then signals its
    # next run too (seen here: requeued twice).
    pid = re.findall(r"^0: tfdist job: task 0 of 1 on \S+ \(pid (\d+)\)$",
                     element_log(directory, 0), re.M)[-1]
    os.kill(int(pid), signal.SIGUSR1)
    go.write_text("")
    done = sweep(slurm, jobdir, "status", directory, "--wait", "--poll=1", timeout=DONE)
    shown = sweep(slurm, jobdir, "status", directory, "--format=json")
    rows = {r["index"]: r for r in json.loads(shown.stdout)}
    assert {
        i: (r["state"], r["requeues"])
        for i, r in rows.items()
    } == {
        0: ("done", 1),
        1: ("done", 0),
        2: ("done", 0),
        3: ("failed", 0)
    }, done.stdout
    assert done.returncode == 1, done.stdout  # --wait: an element failed
    assert "#3 failed: status 1: " in done.stdout and "crashing on purpose" in done.stdout
    # Element 0 requeued itself, the element and not the array: its log holds two runs, the
    # others one each.
    assert f"requeued Slurm job {array}_0;" in element_log(directory, 0)
    assert "(SLURM_RESTART_COUNT=1)" in element_log(directory, 0)
    assert all("SLURM_RESTART_COUNT=1" not in element_log(directory, i) for i in (1, 2, 3))
    runs = directory / "runs"
    a, b = (np.load(runs / f"lr=0.05,tag={t}" / "weights.npz") for t in "ab")
    for name in a.files:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6)
    # The cause gone, the failed element resumes at its first epoch's checkpoint and finishes.
    marker.unlink()
    again = sweep(slurm,
                  jobdir,
                  "resubmit",
                  directory,
                  "--failed",
                  "--wait",
                  "--poll=1",
                  timeout=DONE)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "element(s) 3 of 4" in again.stdout
    assert re.search(r"resuming from \S+ckpt-\d+ \(epoch 1, step 0\)", element_log(directory, 3))
    assert "4 element(s): 4 done" in again.stdout, again.stdout
    shown = sweep(slurm, jobdir, "status", directory, "--format=json")
    for r in json.loads(shown.stdout):
        assert r["final"]["test_accuracy"] > 0.75, r  # 4 epochs: 0.877-0.916 measured here
    # Submitting the same sweep again resumes it: nothing is left to run.
    same = sweep(slurm, jobdir, directory, f"--settings_file={settings}",
                 "--sbatch=--nodes=1 --ntasks-per-node=1 --time=15", "--", PYTHON, SCRIPT,
                 "--epochs=4")
    assert same.returncode == 0 and "4 done" in same.stdout and "submitted" not in same.stdout
