"""What older Keras 3 releases lack, refused with the fix: before 3.8 Keras adds up the gradients of
several replicas (keras_compat.replica_loss: fit is refused there and trains as before under one
replica); before 3.1 its optimizers cannot be checkpointed (tfdist.train.checkpoint). The
installed Keras (3.8.0 on the default stack, 3.15.1 on the newest) is made to answer as those
releases do; the releases themselves are run by tools/keras3_releases.py
(docs/compatibility.md#keras-3-releases)."""

import types

import numpy as np
import pytest


def model():
    import keras

    model = keras.Sequential([keras.Input((1, )), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_the_installed_keras_scales_each_replicas_loss():
    from tfdist.keras_compat.replica_loss import scales_loss

    assert scales_loss()


def test_keras_before_3_8_is_refused_under_two_replicas(monkeypatch):
    import keras

    from tfdist.keras_compat import replica_loss
    from tfdist.keras_compat.replica_loss import KerasReplicaLossUnscaled

    monkeypatch.setattr(replica_loss, "scales_loss", lambda: False)
    assert keras.Model.fit._tfdist_replica_loss  # applied on import
    # A model under a strategy of 2 replicas in sync: the check runs before Keras reads anything.
    two = types.SimpleNamespace(distribute_strategy=types.SimpleNamespace(num_replicas_in_sync=2))
    for method in (keras.Model.fit, keras.Model.train_on_batch):
        with pytest.raises(KerasReplicaLossUnscaled,
                           match=r"adds up the gradients of the 2 "
                           r"replicas.*2 times yours.*keras>=3\.8"):
            method(two, np.zeros((4, 1)), np.zeros((4, 1)))


def test_keras_before_3_8_trains_under_one_replica(monkeypatch):
    from tfdist.keras_compat import replica_loss

    monkeypatch.setattr(replica_loss, "scales_loss", lambda: False)
    history = model().fit(np.ones((4, 1)), np.ones((4, 1)), epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1


def test_an_optimizer_tf_train_checkpoint_cannot_save_is_refused_with_the_fix():
    import keras

    from tfdist.train.checkpoint import OptimizerNotCheckpointable, check_checkpointable

    check_checkpointable(keras.optimizers.Adam())  # Keras >= 3.1: trackable

    class Adam:  # what Keras 3.0's optimizers are to tf.train.Checkpoint: not Trackable
        pass

    with pytest.raises(OptimizerNotCheckpointable,
                       match=r"optimizer \(Adam\) cannot be saved by "
                       r"tf.train.Checkpoint.*keras>=3\.1"):
        check_checkpointable(Adam())
