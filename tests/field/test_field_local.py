"""The examples (examples/: the field's scripts, written as their public sources write them), run
as shipped by `tfdist launch` with 2 or 3 processes, from the repository's top level and a shell
that has none of tfdist's variables: each learns digits (>= 0.90 test accuracy: the scripts are
unseeded, tests/field/helpers.py; each script's docstring gives one measured run), every process
that trained ends with every variable equal, and each adds only its tfdist lines (two where two
suffice). Each test names its Keras (TF_KERAS: tf-keras under TensorFlow's switch; KERAS3).

Not checked here: the samples each worker read an epoch. tfdist records none per worker (its
throughput meter sums them over the tasks; metrics.json keeps the global rate only)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from tests.field.helpers import (BIN, EXAMPLES, KERAS3, MIN_ACCURACY, TF_KERAS, TOP, epochs_started,
                                 launch, results, tfdist_lines, user_environ, uses_tfdist)
from tests.helpers import assert_nothing_left, job_processes, requires_horovod

pytestmark = pytest.mark.slow

# Every file of examples/, with the lines it adds for tfdist: two (`import tfdist`,
# `tfdist.init()`) where they suffice; the tutorials' own strategy reads TF_CONFIG from `tfdist
# env` (tf-keras: none; Keras 3: `import tfdist`, keras-team/keras#20585).
SCRIPTS = {
    "digits_data.py": 0,
    "results.py": 0,
    "horovod_keras.py": 2,
    "horovod_keras3.py": 2,
    "horovod_tape.py": 2,
    "keras_io_mnist_convnet.py": 2,
    "keras_io_multi_gpu.py": 2,
    "keras_subclassed_model.py": 2,
    "keras_batchnorm_callbacks.py": 2,
    "tf_keras_backup_and_restore.py": 2,
    "tf_parameter_server_tutorial.py": 2,
    # Run by tests/train/test_custom_loop.py.
    "tf_custom_training_loop.py": 2,
    # Its flags: test_absl_script_defines_tfdist_s_flags_beside_its_own (no training run).
    "absl_flags_script.py": 4,
    "tf_multi_worker_tutorial/main.py": 0,
    "tf_multi_worker_tutorial/mnist_setup.py": 0,
    "tf_multi_worker_tutorial_keras3/main.py": 1,
    "tf_multi_worker_tutorial_keras3/mnist_setup.py": 0,
}


def test_every_example_is_listed():
    assert sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.py")) == sorted(SCRIPTS)


@pytest.mark.parametrize("script,lines", sorted(SCRIPTS.items()))
def test_scripts_add_only_their_tfdist_lines(script, lines):
    added = tfdist_lines(EXAMPLES / script)
    assert len(added) == lines, added
    if lines == 0:
        assert not uses_tfdist(EXAMPLES / script)
    if lines == 2:  # the two: the import and init()
        assert added[0].startswith("import tfdist") and "tfdist.init(" in added[1], added


def test_absl_script_trains_with_its_flags_and_tfdists(tmp_path):
    """The absl script on 2 workers with one flag of its own (--epochs) and one of tfdist's
    (--batch_size, per replica: fit's global batch is 2 x 16, so 44 steps of the 1400 training
    digits an epoch): both parsed, one model, digits learned."""
    proc = launch(2, "python", "examples/absl_flags_script.py", "--epochs=6", "--batch_size=16",
                  str(tmp_path), **KERAS3)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = results(tmp_path, 2, proc)
    assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    # --strategy=auto, 2 tasks: MultiWorkerMirroredStrategy (its class: CollectiveAllReduceStrategy)
    assert res["strategy"] == "CollectiveAllReduceStrategy", res
    epochs = re.findall(r"^\[0\] 44/44 - ", proc.stdout, re.M)
    assert len(epochs) == 6, proc.stdout[-3000:]


# On the newest stack Horovod's Keras example runs once, in its Keras 3 form: the tf-keras form
# takes the same Horovod Keras calls (DistributedOptimizer, the broadcast, metric-average and
# warm-up callbacks), which tests/horovod/test_horovod_keras_binding.py makes on every stack. The
# GradientTape example stays on both: DistributedGradientTape runs nowhere else.
@requires_horovod
@pytest.mark.horovod
@pytest.mark.parametrize(
    "script,keras",
    [
        pytest.param("horovod_keras.py", TF_KERAS, marks=pytest.mark.default_stack),
        pytest.param("horovod_keras3.py", KERAS3, marks=pytest.mark.newest),
        ("horovod_tape.py", TF_KERAS),
        # The GradientTape example unchanged on Keras 3 (TensorFlow's default): Horovod's
        # broadcast_variables and DistributedGradientTape take its variables through tfdist.
        pytest.param("horovod_tape.py", KERAS3, marks=pytest.mark.newest),
    ],
    ids=["horovod_keras", "horovod_keras3", "horovod_tape", "horovod_tape_keras3"])
def test_horovod_examples(script, keras, tmp_path):
    # The Keras example's tf-keras form (Keras 2 spellings) runs under the user's switch.
    proc = launch(2, "python", f"examples/{script}", str(tmp_path), **keras)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = results(tmp_path, 2, proc)  # both ranks hold the same weights
    assert res["size"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    if "tape" in script:  # rank 0 checkpointed
        assert (tmp_path / "checkpoints-1.index").exists()
    else:  # Keras: the warm-up callback ran and rank 0 checkpointed
        assert "finished gradual learning rate warmup" in proc.stdout
        suffix = "keras" if "keras3" in script else "h5"
        assert (tmp_path / f"checkpoint-8.{suffix}").exists()


# The newest stack runs the Keras 3 tutorial; the tf-keras one differs by the user's Keras switch
# (TF_USE_LEGACY_KERAS=1), under which tf.keras is tf-keras (tests/test_keras_choice.py, on every
# stack).
@pytest.mark.parametrize("tutorial", [
    pytest.param("tf_multi_worker_tutorial", marks=pytest.mark.default_stack),
    "tf_multi_worker_tutorial_keras3"
])
def test_tensorflow_multi_worker_tutorial_after_tfdist_env(tutorial, tmp_path):
    """TensorFlow's tutorial, unchanged: its TF_CONFIG from `tfdist env`, tf-keras by the user's
    switch; written with `import keras` (Keras 3), with `import tfdist` added."""
    proc = launch(
        2, "bash", "-c", 'eval "$(tfdist env --strategy=multi_worker --format=shell)"; '
        f'exec python examples/{tutorial}/main.py {tmp_path}',
        **(KERAS3 if tutorial.endswith("keras3") else TF_KERAS))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = results(tmp_path, 2, proc)
    assert res["workers"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    # Which Keras trained: tf-keras (2.x) under the user's switch, Keras 3 with `import keras`.
    assert res["keras"].startswith("3.") == tutorial.endswith("keras3"), res


# Keras 3 scripts with the two lines: keras.io's guide (a functional model, batched datasets,
# validation_data) and its convnet (NumPy arrays, validation_split); the newest stack runs the
# convnet, the form the README shows.
@pytest.mark.parametrize("script", [
    pytest.param("keras_io_multi_gpu.py", marks=pytest.mark.default_stack),
    pytest.param("keras_io_mnist_convnet.py", marks=pytest.mark.newest)
])
def test_keras3_scripts_with_the_two_lines(script, tmp_path):
    """Keras 3 scripts with `import tfdist` and `tfdist.init()` on 2 workers, MODEL_DIR set as
    jobs/ sets it: they learn as one model, and only the chief wrote the run directory (tfdist's
    checkpoints, metrics)."""
    run = tmp_path / "run"
    proc = launch(2, "python", f"examples/{script}", str(tmp_path), MODEL_DIR=str(run), **KERAS3)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = results(tmp_path, 2, proc)
    assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
    assert res["keras"].startswith("3."), res
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["strategy"] == "multi_worker", metrics
    assert (run / "checkpoints").is_dir()


# Issue 41's two scripts on either Keras (`from tensorflow import keras`): tf-keras on the default
# stack (its path is the same on every stack), Keras 3 on both.
@pytest.mark.parametrize("keras", [
    pytest.param(TF_KERAS, id="tf_keras", marks=pytest.mark.default_stack),
    pytest.param(KERAS3, id="keras3")
])
def test_subclassed_model_and_batchnorm_with_early_stopping(keras, tmp_path):
    """A subclassed model (its own `call`) and a BatchNormalization model with EarlyStopping and
    ReduceLROnPlateau, each with the two lines on 2 workers: one model (every variable equal on
    both ranks, BatchNormalization's moving statistics among them), the same epochs and rate."""
    for script in ("keras_subclassed_model.py", "keras_batchnorm_callbacks.py"):
        out = tmp_path / script[:-3]
        out.mkdir()
        proc = launch(2, "python", f"examples/{script}", str(out), **keras)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        res = results(out, 2, proc)
        assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
        assert res["keras"].startswith("2." if keras == TF_KERAS else "3."), res


def test_tensorflow_parameter_server_tutorial(tmp_path):
    """Chief + ps + worker; the ps and worker exit by themselves once the chief is done."""
    proc = launch(3, "python", "examples/tf_parameter_server_tutorial.py", str(tmp_path),
                  **TF_KERAS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    res = results(tmp_path, 1, proc)  # the chief's: the only task that runs the script's fit
    assert res["workers"] == 1 and res["test_accuracy"] >= MIN_ACCURACY, res


# tfdist launch's part (a rank's environment, SIGKILL of every process, a second launch) is the
# same on every stack; on the newest the PS tutorial's BackupAndRestore still runs, and tfdist's own
# resume is tests/train/test_resume.py's.
@pytest.mark.default_stack
def test_tf_keras_script_resumes_with_its_own_backup_and_restore(tmp_path):
    """Killed (SIGKILL, every process) after its third epoch and started again, the script
    resumes after the last epoch its BackupAndRestore saved, and still learns. The first run asks
    for more epochs than any machine trains before the kill; the second for 8."""
    cmd = [
        str(BIN / "tfdist"), "launch", "-n", "2", "--", "python",
        "examples/tf_keras_backup_and_restore.py",
        str(tmp_path), "100000"
    ]
    proc = subprocess.Popen(cmd,
                            cwd=TOP,
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
    assert not list(tmp_path.glob("result-*.json"))
    assert_nothing_left()

    again = launch(2, "python", "examples/tf_keras_backup_and_restore.py", str(tmp_path), "8",
                   **TF_KERAS)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    started = epochs_started(again.stdout)
    assert started and started[0] >= 4 and started[-1] == 8, again.stdout[-3000:]
    res = results(tmp_path, 2, again)
    assert res["replicas"] == 2 and res["test_accuracy"] >= MIN_ACCURACY, res
