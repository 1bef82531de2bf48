"""Engine options are each engine's own: an unknown one (a typo) is an error that names it, the
engine and what it takes, never silently dropped; and what only one engine does is a method or a
capability every engine has."""

import pytest

import tfdist
from tfdist.cluster import build_roles, detect
from tfdist.distribute import engine_classes, make_engine, option_names
from tfdist.distribute.engine import Capabilities, Engine
from tfdist.errors import ConfigError


def one_task(strategy):
    cluster = detect({})
    return cluster, build_roles(cluster, strategy)


def test_each_engine_declares_its_options():
    assert option_names("mirrored") == ("cpu_devices", )
    assert option_names("multi_worker") == ("collective", "bytes_per_pack", "collective_timeout")
    assert option_names("parameter_server") == ("chief_timeout", )
    assert option_names("horovod") == ("compression", "backward_passes_per_step")
    assert option_names("one_device") == option_names("central_storage") == ()
    # auto may become any engine: it takes the options of all of them.
    every = {n for engine in engine_classes().values() for n in engine.option_names()}
    assert sorted(option_names("auto")) == sorted(every)


def test_an_unknown_option_names_itself_the_engine_its_options_and_the_close_match():
    cluster, roles = one_task("horovod")
    with pytest.raises(ConfigError) as e:  # before the engine starts Horovod
        make_engine(cluster, roles, {"compresion": "fp16"})
    assert str(e.value) == (
        "Unknown option 'compresion' (did you mean 'compression'?) of the horovod engine "
        "(tfdist.init(strategy='horovod')): it takes compression, backward_passes_per_step.")


def test_tfdist_init_refuses_a_typo_and_an_option_of_another_engine():
    with pytest.raises(ConfigError,
                       match=r"'cpu_device' \(did you mean 'cpu_devices'\?\) of "
                       r"the mirrored engine .*: it takes cpu_devices\."):
        tfdist.init(strategy="mirrored", cpu_device=2)
    with pytest.raises(ConfigError,
                       match=r"Unknown options 'compression', 'bogus' of the one_device engine "
                       r".*: it takes no options\."):
        tfdist.init(strategy="one_device", compression="fp16", bogus=1)


def test_auto_takes_every_engines_options_and_gives_the_engine_its_own():
    # One task without GPUs: auto is the default strategy, which takes none of them.
    rt = tfdist.init(strategy="auto", collective="ring", cpu_devices=2, compression="fp16")
    assert rt.engine.name == "default"
    with pytest.raises(ConfigError,
                       match=r"'colective' \(did you mean 'collective'\?\) of the "
                       r"auto engine"):
        tfdist.init(strategy="auto", colective="ring")


def test_the_engine_base_refuses_what_a_subclass_passes_on_unknown():

    class Passing(Engine):
        name = "passing"

        def __init__(self, cluster, roles, known: int = 0, **options):
            super().__init__(cluster, roles, **options)

    assert Passing.option_names() == ("known", )
    cluster, roles = one_task("one_device")
    with pytest.raises(ConfigError, match="'knwon' .* of the passing engine: it takes known"):
        Passing(cluster, roles, knwon=1)


def test_what_only_parameter_server_does_every_engine_answers():
    engine = tfdist.init(strategy="one_device").engine
    assert engine.serve() is None  # every task trains: nothing to serve
    assert engine.chief_finished() is False
    assert engine.capabilities == Capabilities()
    assert engine.capabilities.replica_statistics
    parameter_server = engine_classes()["parameter_server"].capabilities
    assert not parameter_server.replica_statistics
