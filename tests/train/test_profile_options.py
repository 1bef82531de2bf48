"""The settings of `profile_steps` (tfdist.train.profile_options), the refusals of
tfdist.train.profiling.make_profiler, and the summary's wording over given per-rank numbers
(tfdist.train.trace_phases.summarize). No process, no trace: test_profiling.py has those."""

from __future__ import annotations

import types

import pytest

from tfdist.errors import ConfigError
from tfdist.train import trace_phases
from tfdist.train.profile_options import parse_ranks, parse_steps, ranks_setting, steps_setting


def test_steps_parse_and_off():
    assert parse_steps("20:25") == (20, 25)
    assert parse_steps((3, 3)) == (3, 3)
    assert parse_steps(None) is None and parse_steps("") is None and parse_steps("off") is None


@pytest.mark.parametrize("value, why", [("20", "expected A:B"), ("5:3", "B is before A"),
                                        ("a:b", "expected A:B"), ("1:3", "step 1 builds"),
                                        ("0:3", "A must be at least 1"), ("2:3:4", "expected")])
def test_a_bad_value_names_itself_and_the_form(value, why):
    with pytest.raises(ConfigError) as e:
        parse_steps(value, "--profile_steps")
    assert f"--profile_steps={value!r}" in str(e.value) and why in str(e.value)
    assert "20:25" in str(e.value)  # the form, by example


def test_the_environment_when_no_value_is_given():
    env = {"PROFILE_STEPS": "4:6", "PROFILE_RANKS": "0,2"}
    assert steps_setting(None, env) == (4, 6) and ranks_setting(None, env) == {0, 2}
    assert steps_setting("7:8", env) == (7, 8) and ranks_setting([1], env) == {1}
    assert steps_setting(None, {}) is None and ranks_setting(None, {}) is None
    with pytest.raises(ConfigError, match=r"\$PROFILE_STEPS='x'"):
        steps_setting(None, {"PROFILE_STEPS": "x"})
    assert parse_ranks("all") is None
    with pytest.raises(ConfigError, match="expected 'all' or ranks"):
        parse_ranks("0,one")


def _engine(batch_callbacks=True, ranks=(0, 1), name="horovod"):
    return types.SimpleNamespace(
        capabilities=types.SimpleNamespace(batch_callbacks=batch_callbacks),
        name=name,
        rank=1,
        is_chief=False,
        training_ranks=lambda: list(ranks))


def test_make_profiler_refuses_what_it_cannot_trace(tmp_path):
    from tfdist.train.profiling import make_profiler

    with pytest.raises(ConfigError, match="under parameter_server: not supported yet"):
        make_profiler(_engine(False, name="parameter_server"), str(tmp_path), (2, 3), None)
    with pytest.raises(ConfigError, match="under multi_worker: refused: TensorFlow's profiler"):
        make_profiler(_engine(name="multi_worker"), str(tmp_path), (2, 3), None)
    with pytest.raises(ConfigError, match="needs a model directory"):
        make_profiler(_engine(name="horovod"), None, (2, 3), None)
    with pytest.raises(ConfigError, match=r"rank\(s\) 5 do not train"):
        make_profiler(_engine(), str(tmp_path), (2, 3), frozenset({0, 5}))
    mine = make_profiler(_engine(), str(tmp_path), (2, 3), frozenset({0}))
    assert (mine.trace, mine.ranks) == (False, [0])  # rank 1 is not asked: it only runs along
    assert make_profiler(_engine(), str(tmp_path), (2, 3), None).trace


def _rank(step, compute, collective, inputs, idle=1.0):
    return dict(steps=[4, 5],
                step_ms=step,
                compute_ms=compute,
                collective_ms=collective,
                input_ms=inputs,
                idle_ms=idle)


def test_summary_names_the_rank_the_others_wait_for():
    ranks = {0: _rank(100, 5, 90, 4), 1: _rank(100, 6, 10, 83), 2: _rank(100, 5, 90, 4)}
    summary = trace_phases.summarize(ranks, (4, 5))
    assert summary["slowest"] == dict(rank=1, ratio=9.0, phase="input", share=0.83)
    assert summary["line"].startswith("profile: rank 1 is 9.0x the median rank's time outside "
                                      "collectives: 83 % waiting for input (steps 4-5, 100 ms")


def test_summary_names_the_collectives_when_no_rank_stands_out():
    ranks = {0: _rank(100, 30, 60, 5, 5), 1: _rank(100, 31, 59, 5, 5)}
    summary = trace_phases.summarize(ranks, (4, 4))
    assert summary["slowest"]["rank"] is None and summary["slowest"]["phase"] == "collective"
    assert summary["line"] == ("profile: no rank is 1.2x slower than the others: the step is "
                               "60 % in collectives (all-reduce, broadcast) (step 4, 100 ms a "
                               "step)")
