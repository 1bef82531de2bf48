"""Each training sample is read once per epoch over all workers, counted: a script with only
tfdist's two lines (count_samples_script.py) records the id of every sample each replica trains on,
per epoch, from inside its model (the batches the train step feeds it, no validation); the test
checks, per epoch, that no id is read twice over the ranks, which ids no rank read, and how many
each replica read. Accuracy cannot tell this: it also passes when every worker reads everything,
or each its own random half.

The training set: scikit-learn's digits (1797), less validation_split=0.1's last 180, is ids
0..1616, 1617 samples: 25 global batches of 64 and one of 17.
"""

import collections
import json
import sys
from pathlib import Path

import pytest

from tests.helpers import TFDIST, keras_environ, requires_horovod, run, tf_keras_twin

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "count_samples_script.py")
TRAIN = 1617  # int(1797 * 0.9): Keras's cut, validation the last 180
STEPS = 26  # ceil(1617 / 64) global batches an epoch, on every replica

# A tf.distribute strategy splits each global batch over the replicas (32 + 32; the last 17 as 9
# + 8) and reads every sample (multi_worker, mirrored).
TF_STRATEGY = dict(counts=[25 * 32 + 9, 25 * 32 + 8], unread=0)
# Horovod (tfdist.distribute.rank_split): 32 + 32 of each global batch, the last 17 cut to 8 + 8
# so that both ranks take the same steps: one sample an epoch no rank reads (documented). NumPy
# arrays are split before Keras shuffles them, so that sample is always the array's 1617th.
HOROVOD = dict(counts=[25 * 32 + 8] * 2, unread=1)

# Before tfdist set one seed on every worker (tfdist.distribute.shared_seed), measured 2026-11-27
# (TensorFlow 2.18.1, Keras 3.15.1 and tf-keras 2.18): each rank read its 809 / 808, but of its
# own random order: per epoch about 400 samples read by both ranks and as many by none (Keras 3,
# NumPy: 416 and 394 of 1617 in epochs 1 and 2; Horovod, dataset: 416, 406). Keras's sharding by
# data (NumPy arrays, a dataset of tensors) and tfdist's split of a dataset's batches under
# Horovod keep rank r's part of each batch of a pipeline every rank reads: right only where the
# ranks read the same order, which unseeded shuffles do not give without one seed on every worker.


class NotOncePerEpoch(AssertionError):
    """Some sample read twice in an epoch, or a sample never read that should be."""


def read_per_epoch(out, n):
    """{epoch: [ids of each replica, rank by rank]} from OUT.<rank>.json, with each rank's
    replicas and steps checked."""
    data = [json.loads(Path(f"{out}.{rank}.json").read_text()) for rank in range(n)]
    epochs = collections.defaultdict(list)
    for saved in data:
        assert saved["replicas"] == 2
        assert sorted(saved["ids"]) == ["0", "1"]  # two epochs, recorded in each
        for epoch, replicas in sorted(saved["ids"].items()):
            assert set(saved["steps"][epoch].values()) == {STEPS}
            epochs[epoch].extend(replicas[r] for r in sorted(replicas, key=int))
    return epochs


def assert_each_sample_once(out, n, counts, unread, never=None):
    """Per epoch: the replicas read `counts` samples each, no sample twice over them, and all of
    the training set but `unread` samples (`never`: which ones), none of validation's."""
    epochs = read_per_epoch(out, n)
    assert sorted(epochs) == ["0", "1"]
    for epoch, replicas in epochs.items():
        assert [len(ids) for ids in replicas] == counts, epoch
        read = collections.Counter(i for ids in replicas for i in ids)
        twice = sorted(i for i, k in read.items() if k > 1)
        missed = sorted(set(range(TRAIN)) - set(read))
        if (len(twice), len(missed)) != (0, unread):
            raise NotOncePerEpoch(
                f"epoch {epoch}: {len(twice)} samples read more than once, {len(missed)} never "
                f"read (expected 0 and {unread}); each replica read {[len(i) for i in replicas]}")
        assert set(read) <= set(range(TRAIN))  # nothing of validation's
        if never is not None:
            assert missed == never


CASES = [
    pytest.param("multi_worker", 3, "numpy"),
    tf_keras_twin("multi_worker", 2, "numpy"),
    pytest.param("multi_worker", 3, "dataset"),
    tf_keras_twin("multi_worker", 2, "dataset"),
    pytest.param("horovod", 3, "numpy", marks=[pytest.mark.horovod, requires_horovod]),
    tf_keras_twin("horovod", 2, "numpy", marks=[pytest.mark.horovod, requires_horovod]),
    pytest.param("horovod", 3, "dataset", marks=[pytest.mark.horovod, requires_horovod]),
    tf_keras_twin("horovod", 2, "dataset", marks=[pytest.mark.horovod, requires_horovod]),
    pytest.param("mirrored", 3, "numpy"),
    pytest.param("mirrored", 3, "dataset"),
]


@pytest.mark.parametrize("strategy, keras, data", CASES)
def test_each_sample_once_per_epoch(strategy, keras, data, tmp_path, monkeypatch):
    run_and_count(strategy, keras, data, tmp_path, monkeypatch)


def test_a_seed_set_on_one_rank_is_every_ranks(tmp_path, monkeypatch):
    """Rank 0's script alone sets a global seed before tfdist.init(): rank 1 takes it, so both
    read the same order. Before (2026-11-27) tfdist's seed collective ran on the unseeded rank
    only, against rank 0's first collective of the model's build: rank 1 exited with status 1
    and rank 0 said "Lost worker 1", the job dead at its start."""
    said = run_and_count("multi_worker", 3, "numpy", tmp_path, monkeypatch, "seed_rank0")
    assert (
        "[0] tfdist: random seed 1234 on every worker: the one the script set before "
        "tfdist.init() on rank 0, set by tfdist on rank 1, where it set none") in said, said[-3000:]


def run_and_count(strategy, keras, data, tmp_path, monkeypatch, *options):
    """Runs the script (`options`: its own, after INPUT) and checks each sample once an epoch;
    the run's output."""
    out = tmp_path / "ids"
    # tf.keras in the script: tf-keras with the switch exported, Keras 3 without it (dropped
    # here, where tests/conftest.py exports it).
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    env = keras_environ(keras)
    if strategy == "mirrored":  # one process, 2 logical CPUs
        r = run([sys.executable, SCRIPT, str(keras), str(out), data, "mirrored"], env=env)
    else:
        r = run([
            TFDIST, "launch", "-n", "2", f"--strategy={strategy}", "--", sys.executable, SCRIPT,
            str(keras),
            str(out), data, *options
        ],
                env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    if strategy == "horovod":
        never = [TRAIN - 1] if data == "numpy" else None  # a dataset's: its last batch's last
        assert_each_sample_once(out, 2, **HOROVOD, never=never)
    else:
        assert_each_sample_once(out, 1 if strategy == "mirrored" else 2, **TF_STRATEGY)
    return r.stdout + r.stderr
