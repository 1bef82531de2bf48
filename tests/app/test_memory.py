"""tfdist.app.memory: the counts `tfdist plan` prints, checked against Keras's own counts and
simple models worked out by hand."""

import pytest

import tfdist  # noqa: F401  (before TensorFlow, as a user script starts)
import tf_keras  # what tfdist.app.models builds and tfdist.app.memory counts (`tfdist plan`)
from tf_keras.src.utils.layer_utils import count_params

from tfdist.app.schedules import make_optimizer
from tfdist.app.memory import ModelMemory, model_memory, parse_bytes
from tfdist.app.models import MODELS, build_model

layers = tf_keras.layers


@pytest.fixture
def policy():
    """Set a Keras precision policy for one test; float32 again afterwards."""
    yield tf_keras.mixed_precision.set_global_policy
    tf_keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "resnet50" else n for n in MODELS])
@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_bundled_models_match_keras_count_params_exactly(name, precision, policy):
    policy(precision)
    model = build_model(name, (8, 8, 1), 10, tf_keras)
    trainable = count_params(model.trainable_weights)
    adam = model_memory(model, make_optimizer("adam", 0.01, tf_keras))
    assert adam.params == model.count_params()
    assert adam.trainable_params == trainable
    assert adam.weight_bytes == 4 * model.count_params()  # variables stay float32
    assert adam.gradient_bytes == 4 * trainable
    # The built Adam: m and v per trainable variable, plus its int64 step counter.
    assert adam.slot_bytes == 2 * 4 * trainable + 8
    assert adam.compute_copy_bytes == (0 if precision == "float32" else 2 * trainable)
    sgd = model_memory(build_model(name, (8, 8, 1), 10, tf_keras),
                       make_optimizer("sgd", 0.01, tf_keras))
    assert sgd.slot_bytes == 4 * trainable + 8  # momentum


def test_activations_are_every_layer_output_once_and_twice_the_largest(policy):
    inner_in = layers.Input((4, ))
    inner = tf_keras.Model(inner_in, layers.Dense(3)(inner_in))
    outer_in = layers.Input((4, ))
    nested = tf_keras.Model(outer_in, layers.Dense(2)(inner(outer_in)))
    flat_in = layers.Input((4, ))
    flat = tf_keras.Model(flat_in, layers.Dense(2)(layers.Dense(3)(flat_in)))
    for model in (nested, flat):
        mem = model_memory(model, make_optimizer("sgd", 0.1, tf_keras))
        assert mem.forward_bytes_per_sample == 4 * (4 + 3 + 2)  # input, two outputs
        assert mem.backward_bytes_per_sample == 2 * 4 * 4  # the largest: the input
        assert mem.activation_bytes_per_sample == 36 + 32
        assert (mem.params, mem.weight_bytes) == (4 * 3 + 3 + 3 * 2 + 2, 4 * 23)
    policy("mixed_bfloat16")
    low_in = layers.Input((4, ))
    low = tf_keras.Model(low_in, layers.Dense(2, dtype="float32")(layers.Dense(3)(low_in)))
    # float32 input, bfloat16 hidden output, float32 logits
    assert model_memory(low, make_optimizer("sgd", 0.1,
                                            tf_keras)).forward_bytes_per_sample == 16 + 6 + 8


def test_bytes_per_strategy_and_the_largest_batch():
    mem = ModelMemory(params=100,
                      trainable_params=100,
                      weight_bytes=400,
                      gradient_bytes=400,
                      slot_bytes=808,
                      slot_variables=3,
                      compute_copy_bytes=0,
                      forward_bytes_per_sample=600,
                      backward_bytes_per_sample=400)
    assert mem.replica_bytes("horovod", 10) == 400 + 400 + 808 + 10_000
    assert mem.replica_bytes("parameter_server", 10) == 400 + 400 + 10_000  # slots on the ps
    assert mem.largest_batch("multi_worker", 1608 + 5999) == 5
    assert mem.largest_batch("central_storage", 1608 + 5999) == 6
    assert mem.largest_batch("mirrored", 1000) == 0


@pytest.mark.parametrize("text,value", [("80GB", 80 * 10**9), ("40GiB", 40 * 2**30),
                                        ("16000MB", 16 * 10**9), ("1.5 GiB", 3 * 2**29),
                                        ("16G", 16 * 10**9), ("1024", 1024)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["lots", "-1GB", "80XB", "GB", "0"])
def test_parse_bytes_refuses(text):
    with pytest.raises(ValueError, match="expected a size such as 80GB"):
        parse_bytes(text)
