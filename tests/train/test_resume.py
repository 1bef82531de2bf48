"""Checkpoints and resume with real processes: stop by SIGTERM mid-epoch, a kill right after a
known mid-epoch checkpoint, crash mid-write, refused resume, chief-only writes.

An uninterrupted 2-worker run of each strategy and Keras (the `straight` fixture) is made once
for the module: the reference weights of the SIGTERM and mid-epoch tests, and the run whose files
the chief-only test inspects; every test that uses it trains with exactly its settings (ARGS)."""

import json
import re
import signal

import numpy as np
import pytest

from tests.helpers import (TFDIST, WAIT, assert_nothing_left, finish, launch, saved_model,
                           requires_horovod, run, start, tf_keras_twin, wait_for)
from tfdist.train.checkpoint import EXIT_AFTER_STEP, EXIT_WHILE_SAVING
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = pytest.mark.slow
TRAIN = ["train", "--pipeline=digits"]
# 1437 training digits at 32 per replica: 44 steps an epoch alone, 22 with two. Three epochs, so
# that a stop in epoch 2 (at the latest at its end) leaves an epoch to resume.
ARGS = TRAIN + ["--epochs=3", "--batch_size=32", "--lr=0.01", "--checkpoint_steps=4"]


def train_args(strategy=None, keras=2):
    """ARGS for `strategy` (None: tfdist's choice, for one task) and Keras `keras`."""
    return ARGS + ([f"--strategy={strategy}"] if strategy else []) + [f"--keras={keras}"]


def weights(model_dir, keras=2):
    return saved_model(model_dir, keras).get_weights()


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """straight(strategy, keras): the model_dir of an uninterrupted 2-worker run with
    train_args(strategy, keras), trained on first use and shared by the module's tests; its
    TMPDIR is model_dir's sibling "tmp" (test_only_the_chief_writes looks into it)."""
    made = {}

    def get(strategy, keras):
        if (strategy, keras) not in made:
            root = tmp_path_factory.mktemp(f"straight-{strategy}-{keras}")
            (root / "tmp").mkdir()
            r = launch(2,
                       TFDIST,
                       *train_args(strategy, keras),
                       f"--model_dir={root / 'run'}",
                       env={"TMPDIR": str(root / "tmp")})
            made[strategy, keras] = root / "run", r.returncode, r.stdout[-3000:] + r.stderr[-2000:]
            assert_nothing_left()  # none of its processes is left to disturb the next test
        model_dir, status, out = made[strategy, keras]
        assert status == 0, out  # every test that uses a failed run fails
        return model_dir

    return get


@pytest.mark.parametrize(
    "n",
    [
        # Newest stack: neither. Two tasks' stop at their agreement (a collective) and resume run
        # there in Keras 3's twin, tests/train/test_user_script.py's [multi_worker-3] (the same
        # calls: rt.resume, rt.dataset, rt.callbacks); tf-keras: tests.helpers.TF_KERAS_TWIN.
        pytest.param(1, marks=pytest.mark.default_stack),
        tf_keras_twin(2),
    ])
