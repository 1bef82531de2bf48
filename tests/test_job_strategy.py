"""jobs/common.sh hands the job's strategy (and parameter_server's NUM_PS and EVALUATOR, and
MODEL_DIR) to every task's command, without Slurm: `srun` is a shell function that runs the step
once, here. On the real cluster: tests/slurm/test_job_strategy.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO, clean_environ

JOB = """
set -euo pipefail
TFDIST_JOBS_DIR={jobs}
source "$TFDIST_JOBS_DIR/common.sh"
srun() {{  # one task, here: the options, then jobs/task.sh COMMAND...
    while [[ $1 == -* ]]; do shift; done
    SLURM_PROCID=0 SLURM_NTASKS=1 SLURMD_NODENAME=here "$@"
}}
tfdist_job {strategy} "$@"
"""

# What a task's command sees, and what its tfdist.init() would build (the cluster layer only).
PROBE = """
import json, os
from tfdist.cluster import ClusterError, build_roles, detect
names = ["TFDIST_STRATEGY", "TFDIST_STRATEGY_BY", "TFDIST_NUM_PS", "TFDIST_EVALUATOR", "MODEL_DIR"]
try:
    roles = build_roles(detect()).strategy
except ClusterError as e:
    roles = str(e)
print("probe:", json.dumps(dict({n: os.environ.get(n) for n in names}, roles=roles)))
"""


def job(tmp_path, strategy, *args, **env):
    environ = clean_environ(SLURM_JOB_ID="7",
                            SLURM_JOB_NUM_NODES="1",
                            SLURM_JOB_NODELIST="here",
                            SLURM_JOB_NAME="t",
                            TFDIST_BIN="echo",
                            PYTHON=sys.executable,
                            PYTHONPATH=os.pathsep.join(
                                [str(REPO), os.environ.get("PYTHONPATH", "")]),
                            **dict({"DOCTOR": "0"}, **env))
    for name in ("MODEL_DIR", "NUM_PS", "EVALUATOR"):
        if name not in env:
            environ.pop(name, None)
    return subprocess.run(
        ["bash", "-c",
         JOB.format(jobs=REPO / "jobs", strategy=strategy), "job", *args],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60)


def probe(tmp_path, strategy, **env):
    proc = job(tmp_path, strategy, "runs/x", "--", sys.executable, "-c", PROBE, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line, ) = [line for line in proc.stdout.splitlines() if line.startswith("probe: ")]
    return json.loads(line[len("probe: "):]), proc.stdout


@pytest.mark.parametrize("strategy", ["horovod", "multi_worker", "mirrored"])
def test_the_command_runs_under_the_jobs_strategy(tmp_path, strategy):
    seen, log = probe(tmp_path, strategy, TFDIST_NUM_PS="5", TFDIST_EVALUATOR="1")
    assert seen == {
        "TFDIST_STRATEGY": strategy,
        "TFDIST_STRATEGY_BY": f"jobs/{strategy}.sbatch",
        "TFDIST_NUM_PS": None,  # inherited ones are not the job's: gone
        "TFDIST_EVALUATOR": None,
        "MODEL_DIR": str(tmp_path.resolve() / "runs" / "x"),
        "roles": strategy,
    }
    assert f", model dir {tmp_path.resolve() / 'runs' / 'x'}, strategy {strategy}\n" in log


def test_parameter_server_passes_num_ps_and_evaluator(tmp_path):
    seen, log = probe(tmp_path, "parameter_server", NUM_PS="2", EVALUATOR="1")
    assert (seen["TFDIST_STRATEGY"], seen["TFDIST_NUM_PS"], seen["TFDIST_EVALUATOR"]) == \
        ("parameter_server", "2", "1")
    assert "strategy parameter_server --num_ps=2 --evaluator\n" in log
    # The roles of one task are those of the job's choice (which needs more tasks).
    assert seen["roles"].startswith("--strategy=parameter_server with --num_ps=2 needs at least "
                                    "5 tasks (1 chief + 2 ps + at least 1 worker + 1 "
                                    "evaluator), but the job has 1."), seen
    seen, _ = probe(tmp_path, "parameter_server")
    assert (seen["TFDIST_NUM_PS"], seen["TFDIST_EVALUATOR"]) == ("1", None)


def test_tfdist_train_and_the_doctor_get_the_same(tmp_path):
    # TFDIST_BIN=echo: the commands are printed instead of run.
    proc = job(tmp_path, "parameter_server", NUM_PS="2", EVALUATOR="0", DOCTOR="quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model_dir = tmp_path.resolve() / "runs" / "t-7"
    assert (f"doctor --strategy=parameter_server --num_ps=2 --noevaluator --model_dir={model_dir}"
            in proc.stdout), proc.stdout
    assert (f"train --strategy=parameter_server --num_ps=2 --noevaluator --model_dir={model_dir}"
            in proc.stdout), proc.stdout


def test_a_bad_evaluator_setting_stops_the_job(tmp_path):
    proc = job(tmp_path, "parameter_server", EVALUATOR="yes")
    assert proc.returncode == 2
    assert "EVALUATOR=yes: expected 1 (the last task evaluates) or 0." in proc.stderr
