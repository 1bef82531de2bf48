"""A keras.io-style script that makes its own `tf.distribute.MirroredStrategy()` after tfdist's
two lines (tfdist.distribute.mirrored_guard), in real processes through `tfdist launch`: where
tfdist's strategy spans several processes the call is refused on every rank, with the fix, before
TensorFlow crashes (it died with SIGSEGV on rank 0 before, no message); the fix trains. In one
process, and under Horovod (its strategy is TensorFlow's default, each process its own devices),
the script's own MirroredStrategy is what it asked for and trains. And in this process: the
refusal follows the engine of the last tfdist.init()."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import TFDIST, run
from tfdist.distribute import mirrored_guard

SCRIPT = str(Path(__file__).parent / "own_mirrored_script.py")

REFUSED = ("tfdist.distribute.mirrored_guard.SecondStrategy: this script makes "
           "tf.distribute.MirroredStrategy() after tfdist.init() built the {} strategy over {} "
           "processes: a MirroredStrategy mirrors the devices of one process and cannot span the "
           "job's processes (made here, TensorFlow crashes with SIGSEGV or trains something other "
           "than one model over the job). Fix: use tfdist's strategy in its place, `strategy = "
           "tf.distribute.get_strategy()` after tfdist.init(), or `strategy = "
           "tfdist.init().strategy` as the init line; the script's `with strategy.scope():` and "
           "`strategy.num_replicas_in_sync` stay as they are.")


def launch(n, strategy, how):
    return run(
        [TFDIST, "launch", "-n", n, f"--strategy={strategy}", "--", sys.executable, SCRIPT, how])


def assert_refused(r, strategy, n, ranks):
    said = r.stdout + r.stderr
    assert r.returncode == 1, said[-3000:]
    # No crash: the launcher's "rank 0 was killed by SIGSEGV" and Python's fatal-error report.
    assert "killed by" not in said and "Segmentation fault" not in said, said[-3000:]
    for rank in ranks:  # at the script's own line, before TensorFlow made anything of it
        assert f"[{rank}] {REFUSED.format(strategy, n)}" in said, said[-3000:]
        assert f"[{rank}]     strategy = tf.distribute.MirroredStrategy()" in said
    assert "Number of devices" not in said


def assert_one_model(r, replicas, n=2):
    """Every rank trained with `replicas` replicas and ended with the same weights."""
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    ends = [line.split("] ", 1)[1] for line in r.stdout.splitlines() if "] replicas " in line]
    assert len(ends) == n and len(set(ends)) == 1, r.stdout[-3000:]
    assert ends[0].startswith(f"replicas {replicas}, weights ")


@pytest.mark.slow
def test_refused_on_every_rank_under_multi_worker():
    assert_refused(launch(2, "multi_worker", "own"), "multi_worker", 2, ranks=(0, 1))
    # What the error says to write trains one model over both processes.
    assert_one_model(launch(2, "multi_worker", "fix"), replicas=2)


@pytest.mark.slow
def test_refused_on_the_chief_under_parameter_server():
    # Only the chief runs the script past tfdist.init() (the ps and worker tasks serve in it);
    # its MirroredStrategy would have taken their CPUs as 3 replicas.
    assert_refused(launch(3, "parameter_server", "own"), "parameter_server", 3, ranks=(0, ))


@pytest.mark.slow
def test_horovod_keeps_its_own_mirrored_strategy():
    """Horovod's strategy is TensorFlow's default and each process has its own devices: the
    script's MirroredStrategy is one process's, and Horovod's optimizer averages over them."""
    assert_one_model(launch(2, "horovod", "own"), replicas=1)


@pytest.mark.slow
def test_one_process_keeps_its_own_mirrored_strategy():
    assert_one_model(launch(1, "mirrored", "own"), replicas=1, n=1)


def test_refusal_follows_the_last_init():
    """In one process: refused after an engine over several tasks, TensorFlow's TF1 class too;
    allowed again once a later tfdist.init() installs an engine of one process (or none)."""
    import tensorflow as tf

    class Resolver:

        def cluster_spec(self):
            return tf.train.ClusterSpec({"chief": ["a:1"], "ps": ["b:1"], "evaluator": ["c:1"]})

    class Engine:
        name, strategy = "parameter_server", SimpleNamespace(_cluster_resolver=Resolver())

    try:
        mirrored_guard.install(Engine())
        for cls in (tf.distribute.MirroredStrategy, tf.compat.v1.distribute.MirroredStrategy):
            with pytest.raises(mirrored_guard.SecondStrategy,
                               match="the parameter_server "
                               "strategy over 2 processes: a MirroredStrategy mirrors"):
                cls()
        Engine.strategy = tf.distribute.get_strategy()  # one process's (TensorFlow's default)
        mirrored_guard.install(Engine())
        assert mirrored_guard.refusal() is None
    finally:
        mirrored_guard.install(None)
    assert tf.distribute.MirroredStrategy().num_replicas_in_sync == 1
