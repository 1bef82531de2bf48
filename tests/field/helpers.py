"""Running the field scripts as their users do: `tfdist launch`, and sbatch on the test cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import clean_environ

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
MIN_ACCURACY = 0.95
# What a user of a tf-keras script (tf.keras as Keras 2 APIs: `experimental_run_tf_function`,
# DatasetCreator, Horovod's variable broadcasts) exports on TensorFlow >= 2.16, tfdist or not:
# TensorFlow's own switch. The Keras 3 scripts run without it, as TensorFlow's default.
TF_KERAS = {"TF_USE_LEGACY_KERAS": "1"}


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
           cwd: Path = HERE,
           timeout: float = 420,
           **extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tfdist"), "launch", "-n",
                           str(n), "--", *command],
                          cwd=cwd,
                          env=user_environ(**extra),
                          capture_output=True,
                          text=True,
                          timeout=timeout)


def result(out_dir: Path, proc=None) -> dict:
    path = out_dir / "result.json"
    detail = "" if proc is None else proc.stdout[-3000:] + proc.stderr[-5000:]
    assert path.exists(), f"no {path}:\n{detail}"
    return json.loads(path.read_text())


def tfdist_lines(script: Path) -> list[str]:
    """The lines a script adds for tfdist (marked `# tfdist:` or ending in `# tfdist`)."""
    return [
        line for line in script.read_text().splitlines()
        if re.search(r"#\s*tfdist\b", line) and not line.lstrip().startswith("#")
    ]


def epochs_started(log: str, rank_prefix: str = "[0] ") -> list[int]:
    """The epoch numbers of the `Epoch N/M` lines that rank 0 printed, in order."""
    return [
        int(m) for m in re.findall(r"^" + re.escape(rank_prefix) + r"Epoch (\d+)/\d+$", log, re.M)
    ]
