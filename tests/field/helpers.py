"""Running the examples (examples/: the field's scripts) as their users do: `tfdist launch`, and
sbatch on the test cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

from tests.helpers import clean_environ

# The repository's examples/, run as shipped: the tests start them from the repository's top
# level, as docs/examples.md does.
TOP = Path(__file__).resolve().parents[2]
EXAMPLES = TOP / "examples"
BIN = Path(sys.executable).parent
# The examples are unseeded, as the field writes them: their accuracy varies from run to run.
# keras.io's convnet on 2 workers, measured 2026-11-27 (9 runs): 0.936-0.984 on Keras 3.8.0
# (6, one a Slurm job), 0.9496-0.965 on Keras 3.15.1 (3); the scripts' docstrings give one run
# each, 0.95-0.98. 0.90 leaves room for that spread; an untrained model scores about 0.1. That
# the workers trained one model is checked exactly (every variable equal on every rank).
MIN_ACCURACY = 0.90
# What a user of a tf-keras script (tf.keras as Keras 2 APIs: `experimental_run_tf_function`,
# DatasetCreator, Horovod's variable broadcasts) exports on TensorFlow >= 2.16, tfdist or not:
# TensorFlow's own switch. The Keras 3 scripts run without it, as TensorFlow's default.
TF_KERAS = {"TF_USE_LEGACY_KERAS": "1"}
# Keras 3 (`import keras`, and tf.keras on TensorFlow >= 2.16): the switch unset (user_environ
# drops whatever the suite sets).
KERAS3: dict = {}


def user_environ(**extra) -> dict:
    """A user's login shell: the venv's bin on PATH, TensorFlow's Keras switch unset unless
    `extra` sets it (tests/conftest.py sets it for the suite), no TensorFlow log level."""
    env = clean_environ(**extra)
    for name in ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL"):
        if name not in extra:
            env.pop(name, None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def launch(n: int,
           *command: str,
           cwd: Path = TOP,
           timeout: float = 420,
           **extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tfdist"), "launch", "-n",
                           str(n), "--", *command],
                          cwd=cwd,
                          env=user_environ(**extra),
                          capture_output=True,
                          text=True,
                          timeout=timeout)


def results(out_dir: Path, processes: int, proc=None) -> dict:
    """The result files (examples/results.py) of the `processes` processes that trained: one
    each, every variable of the model equal (to the bit) in all; returns the first."""
    detail = "" if proc is None else proc.stdout[-3000:] + proc.stderr[-5000:]
    found = [json.loads(p.read_text()) for p in sorted(out_dir.glob("result-*.json"))]
    assert len(found) == processes, f"{len(found)} result files in {out_dir}:\n{detail}"
    for other in found[1:]:
        assert other["variables"] == found[0]["variables"], (found[0]["weight_sums"],
                                                             other["weight_sums"])
    return found[0]


def tfdist_lines(script: Path) -> list[str]:
    """The lines of code a script adds for tfdist: those whose comment is `# tfdist...`
    (docstrings and comment-only lines do not count)."""
    lines = script.read_text().splitlines()
    marked = {
        token.start[0]
        for token in _tokens(script) if token.type == tokenize.COMMENT
        and re.search(r"#\s*tfdist\b", token.string) and token.line[:token.start[1]].strip()
    }
    return [lines[n - 1] for n in sorted(marked)]


def uses_tfdist(script: Path) -> bool:
    """Whether the script's code (not its comments or strings) names tfdist."""
    return any(t.type == tokenize.NAME and t.string == "tfdist" for t in _tokens(script))


def _tokens(script: Path) -> list[tokenize.TokenInfo]:
    with open(script, "rb") as f:
        return list(tokenize.tokenize(f.readline))


def epochs_started(log: str, rank_prefix: str = "[0] ") -> list[int]:
    """The epoch numbers of the `Epoch N/M` lines that rank 0 printed, in order."""
    return [
        int(m) for m in re.findall(r"^" + re.escape(rank_prefix) + r"Epoch (\d+)/\d+$", log, re.M)
    ]
