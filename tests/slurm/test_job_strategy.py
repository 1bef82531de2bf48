"""A user's command in a batch script of jobs/ runs under that script's strategy, on the real
two-node test cluster: `sbatch --nodes=2 jobs/horovod.sbatch DIR -- python script.py`, where the
script's `tfdist.init()` names no strategy and no run directory, trains under Horovod and writes
into DIR ($MODEL_DIR); a script that asks for another strategy stops on every task naming both.
Without Slurm: tests/test_job_strategy.py (jobs/common.sh), tests/cli/test_launch_strategy.py."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import PYTHON, requires_horovod, timeout_for
from tests.slurm.conftest import PROBES
from tests.slurm.test_jobs import (N1, N2, REACHED, run, submit, training_tasks, wait_for_pause,
                                   wait_for_requeue)
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def results(log: str, name: str) -> dict[int, dict]:
    """rank -> the `name: {...}` line that rank printed (labelled `R: ` by srun)."""
    found = {}
    for rank, line in re.findall(rf"^(\d+): {name}: (.*)$", log, re.M):
        found[int(rank)] = json.loads(line)
    return found


@requires_horovod
@pytest.mark.horovod
@timeout_for(REACHED, 300, 420)
def test_a_two_line_script_trains_under_horovod_sbatch_and_resumes_after_its_requeue(slurm, jobdir):
    # As a user types it: sbatch --nodes=2 jobs/horovod.sbatch runs/hvd -- python script.py, the
    # script as on one device but for `import tfdist` and `tfdist.init()`. Both tasks wait after
    # global step 30 (in epoch 2; the test hook) until the time limit's signal, sent as soon as
    # both wait by `scancel --signal=USR1` (the same signal to the same tasks as slurmctld's;
    # the real limit: tests/slurm/test_jobs.py); the job requeues itself and its second run
    # resumes from the checkpoint the first wrote into $MODEL_DIR.
    job_id = submit(slurm,
                    jobdir,
                    "horovod.sbatch",
                    "runs/hvd",
                    "--",
                    "python",
                    f"{PROBES}/digits_init_only.py",
                    sbatch=["--nodes=2"],
                    env={
                        "TFDIST_VERBOSE": 1,
                        PAUSE_AFTER_STEP: 30
                    })
    wait_for_pause(slurm, jobdir, job_id)
    slurm.cmd("scancel", "--signal=USR1", job_id)
    wait_for_requeue(slurm, jobdir, job_id, 300)  # the signal, the checkpoint, the requeue
    job = slurm.wait(job_id, jobdir, timeout=420)
    assert job.state == "COMPLETED", job.describe()
    first, _, second = job.log.partition("(SLURM_RESTART_COUNT=1)")
    assert second, job.describe()
    assert training_tasks(first) == {0: N1, 1: N2}, job.describe()
    model_dir = jobdir / "runs" / "hvd"
    # The log: the batch script's strategy, and tfdist.init()'s (the chief speaks for all).
    assert f"model dir {model_dir}, strategy horovod\n" in job.log, job.describe()
    assert re.search(
        rf"^0: tfdist: slurm, rank 0 of 2 on {N1} \(local rank 0 of 1\), strategy horovod,", first,
        re.M), job.describe()
    assert re.search(rf"^0: tfdist: model dir {re.escape(str(model_dir))} \(from \$MODEL_DIR\)$",
                     first, re.M), job.describe()
    # Run 1: both tasks got the signal, stopped after the same step, the chief saved and requeued.
    for rank in (0, 1):
        assert re.search(rf"^{rank}: .*received SIGUSR1", first, re.M), job.describe()
    assert re.search(r"^0: .*requeued Slurm job", first, re.M), job.describe()
    assert "digits_init_only: " not in first, job.describe()  # its fit ended by the stop
    saved = re.findall(r"^0: .*checkpoint \S+/(ckpt-\d+) \(epoch (\d+), step (\d+)\)$", first, re.M)
    assert saved, job.describe()
    name, epoch, step = saved[-1]  # after the pause (step 30: in epoch 2) or at an epoch end
    assert int(epoch) * 29 + int(step) > 30, saved  # 29 steps an epoch: 898 samples each, by 32
    # Run 2 resumes at the start of that checkpoint's epoch (its NumPy arrays start at their
    # beginning: no step of the epoch can be skipped) and finishes: Horovod, the job's
    # directory, the same weights on both ranks (one model).
    if int(step) in (0, 29):
        assert re.search(
            rf"^0: .*resuming from \S+/{name} \(epoch {epoch}, step {step}\), at the "
            "epoch's start$", second, re.M), job.describe()
    else:
        # The newest at an epoch's start: the checkpoint of the epoch's first step (29 an epoch).
        assert re.search(
            rf"^0: .*resuming from \S+/ckpt-{int(epoch) * 29} \(epoch {epoch}, step 0\), at the "
            rf"epoch's start: {name} \(epoch {epoch}, step {step}\) is mid-epoch", second,
            re.M), job.describe()
    res = results(second, "digits_init_only")
    assert sorted(res) == [0, 1], job.describe()
    for rank, r in res.items():
        assert (r["strategy"], r["world_size"], r["model_dir"]) == ("horovod", 2, str(model_dir)), r
        # Trained (chance: 0.1): after 3 epochs 0.77 measured with tf-keras; Keras 3 (the suite's
        # Keras since 2026-11-27) 0.74 under `tfdist launch -n 2 --strategy=horovod`.
        assert r["accuracy"] > 0.5, r
    assert res[0]["weight_sum"] == res[1]["weight_sum"], res
    # Its files in MODEL_DIR: tfdist's checkpoints and metrics.json, the chief's model.
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["environment"]) == ("horovod", "slurm"), metrics
    assert (metrics["world_size"], metrics["num_replicas"], metrics["epochs"]) == (2, 2, 3)
    assert metrics["resumed_from"] is not None, metrics
    assert (model_dir / "model.keras").stat().st_size > 0
    assert "tfdist job: finished: every task exited 0" in second


@pytest.mark.parametrize("asked", ["multi_worker"])
def test_a_script_asking_for_another_strategy_fails_on_every_task(slurm, jobdir, asked):
    script = jobdir / "other.py"
    script.write_text(f"import tfdist\nrt = tfdist.init(strategy={asked!r})\nprint('trained')\n")
    # Each task's exit is held until both tasks' scripts have ended (a file each in the shared job
    # directory), so that srun --kill-on-bad-exit (which ends the step when one task fails)
    # cannot end a task before its script has failed. 300 s is only the cap of a broken run.
    ended = jobdir / "ended"
    ended.mkdir()
    job = run(slurm,
              jobdir,
              "horovod.sbatch",
              "runs/other",
              "--",
              "bash",
              "-c", f'"$@"; status=$?; touch {ended}/$SLURM_PROCID; for _ in $(seq 3000); do '
              f'[ "$(ls {ended} | wc -l)" -ge 2 ] && break; sleep 0.1; done; exit $status',
              "-",
              PYTHON,
              str(script),
              sbatch=["--nodes=2"])
    assert job.state == "FAILED" and job.exit_code != 0, job.describe()
    assert "trained" not in job.log
    for rank in (0, 1):
        assert (f"{rank}: tfdist.cluster.errors.ClusterError: jobs/horovod.sbatch runs this job "
                f"with --strategy=horovod, but this process asks for --strategy={asked} "
                f"(tfdist.init(strategy={asked!r}) in the script" in job.log), job.describe()
    assert f"submit `jobs/{asked}.sbatch` instead." in job.log, job.describe()
