"""The terminal a newcomer sees: `make demo` prints at most 20 lines and no error or warning line
of TensorFlow's on this healthy run; TFDIST_VERBOSE=1 shows everything."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cannot_run import cannot_run
from tests.helpers import REPO, TFDIST, WAIT, clean_environ, run

pytestmark = [pytest.mark.slow, pytest.mark.default_stack]  # make demo uses .venv
# TensorFlow's and absl's error and warning lines, C++ and Python, after launch's "[rank] ".
TF_ERROR_OR_WARNING = re.compile(r"^(\[\d+\] )?([EW]\d{4} |\d{4}-\d\d-\d\d [\d:.]+: [EW] |"
                                 r"WARNING: |ERROR: )")


def test_make_demo_is_short_and_quiet(tmp_path):
    if Path(sys.prefix) != REPO / ".venv":
        cannot_run(f"make demo runs {REPO}/.venv, not this Python ({sys.prefix})",
                   "run the suite with the checkout's .venv (`make test`)")
    env = clean_environ()
    # As typed at a shell, not as a sub-make of `make test` (which prints "make[1]: ..." lines).
    for name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
        env.pop(name, None)
    # Not part of the demo's output: a stale install would print pip's lines first.
    subprocess.run(["make", "-s", "install"], cwd=REPO, env=env, check=True, capture_output=True)
    r = subprocess.run(["make", "demo", f"DEMO_DIR={tmp_path / 'demo'}"],
                       cwd=REPO,
                       env=env,
                       capture_output=True,
                       text=True,
                       timeout=WAIT)
    lines = (r.stdout + r.stderr).splitlines()
    assert r.returncode == 0, "\n".join(lines[-50:])
    assert len(lines) <= 20, f"{len(lines)} lines:\n" + "\n".join(lines)
    assert not [line for line in lines if TF_ERROR_OR_WARNING.match(line)], "\n".join(lines)
    assert sum(re.match(r"\[0\] tfdist: epoch \d+/10: loss ", line) is not None
               for line in lines) == 10
    assert lines[-1].startswith("demo: multi_worker with 2 workers: test accuracy 0.9")


def test_verbose_shows_what_the_default_hides(tmp_path):
    train = [TFDIST, "train", "--epochs=1", "--steps_per_epoch=3", "--notensorboard"]
    quiet = run([*train, f"--model_dir={tmp_path / 'quiet'}"], timeout=300)
    loud = run([*train, f"--model_dir={tmp_path / 'loud'}"],
               env={"TFDIST_VERBOSE": "1"},
               timeout=300)
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr[-2000:] + loud.stderr
    quiet_lines = (quiet.stdout + quiet.stderr).splitlines()
    loud_lines = (loud.stdout + loud.stderr).splitlines()
    assert not [line for line in quiet_lines if TF_ERROR_OR_WARNING.match(line)], quiet_lines
    # The routine epoch-end checkpoint and TensorFlow's own INFO lines only when verbose.
    assert not any("tfdist: checkpoint " in line for line in quiet_lines), quiet_lines
    assert any(
        re.search(r"tfdist: checkpoint \S+/ckpt-3 \(epoch 1, step 0\)", line)
        for line in loud_lines), loud_lines
    assert any(re.match(r"(I\d{4} |\d{4}-\d\d-\d\d [\d:.]+: I )", line)
               for line in loud_lines), loud_lines
    assert len(loud_lines) > len(quiet_lines) + 3
