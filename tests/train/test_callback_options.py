"""rt.callbacks' options are one CallbackOptions: each documented, an unknown one an error naming
it, and the same keywords as before."""

import dataclasses
import re

import pytest

import tfdist
from tfdist.errors import ConfigError
from tfdist.train.callbacks import CallbackOptions, training_callbacks


def test_every_option_is_in_the_docstring():
    documented = re.findall(r"^    (\w+):", CallbackOptions.__doc__, re.M)
    assert documented == [f.name for f in dataclasses.fields(CallbackOptions)]


def test_an_unknown_option_is_named_with_the_close_match():
    rt = tfdist.init(strategy="one_device")
    with pytest.raises(ConfigError) as e:
        rt.callbacks(watchdog_timout=0, meter=False)
    assert str(e.value).startswith("Unknown option 'watchdog_timout' (did you mean "
                                   "'watchdog_timeout'?) of rt.callbacks: it takes batch_size, ")
    with pytest.raises(ConfigError, match="'tensorbord'"):
        training_callbacks(rt.engine, None, tensorbord=False)


def test_keywords_and_an_options_object_give_the_same_callbacks():
    rt = tfdist.init(strategy="one_device")
    by_keywords = training_callbacks(rt.engine, None, meter=False, watchdog_timeout=0)
    options = CallbackOptions.of(meter=False, watchdog_timeout=0)
    by_object = training_callbacks(rt.engine, None, options)
    assert [type(c) for c in by_keywords] == [type(c) for c in by_object]
    assert by_object.meter is None and by_object.watchdog is None
    # Keywords beside an object replace its fields.
    with_meter = training_callbacks(rt.engine, None, options, meter=True)
    assert with_meter.meter is not None
    assert options.meter is False  # frozen: the object itself is unchanged
