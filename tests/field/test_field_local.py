"""The field's own example scripts (tests/field/*.py, written as their public examples are), run
by `tfdist launch` with 2 or 3 processes, from a shell that has none of tfdist's variables: each
learns digits (>= 0.95 test accuracy) with at most 3 lines added for tfdist."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.field.helpers import (BIN, HERE, MIN_ACCURACY, TF_KERAS, epochs_started, launch, result,
                                 tfdist_lines, user_environ)
from tests.helpers import assert_nothing_left, job_processes, requires_horovod

pytestmark = pytest.mark.slow

SCRIPTS = {
    "horovod_keras_digits.py": 2,
    "horovod_keras3_digits.py": 2,
    "horovod_tape_digits.py": 2,
    "ps_tutorial_digits.py": 2,
    "plain_keras_digits.py": 3,
    "mwms_tutorial/main.py": 0,
    "mwms_tutorial/mnist_setup.py": 0,
    # Keras 3 (`import keras`): the tutorial needs `import tfdist`; the others have the README's
    # lines (import, init, scope, optimizer, callbacks).
    "mwms_tutorial_keras3/main.py": 1,
    "mwms_tutorial_keras3/mnist_setup.py": 0,
    "keras_io_multi_gpu_digits.py": 5,
    "plain_keras3_digits.py": 5,
}


@pytest.mark.parametrize("script,lines", sorted(SCRIPTS.items()))
def test_scripts_add_only_their_tfdist_lines(script, lines):
    added = tfdist_lines(HERE / script)
    assert len(added) == lines, added
    if lines == 0:
        lines_ = (HERE / script).read_text().splitlines()
        code = [x for x in lines_ if not x.lstrip().startswith("#")]
        assert not [x for x in code if "tfdist" in x]


# On the newest stack Horovod's Keras example runs once, in its Keras 3 form: the tf-keras form
# takes the same Horovod Keras calls (DistributedOptimizer, the broadcast, metric-average and
# warm-up callbacks), which tests/horovod/test_horovod_keras_binding.py makes on every stack. The
# GradientTape example stays on both: DistributedGradientTape runs nowhere else.
@requires_horovod
@pytest.mark.horovod
@pytest.mark.parametrize(
    "script,keras",
    [
        pytest.param("horovod_keras_digits.py", TF_KERAS, marks=pytest.mark.default_stack),
        ("horovod_keras3_digits.py", {}),
        ("horovod_tape_digits.py", TF_KERAS),
        # The GradientTape example unchanged on Keras 3 (TensorFlow's default): Horovod's
        # broadcast_variables and DistributedGradientTape take its variables through tfdist.
        ("horovod_tape_digits.py", {}),
    ],
    ids=["horovod_keras", "horovod_keras3", "horovod_tape", "horovod_tape_keras3"])
def test_horovod_examples(script, keras, tmp_path):
    # The Keras example's tf-keras form (Keras 2 spellings) runs under the user's switch.
    proc = launch(2, "python", script, str(tmp_path), **keras)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = result(tmp_path, proc)
    assert res["size"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    if "weight_sums" in res:  # GradientTape: both ranks hold the same weights
        assert res["weight_sums"][0] == pytest.approx(res["weight_sums"][1], rel=1e-6), res
    if "tape" not in script:  # Keras: the warm-up callback ran and rank 0 checkpointed
        assert "finished gradual learning rate warmup" in proc.stdout
        suffix = "keras" if "keras3" in script else "h5"
        assert (tmp_path / f"checkpoint-8.{suffix}").exists()


# The newest stack runs the Keras 3 tutorial; the tf-keras one differs by the user's Keras switch
# (TF_USE_LEGACY_KERAS=1), under which tf.keras is tf-keras (tests/test_keras_choice.py, on every
# stack).
@pytest.mark.parametrize(
    "tutorial",
    [pytest.param("mwms_tutorial", marks=pytest.mark.default_stack), "mwms_tutorial_keras3"])
def test_tensorflow_multi_worker_tutorial_after_tfdist_env(tutorial, tmp_path):
    """TensorFlow's tutorial, unchanged: its TF_CONFIG from `tfdist env`, tf-keras by the user's
    switch; written with `import keras` (Keras 3), with `import tfdist` added."""
    proc = launch(2,
                  "bash",
                  "-c", 'eval "$(tfdist env --strategy=multi_worker --format=shell)"; '
                  f'exec python main.py {tmp_path}',
                  cwd=HERE / tutorial,
                  **({} if tutorial.endswith("keras3") else TF_KERAS))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = result(tmp_path, proc)
    assert res["workers"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    # Which Keras trained: tf-keras (2.x) under the user's switch, Keras 3 with `import keras`.
    assert res["keras"].startswith("3.") == tutorial.endswith("keras3"), res


# The same README lines in both: the newest stack runs the shorter script.
@pytest.mark.parametrize("script", [
    pytest.param("keras_io_multi_gpu_digits.py", marks=pytest.mark.default_stack),
    "plain_keras3_digits.py"
])
def test_keras3_scripts_with_the_readme_lines(script, tmp_path):
    """Keras 3 scripts with tfdist.init, rt.scope, rt.optimizer and rt.callbacks on 2 workers:
    they learn, and only the chief wrote the run directory (one checkpoint series, metrics)."""
    proc = launch(2, "python", script, str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = result(tmp_path, proc)
    assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["strategy"] == "multi_worker", metrics
    assert (tmp_path / "run" / "checkpoints").is_dir()


def test_tensorflow_parameter_server_tutorial(tmp_path):
    """Chief + ps + worker; the ps and worker exit by themselves once the chief is done."""
    proc = launch(3, "python", "ps_tutorial_digits.py", str(tmp_path), **TF_KERAS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = result(tmp_path, proc)
    assert res["workers"] == 1 and res["test_accuracy"] >= MIN_ACCURACY, res


# tfdist launch's part (a rank's environment, SIGKILL of every process, a second launch) is the
# same on every stack; on the newest the PS tutorial's BackupAndRestore still runs, and tfdist's own
# resume is tests/train/test_resume.py's.
@pytest.mark.default_stack
def test_plain_keras_script_resumes_with_its_own_backup_and_restore(tmp_path):
    """Killed (SIGKILL, every process) after its third epoch and started again, the script
    resumes after the last epoch its BackupAndRestore saved, and still learns. The first run asks
    for more epochs than any machine trains before the kill; the second for 8."""
    cmd = [
        str(BIN / "tfdist"), "launch", "-n", "2", "--", "python", "plain_keras_digits.py",
        str(tmp_path), "100000"
    ]
    proc = subprocess.Popen(cmd,
                            cwd=HERE,
                            env=user_environ(**TF_KERAS),
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True,
                            start_new_session=True)
    seen, deadline = [], time.monotonic() + 300
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("[0] Epoch 4/100000") or time.monotonic() > deadline:
                break
    finally:
        # Every process at once, as when the node fails: the launcher and each rank (in its own
        # session under tfdist launch's guard).
        for pid in [int(p.split()[0]) for p in job_processes()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
    assert epochs_started("".join(seen))[-1:] == [4], "".join(seen)[-3000:]
    assert not (tmp_path / "result.json").exists()
    assert_nothing_left()

    again = launch(2, "python", "plain_keras_digits.py", str(tmp_path), "8", **TF_KERAS)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    started = epochs_started(again.stdout)
    assert started and started[0] >= 4 and started[-1] == 8, again.stdout[-3000:]
    res = result(tmp_path, again)
    assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
