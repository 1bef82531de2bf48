"""Every strategy trains digits to >= 0.95 test accuracy through `tfdist launch`, on both
Kerases: Keras 3 (TensorFlow's default, the users') with the strategy's defaults, and tf-keras
(`--keras=2`) with fewer epochs where its measured accuracy leaves room (TF_EPOCHS)."""

import json

import pytest

from tests.helpers import TFDIST, WAIT, launch, reached, requires_horovod

pytestmark = pytest.mark.slow

# The seed the parameter-server cases of test_digits_reaches_095 train with: one of the seed
# sweep's, whose Keras 3 run it shares (the same command: the strategy's defaults, no other flag).
PS_SEED = 1
# tf-keras's epochs by strategy, fewer than the defaults (10; parameter_server 20): a case's time
# is mostly its processes' start, the epochs cut are what is left to save. The accuracies they
# reached are in test_digits_reaches_095's comment; parameter_server's 15 epochs of Adam gave
# 0.975-0.983 over seeds 1-5 (tfdist/app/config.py).
TF_KERAS_EPOCHS = {"parameter_server": 15}
TF_KERAS_DEFAULT_EPOCHS = 5


@pytest.fixture(scope="module")
def parameter_server_run(tmp_path_factory):
    """`tfdist launch -n 3 -- tfdist train --strategy=parameter_server --seed=SEED [FLAGS]`:
    chief, ps and one worker, on digits, with the strategy's defaults and FLAGS. Each run (the
    launch's result, its model_dir) is made once and read by every test that asks for it: 3
    TensorFlow processes training 20 epochs cost 26-34 s."""
    done = {}

    def run(seed, *flags):
        if (seed, flags) not in done:
            name = "_".join([f"seed{seed}", *(f.strip("-").replace("=", "") for f in flags)])
            model_dir = tmp_path_factory.mktemp(f"parameter_server_{name}") / "run"
            done[seed, flags] = launch(3,
                                       TFDIST,
                                       "train",
                                       "--strategy=parameter_server",
                                       f"--seed={seed}",
                                       f"--model_dir={model_dir}",
                                       *flags,
                                       timeout=WAIT), model_dir
        return done[seed, flags]

    return run


def keras_flags(keras, strategy):
    """tfdist train's flags for `keras`: none for Keras 3 (the default, as a user runs it),
    --keras=2 and the fewer epochs of TF_KERAS_EPOCHS for tf-keras."""
    if keras == 3:
        return []
    return ["--keras=2", f"--epochs={TF_KERAS_EPOCHS.get(strategy, TF_KERAS_DEFAULT_EPOCHS)}"]


# Keras 3 on both stacks (two Keras 3 releases: docs/compatibility.md); tf-keras on the default
# stack, which keeps the newest stack's part within CI's budget (tf-keras trains there under
# multi_worker, mirrored and horovod in test_two_lines.py, test_same_math.py and
# tests/horovod/test_horovod_two_lines.py).
@pytest.mark.newest
@pytest.mark.parametrize("keras", [3, pytest.param(2, marks=pytest.mark.default_stack)])
@pytest.mark.parametrize(
    "strategy,n,extra,replicas",
    [
        ("multi_worker", 2, [], 2),
        pytest.param("horovod", 2, [], 2, marks=requires_horovod),
        ("mirrored", 1, ["--cpu_devices=2"], 2),
        # One process, one device (no GPU here: the CPU; variables on it too).
        ("central_storage", 1, [], 1),
        ("one_device", 1, [], 1),
        # Its own defaults (20 epochs of Adam at 0.001), no flags but --seed=PS_SEED (Keras 3: the
        # run is the seed sweep's, parameter_server_run); chief + ps + one worker, whose steps
        # apply in a fixed order. With two workers which one's stale step lands first depends on
        # timing and so does the accuracy (0.967 seen): tests/slurm/test_jobs.py and
        # tests/keras3/test_parameter_server.py train two at a bound of 0.95.
        ("parameter_server", 3, [], 1),
    ])
def test_digits_reaches_095(strategy, n, extra, replicas, keras, tmp_path, parameter_server_run):
    flags = keras_flags(keras, strategy)
    if strategy == "parameter_server":
        r, model_dir = parameter_server_run(PS_SEED, *flags)
    else:
        model_dir = tmp_path / "run"
        r = launch(n,
                   TFDIST,
                   "train",
                   f"--strategy={strategy}",
                   "--pipeline=digits",
                   f"--model_dir={model_dir}",
                   *extra,
                   *flags,
                   timeout=WAIT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["keras"]) == (strategy, keras)
    assert (metrics["world_size"], metrics["num_replicas"]) == (n, replicas)
    # Seeded and deterministic on one CPU, not across CPUs. tf-keras with the defaults (10 epochs):
    # multi_worker and horovod got 352/360 (0.978) with oneDNN, 349/360 without
    # (TF_ENABLE_ONEDNN_OPTS=0, 2026-11-25); mirrored 351. Measured 2026-11-27 (TensorFlow 2.18.1,
    # Keras 3.15.1, tf-keras 2.18.0, oneDNN): Keras 3 with the defaults 351-352/360 on every
    # strategy (parameter_server seed 1: 351; the same on Keras 3.8.0, the default stack's);
    # tf-keras in 5 epochs 351 (multi_worker, horovod), 348 (mirrored, the lowest: 6 above the
    # bound of 342), 354 (central_storage, one_device), parameter_server in 15 epochs 351. Exact
    # agreement between replica counts is test_same_math's.
    assert reached(metrics["final"]["test_accuracy"], 0.95), metrics["final"]
    assert metrics["samples_per_sec"] > 0
    # The input-wait share, timed in every engine's step: one share per training task and epoch
    # (parameter_server: the chief's one, the mean over the workers that run the steps).
    assert 0 <= metrics["input_wait"] < 1
    assert len(metrics["epoch_input_wait"]) == metrics["epochs"]
    tasks = 1 if strategy == "parameter_server" else n
    assert all(len(shares) == tasks for shares in metrics["epoch_input_wait_per_task"])
    # Only the chief writes the run directory, besides each training rank's own progress record
    # (the watchdog's side channel).
    assert sorted(p.name for p in model_dir.iterdir()) == [
        "checkpoints", "logs", "metrics.json", "model.keras", "progress"
    ]
    assert {p.name
            for p in (model_dir / "progress").iterdir()} <= {f"rank-{r}.json"
                                                             for r in range(n)}
    assert f"[0] tfdist train: {strategy} x{replicas} replicas: test accuracy" in r.stdout


# tfdist's defaults against seeds: the parameter-server path itself is test_digits_reaches_095's.
@pytest.mark.default_stack
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parameter_server_defaults_learn_on_every_seed(seed, parameter_server_run):
    """No flags but the seed, on Keras 3 (the default): the asynchronous strategy's defaults reach
    0.97 on three seeds (its old defaults, SGD with momentum for 10 epochs, reached 0.964 once;
    with tf-keras seeds 1-5 all passed here and on an AVX2-only CPU, 2026-11-25, so 4 and 5 are no
    longer run: 50 CPU-s; Keras 3.15.1, 2026-11-27: 351, 352 and 353 of 360 on seeds 1-3, the
    bound 350). What is checked is where 20 epochs end, so each seed trains them all; seed
    PS_SEED's run is test_digits_reaches_095's (digits is the default pipeline)."""
    r, model_dir = parameter_server_run(seed)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["keras"], metrics["optimizer"], metrics["epochs"]) == (3, "adam", 20), metrics
    assert reached(metrics["final"]["test_accuracy"], 0.97), metrics["final"]
