"""A custom training loop (no `model.fit`) under `multi_worker`, on both Kerases:
examples/tf_custom_training_loop.py (TensorFlow's "Custom training with tf.distribute.Strategy",
`strategy.run` of a GradientTape step over `experimental_distribute_dataset`'s batches) run as
shipped on 2 workers. Both ranks take the same steps, end with the same model, and learn digits.
Its `# tfdist` lines are counted in tests/field/test_field_local.py."""

import re

import pytest

from tests.field.helpers import KERAS3, MIN_ACCURACY, TF_KERAS, launch, results
from tests.helpers import tf_keras_twin

pytestmark = pytest.mark.slow

SCRIPT = "examples/tf_custom_training_loop.py"
EPOCHS = 10  # the example's


# tf-keras on the default stack (tests/helpers.py's TF_KERAS_TWIN): the example is the tutorial's
# convnet for 10 epochs, twice the CPU of the test-only loop it replaced.
@pytest.mark.parametrize("keras,version",
                         [(KERAS3, "3."), tf_keras_twin(TF_KERAS, "2.")],
                         ids=["keras3", "tf_keras"])
def test_custom_loop_trains_the_same_model_on_both_workers(keras, version, tmp_path):
    r = launch(2, "python", SCRIPT, str(tmp_path), timeout=300, **keras)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = {
        rank:
        [float(v) for v in re.findall(rf"^\[{rank}\] Epoch \d+, Loss: (\S+),", r.stdout, re.M)]
        for rank in (0, 1)
    }
    assert losses[0] == losses[1] and len(losses[0]) == EPOCHS, r.stdout[-3000:]
    # The mean cross-entropy fell 10x over the 10 epochs on either Keras here (2026-11-27: 2.2 to
    # 0.22); a quarter is far from that.
    assert losses[0][-1] < losses[0][0] / 4, losses
    res = results(tmp_path, 2, r)  # every variable equal on both ranks
    # tf.distribute.MultiWorkerMirroredStrategy's class; the Keras the user chose.
    assert res["strategy"] == "CollectiveAllReduceStrategy" and res["replicas"] == 2, res
    assert res["keras"].startswith(version), res
    assert len(res["variables"]) == 6, res  # the convnet's kernels and biases
    assert res["test_accuracy"] >= MIN_ACCURACY, res