def test_resume_after_sigterm_equals_uninterrupted(n, straight, tmp_path):
    """Alone the reference is a run of its own (3 processes in all); two tasks compare with the
    shared multi_worker run (the straight fixture: 2 more processes where this test makes it)."""
    stopped = tmp_path / "stopped"
    args = train_args("multi_worker" if n == 2 else None)
    # Every task waits after 10 steps of epoch 2 (the test hook) until the signal: mid-epoch on
    # any machine.
    pause = {1: 44, 2: 22}[n] + 10
    # One step a call: the stop lands on step 10 exactly (under the default auto count it lands
    # at a call's end; tests/train/test_auto_steps.py stops and resumes that).
    cmd = [TFDIST, *args, f"--model_dir={stopped}", "--steps_per_execution=1"]
    proc = start(cmd if n == 1 else [TFDIST, "launch", "-n", "2", "--", *cmd],
                 env={PAUSE_AFTER_STEP: str(pause)})
    head = wait_for(proc, f"{PAUSE_AFTER_STEP}={pause}: paused at global step {pause} ")
    proc.send_signal(signal.SIGTERM)
    status, out = finish(proc)
    out = head + out
    assert status == 75, out[-3000:]
    # Alone: right after that step; two tasks stop at their next agreement (its interval depends
    # on the step time), at the latest at the end of epoch 2.
    where = r"at step 10 of epoch 2;" if n == 1 else r"(at step \d+ of epoch 2|after epoch 2);"
    assert re.search("preempted " + where, out), out[-2000:]
    assert "Re-run the same command" in out
    assert not (stopped / "metrics.json").exists()
    # The checkpoint the preemption wrote (the chief's; a worker names it or "the chief's") is the
    # one resumed, not an older step checkpoint.
    saved = set(
        re.findall(r"preempted [^;]*; checkpoint: (\S+)(?: \(epoch \d+, step \d+\))?\. ",
                   out)) - {"none"}
    assert len(saved) == 1, out[-2000:]
    if n == 2:  # the other task names the chief's checkpoint (its path, or "the chief's"), not none
        said = re.search(r"^\[1\] tfdist: warning: preempted [^;]*; checkpoint: (.*?)\. Re-run",
                         out, re.M)
        assert said and said.group(1) != "none", out[-2000:]

    r = run([TFDIST, "launch", "-n", str(n), "--", *cmd])
    assert r.returncode == 0, r.stdout[-3000:]
    assert f"resuming from {saved.pop()} " in r.stdout + r.stderr, r.stdout[-3000:]
    if n == 1:
        reference = tmp_path / "straight"
        r = run([TFDIST, "launch", "-n", "1", "--", TFDIST, *args, f"--model_dir={reference}"])
        assert r.returncode == 0, r.stdout[-3000:]
    else:
        reference = straight("multi_worker", 2)
    assert_nothing_left()  # after a preemption, a resume and a run to the end
    for a, b in zip(weights(stopped), weights(reference)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# Newest stack: tf-keras under multi_worker only. Keras 3 and Horovod resume mid-epoch (Keras 3 by
# tfdist's skip) from the checkpoint a SIGTERM made on every stack in a user's own script:
# tests/train/test_user_script.py's [multi_worker-3] and [horovod-2].
@pytest.mark.parametrize("strategy,keras", [
    ("multi_worker", 2),
    pytest.param("multi_worker", 3, marks=pytest.mark.default_stack),
    pytest.param(
        "horovod", 2, marks=[requires_horovod, pytest.mark.horovod, pytest.mark.default_stack]),
])
def test_resume_from_a_mid_epoch_step_equals_uninterrupted(strategy, keras, straight, tmp_path):
    """Deterministic: both tasks exit right after the step checkpoint of global step 28 (the test
    hook), so the resume must skip the 6 batches of epoch 2 already trained (1437 digits at
    2 x 32 a step: 22 steps an epoch). Keras 3 has no step to resume at: tfdist skips the 6
    steps (keras_compat.keras3_adapter.start_at). The reference: the shared uninterrupted run."""
    args = train_args(strategy, keras)
    stopped = tmp_path / "stopped"
    r = launch(2, TFDIST, *args, f"--model_dir={stopped}", env={EXIT_AFTER_STEP: "28"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"{EXIT_AFTER_STEP}=28: exiting" in r.stdout
    assert_nothing_left()  # after a failure (status 3)
    ckpt = stopped / "checkpoints" / "ckpt-28"
    meta = json.loads((ckpt / "meta.json").read_text())
    assert (meta["epoch"], meta["step"], meta["global_step"]) == (1, 6, 28)
    assert not (stopped / "metrics.json").exists()

    r = launch(2, TFDIST, *args, f"--model_dir={stopped}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"resuming from {ckpt} (epoch 1, step 6)" in r.stdout
    metrics = json.loads((stopped / "metrics.json").read_text())
    assert metrics["resumed_from"] == [1, 6] and metrics["keras"] == keras
    for a, b in zip(weights(stopped, keras), weights(straight(strategy, keras), keras)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.default_stack  # tfdist's own arithmetic: tfdist.app.fit's data position
@pytest.mark.parametrize(
    "extra,stop",
    [
        # Epochs of 12 steps over data of 44 steps a pass: epoch 2 trains steps 12-23 of the
        # first pass, so a resume 6 steps into it starts 18 steps into that pass (it started the
        # second pass, the batches of another epoch: measured 2026-11-28, loss 1.9795 against
        # 2.0167 at the end).
        (["--epochs=2", "--steps_per_epoch=12", "--checkpoint_steps=6"], 18),
        # Mirrored over 3 devices, one pipeline: a step takes 3 of its batches and a pass has 44,
        # so passes end inside steps (14 steps an epoch: 42 batches). 32 steps in, the run is 96
        # batches into its data: 8 into the third pass, not the 12 of 4 steps into it.
        (["--epochs=3", "--strategy=mirrored", "--cpu_devices=3", "--checkpoint_steps=4"], 32),
    ],
    ids=["short-epochs", "three-replicas"])
def test_resume_where_the_data_was_equals_uninterrupted(extra, stop, tmp_path):
    args = [*TRAIN, *extra, "--keras=3"]
    stopped, reference = tmp_path / "stopped", tmp_path / "straight"
    r = run([TFDIST, *args, f"--model_dir={stopped}"], env={EXIT_AFTER_STEP: str(stop)})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    r = run([TFDIST, *args, f"--model_dir={stopped}"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"ckpt-%d \(epoch \d, step \d+\), at that step" % stop,
                     r.stderr), r.stderr[-3000:]
    r = run([TFDIST, *args, f"--model_dir={reference}"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for a, b in zip(weights(stopped, 3), weights(reference, 3)):
        np.testing.assert_array_equal(a, b)


# Newest stack: no. What it checks is tfdist's own (a checkpoint written under a temporary name,
# renamed into place; the leftover removed); resuming from a checkpoint runs in the tests above.
@pytest.mark.default_stack
def test_crash_while_writing_keeps_previous_checkpoint(tmp_path):
    # The chief dies half-way through writing the checkpoint of epoch 2 (the test hook: its state
    # written under the temporary name, not yet renamed into place).
    model_dir = tmp_path / "run"
    args = ["--steps_per_epoch=1", "--batch_size=2", "--epochs=4", "--notensorboard"]
    r = run([TFDIST, *TRAIN, *args, f"--model_dir={model_dir}"], env={EXIT_WHILE_SAVING: "2"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{EXIT_WHILE_SAVING}=2: exiting while writing its checkpoint" in r.stderr
    ckpts = model_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if not p.name.startswith(".")) == ["ckpt-1"]
    assert any(p.name.startswith(".tmp-ckpt-2") for p in ckpts.iterdir()), list(ckpts.iterdir())

    r = run([TFDIST, *TRAIN, *args, f"--model_dir={model_dir}"], timeout=WAIT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = r.stdout + r.stderr
    assert "removing .tmp-ckpt-2" in log
    assert "resuming from " + str(ckpts / "ckpt-1") + " (epoch 1, step 0)" in log
    assert not any(p.name.startswith(".tmp") for p in ckpts.iterdir())


# Newest stack: no. tfdist compares what its checkpoint's meta.json recorded with the new flags.
@pytest.mark.default_stack
def test_refused_resume_names_what_differs(tmp_path):
    model_dir = tmp_path / "run"
    r = run([
        TFDIST, *TRAIN, "--epochs=1", "--steps_per_epoch=2", "--keras=3", f"--model_dir={model_dir}"
    ])
    assert r.returncode == 0, r.stderr[-3000:]
    # One refused run with three differences (each compared on its own, check_resume): every
    # one is named.
    r = run([
        TFDIST, *TRAIN, "--epochs=2", "--steps_per_epoch=2", "--model=mlp", "--strategy=mirrored",
        "--cpu_devices=2", "--keras=2", f"--model_dir={model_dir}"
    ])
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Cannot resume from" in r.stderr and "model was 'cnn', now 'mlp'" in r.stderr
    assert "Use a new --model_dir" in r.stderr
    assert "strategy was 'default', now 'mirrored'" in r.stderr
    assert "keras was 3, now 2" in r.stderr


# Newest stack: both; they only look at the shared runs the mid-epoch tests compare with.
@pytest.mark.parametrize("keras", [2, 3])
def test_only_the_chief_writes(keras, straight):
    model_dir = straight("multi_worker", keras)
    scratch = model_dir.parent / "tmp"
    # Every file and folder under model_dir, sub-folders included, is one the chief writes: its
    # checkpoints, ONE TensorBoard event file (a worker's would be a second one), its results;
    # besides each rank's own progress record (the watchdog's side channel, one file a rank).
    chief_writes = re.compile(
        r"^(checkpoints(/ckpt-\d+(/(meta\.json|state\.index|"
        r"state\.data-00000-of-00001))?)?|logs(/train(/events\.out\."
        r"tfevents\.\d+\.[\w.-]+\.\d+\.\d+\.v2)?)?|metrics\.json|model\.keras|"
        r"progress(/rank-[01]\.json)?)$")
    tree = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*"))
    assert [p for p in tree if not chief_writes.match(p)] == [], tree
    # The event files of one process (events.out.tfevents.TIME.HOST.PID.N.v2): the chief's, one
    # per fit (the default steps_per_execution=auto fits twice).
    writers = {re.search(r"\.([\w-]+\.\d+)\.\d+\.v2$", p).group(1) for p in tree if "tfevents" in p}
    assert len(writers) == 1, tree
    ckpts = sorted(p for p in tree if re.fullmatch(r"checkpoints/ckpt-\d+", p))
    assert ckpts and all(f"{c}/meta.json" in tree and f"{c}/state.index" in tree for c in ckpts)
    assert {"metrics.json", "model.keras"} <= set(tree)
    # The worker's collective saves went to temporary directories, all removed.
    assert [p.name for p in scratch.iterdir() if p.name.startswith("tfdist-worker")] == []
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["resumed_from"] is None, metrics
    assert metrics["keras"] == keras and metrics["samples_per_sec"] > 0, metrics
