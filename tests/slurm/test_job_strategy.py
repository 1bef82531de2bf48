"""A user's command in a batch script of jobs/ runs under that script's strategy, on the real
two-node test cluster: `sbatch --nodes=2 jobs/horovod.sbatch DIR -- python script.py`, where the
script's `tfdist.init()` names no strategy and no run directory, trains under Horovod and writes
into DIR ($MODEL_DIR); a script that asks for another strategy stops on every task naming both.
Without Slurm: tests/test_job_strategy.py (jobs/common.sh), tests/cli/test_launch_strategy.py."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import PYTHON, requires_horovod
from tests.slurm.conftest import PROBES
from tests.slurm.test_jobs import N1, N2, run, training_tasks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def results(log: str, name: str) -> dict[int, dict]:
    """rank -> the `name: {...}` line that rank printed (labelled `R: ` by srun)."""
    found = {}
    for rank, line in re.findall(rf"^(\d+): {name}: (.*)$", log, re.M):
        found[int(rank)] = json.loads(line)
    return found


@requires_horovod
@pytest.mark.horovod
def test_a_script_with_only_init_trains_under_horovod_sbatch_in_its_model_dir(slurm, jobdir):
    # As a user types it: sbatch --nodes=2 jobs/horovod.sbatch runs/hvd -- python script.py
    job = run(slurm,
              jobdir,
              "horovod.sbatch",
              "runs/hvd",
              "--",
              "python",
              f"{PROBES}/digits_init_only.py",
              sbatch=["--nodes=2"])
    assert job.state == "COMPLETED", job.describe()
    assert training_tasks(job.log) == {0: N1, 1: N2}, job.describe()
    model_dir = jobdir / "runs" / "hvd"
    # The log: the batch script's strategy, and tfdist.init()'s (the chief speaks for all).
    assert f"model dir {model_dir}, strategy horovod\n" in job.log, job.describe()
    assert re.search(
        rf"^0: tfdist: slurm, rank 0 of 2 on {N1} \(local rank 0 of 1\), strategy horovod,",
        job.log, re.M), job.describe()
    assert re.findall(r"^(\d+): tfdist: model dir (\S+) \(from \$MODEL_DIR\)$", job.log,
                      re.M) == [("0", str(model_dir))], job.describe()
    # What each rank printed: Horovod, the job's directory, the same weights (one model).
    res = results(job.log, "digits_init_only")
    assert sorted(res) == [0, 1], job.describe()
    for rank, r in res.items():
        assert (r["strategy"], r["world_size"], r["model_dir"]) == ("horovod", 2, str(model_dir)), r
        assert r["accuracy"] > 0.5, r  # trained (chance: 0.1); 0.77 measured after 3 epochs
    assert res[0]["weight_sum"] == pytest.approx(res[1]["weight_sum"], rel=1e-6), res
    # Its files in MODEL_DIR: rt.callbacks()'s checkpoints and metrics.json, the chief's model.
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["environment"]) == ("horovod", "slurm"), metrics
    assert (metrics["world_size"], metrics["num_replicas"], metrics["epochs"]) == (2, 2, 3)
    checkpoints = sorted(p.name for p in (model_dir / "checkpoints").iterdir())
    assert len(checkpoints) >= 1 and all(c.startswith("ckpt-") for c in checkpoints), checkpoints
    assert (model_dir / "model.keras").stat().st_size > 0
    assert "tfdist job: finished: every task exited 0" in job.log


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
