"""The base of tfdist's own callbacks: a Keras callback that belongs to neither Keras.

tfdist's callbacks serve both Kerases, and either `fit` takes any object with a callback's
methods. Subclassing tf-keras's `Callback` made every Keras 3 process import tf-keras only for
that base: 0.19 CPU-s and 13 MB more in each task (a two-line Keras 3 script's 1-epoch task, 5
alternating runs each, TensorFlow 2.18). This base has what both CallbackLists read:

- `set_params`, `set_model`, `model`, `params` and every `on_*` hook;
- the batch hooks marked as defaults (the `_is_default` attribute both Kerases' `is_default`
  reads), so that a callback which overrides none of them keeps tf-keras's per-batch machinery
  off and Keras 3's asynchronous dispatch on;
- tf-keras's `_implements_*_batch_hooks`, `_supports_tf_logs` and `_chief_worker_only`.
"""

from __future__ import annotations


def _default(method):
    method._is_default = True
    return method


class Callback:
    """A callback both Kerases' `fit` call (see the module's docstring)."""

    def __init__(self):
        self.validation_data = None
        self.model = None
        self.params = None
        self._chief_worker_only = None
        self._supports_tf_logs = False

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model

    @_default
    def on_batch_begin(self, batch, logs=None):
        pass

    @_default
    def on_batch_end(self, batch, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    @_default
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)  # the older name, as both Kerases keep it

    @_default
    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    @_default
    def on_test_batch_begin(self, batch, logs=None):
        pass

    @_default
    def on_test_batch_end(self, batch, logs=None):
        pass

    @_default
    def on_predict_batch_begin(self, batch, logs=None):
        pass

    @_default
    def on_predict_batch_end(self, batch, logs=None):
        pass

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    # tf-keras's CallbackList asks these to decide whether to call its items per batch at all.
    def _implements_train_batch_hooks(self):
        return self._overrides("on_batch_begin", "on_batch_end", "on_train_batch_begin",
                               "on_train_batch_end")

    def _implements_test_batch_hooks(self):
        return self._overrides("on_test_batch_begin", "on_test_batch_end")

    def _implements_predict_batch_hooks(self):
        return self._overrides("on_predict_batch_begin", "on_predict_batch_end")

    def _overrides(self, *hooks: str) -> bool:
        return not all(getattr(getattr(self, hook), "_is_default", False) for hook in hooks)
