"""tfdist.train.auto_callbacks in one process, with stand-ins for the callbacks (the lists are
what is checked; tests/distribute/test_two_lines.py trains with them on 2 workers)."""

from tfdist.keras_compat import user_fit
from tfdist.train import auto_callbacks
from tfdist.train.callbacks import TrainingCallbacks


class BroadcastGlobalVariablesCallback:  # the name of Horovod's, as a script passes it
    pass


class MetricAverageCallback:  # another of the engine's (Horovod's)
    pass


class Meter:  # one of tfdist's own
    __module__ = "tfdist.train.throughput"


class Statistics:  # tfdist's own that runs before the script's (the layer statistics)
    __module__ = "tfdist.train.callbacks"
    before_the_scripts = True


class Model:
    strategy = None  # made under TensorFlow's default strategy, as tfdist's engine's here


def fit_call(**arguments):
    """The arguments fit's hooks leave, for a tf-keras model (its GENERATION 2 adds items)."""
    call = user_fit.Call(Model(), dict(arguments))
    auto_callbacks._add(call)
    return call.arguments


def test_added_once_and_nothing_twice(monkeypatch):
    made = []

    def make(model_dir, batch):
        made.append((model_dir, batch))
        return TrainingCallbacks(
            [BroadcastGlobalVariablesCallback(),
             MetricAverageCallback(),
             Statistics(),
             Meter()])

    keras = type("A", (), {
        "GENERATION": 2,
        "strategy_at_build": staticmethod(lambda m: m.strategy)
    })
    monkeypatch.setattr(auto_callbacks, "adapter", lambda model: keras)
    auto_callbacks.install(make, "/runs/a", replicas=2)
    try:
        # No callbacks: tfdist's list itself; the global batch 64 is 32 per replica.
        assert isinstance(fit_call(batch_size=64)["callbacks"], TrainingCallbacks)
        assert made == [("/runs/a", 32)]
        # The script's own Horovod broadcast: the engine's of that kind is left out; the engine's
        # others come before the script's (they average the logs it reads), and the layer
        # statistics' averaging (the weights it reads and keeps), tfdist's others after.
        own = BroadcastGlobalVariablesCallback()
        callbacks = fit_call(callbacks=[own], batch_size=63)["callbacks"]
        assert [type(c).__name__ for c in callbacks] == [
            "MetricAverageCallback", "Statistics", "BroadcastGlobalVariablesCallback", "Meter"
        ]
        assert callbacks[2] is own
        assert made[-1] == ("/runs/a/fit-2", None)  # the second fit; 63 is not 2 replicas' batch
        # Callbacks that hold tfdist's already: nothing added, nothing made.
        theirs = TrainingCallbacks([Meter()])
        assert fit_call(callbacks=[theirs])["callbacks"] == [theirs]
        assert len(made) == 2
        # A model made under a strategy of the script's own: nothing added.
        own_strategy = Model()
        own_strategy.strategy = object()
        call = user_fit.Call(own_strategy, {"callbacks": None})
        auto_callbacks._add(call)
        assert call.arguments["callbacks"] is None and len(made) == 2
    finally:
        auto_callbacks.uninstall()
    assert fit_call(callbacks=None)["callbacks"] is None  # uninstalled: nothing
