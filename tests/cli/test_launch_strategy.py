"""`tfdist launch --strategy=S` with a script that has only `import tfdist` and `tfdist.init()`:
every rank runs under S and gets $MODEL_DIR as rt.model_dir; a script that asks for another
strategy (or run directory) stops on every rank with an error naming both. The same from the
batch scripts: tests/test_job_strategy.py, tests/slurm/test_job_strategy.py."""

from __future__ import annotations

import re

import pytest

from tests.helpers import PYTHON, TFDIST, requires_horovod, run

pytestmark = pytest.mark.slow

PRINT = ('print(f"script: rank {rt.rank} of {rt.world_size}, strategy {rt.strategy_name}, '
         'model dir {rt.model_dir}", flush=True)\n')

# Each rank's exit held until both ranks' scripts have ended (a file each in a directory), so
# that launch, which stops the others once one rank fails, does not stop a rank before its script
# has said what it says. An event, not a time: 300 s is only the cap of a broken run.
_HOLD = (
    '"$@"; status=$?; touch "$HOLD_DIR/$TFDIST_LAUNCH_RANK"; '
    'for _ in $(seq 3000); do [ "$(ls "$HOLD_DIR" | wc -l)" -ge 2 ] && break; sleep 0.1; done; '
    'exit $status')


def launch(tmp_path, script: str, *launch_flags: str, env=None, hold: bool = False):
    """`tfdist launch -n 2 [flags] -- python script.py`; `hold`: every rank's script runs to its
    end (_HOLD)."""
    path = tmp_path / "script.py"
    path.write_text(script)
    command = [PYTHON, path]
    if hold:
        (tmp_path / "ended").mkdir()
        env = dict(env or {}, HOLD_DIR=tmp_path / "ended")
        command = ["bash", "-c", _HOLD, "-", *command]
    return run([TFDIST, "launch", "-n", "2", *launch_flags, "--", *command], env=env, cwd=tmp_path)


@requires_horovod
@pytest.mark.horovod
def test_init_with_no_argument_runs_under_launchs_strategy_in_model_dir(tmp_path):
    model_dir = tmp_path / "runs" / "exp1"
    r = launch(tmp_path,
               "import tfdist\nrt = tfdist.init()\n" + PRINT,
               "--strategy=horovod",
               env={"MODEL_DIR": model_dir})
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in (0, 1):
        assert (f"[{rank}] script: rank {rank} of 2, strategy horovod, model dir {model_dir}\n"
                in r.stdout), r.stdout
    # Said once, by the chief.
    said = re.findall(r"^\[(\d)\] .*tfdist: model dir (\S+) \(from \$MODEL_DIR\)$", r.stdout, re.M)
    assert said == [("0", str(model_dir))], r.stdout


@pytest.mark.parametrize("asked", ["multi_worker", "parameter_server"])
def test_a_script_asking_for_another_strategy_stops_on_every_rank(tmp_path, asked):
    r = launch(tmp_path,
               f"import tfdist\nrt = tfdist.init(strategy={asked!r})\n" + PRINT,
               "--strategy=horovod",
               hold=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "script: " not in r.stdout
    for rank in (0, 1):
        assert (f"[{rank}] tfdist.cluster.errors.ClusterError: tfdist launch runs this job with "
                f"--strategy=horovod, but this process asks for --strategy={asked} "
                f"(tfdist.init(strategy={asked!r}) in the script" in r.stdout), r.stdout
    assert f"`tfdist launch --strategy={asked}`." in r.stdout


def test_another_num_ps_than_launchs_stops_on_every_rank(tmp_path):
    r = launch(tmp_path,
               "import tfdist\nrt = tfdist.init(num_ps=2)\n" + PRINT,
               "--strategy=parameter_server",
               "--num_ps=1",
               hold=True)
    assert r.returncode == 1, r.stdout + r.stderr
    for rank in (0, 1):
        assert (f"[{rank}] tfdist.cluster.errors.ClusterError: tfdist launch runs this job with "
                "--num_ps=1, but this process asks for --num_ps=2" in r.stdout), r.stdout


def test_a_run_directory_other_than_model_dirs_stops_on_every_rank(tmp_path):
    r = launch(tmp_path,
               "import tfdist\nrt = tfdist.init(model_dir='runs/other')\n" + PRINT,
               env={"MODEL_DIR": tmp_path / "runs" / "exp1"},
               hold=True)
    assert r.returncode == 1, r.stdout + r.stderr
    for rank in (0, 1):
        assert (f"[{rank}] tfdist.errors.ConfigError: tfdist.init(model_dir='runs/other'), but "
                f"this job's MODEL_DIR is '{tmp_path / 'runs' / 'exp1'}'" in r.stdout), r.stdout
