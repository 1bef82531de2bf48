"""tfdist.distribute.default_strategy: the strategy made the program's default, the way out of it
for tfdist's own plain variables, and a script's own strategy taking over."""

import sys
from pathlib import Path

from tests.helpers import run

SCRIPT = str(Path(__file__).parent / "default_strategy_script.py")


def test_default_outside_and_a_scripts_own_strategy():
    r = run([sys.executable, SCRIPT])
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines == [
        "default MirroredVariable True",
        "scope again MirroredVariable",
        "outside in scope ResourceVariable False",
        "restored in scope MirroredVariable",
        "outside ResourceVariable False",
        "restored MirroredVariable True",
        "other thread ResourceVariable",  # TensorFlow keeps the default per thread
        "own MirroredVariable True",
        "after own ResourceVariable False",
        "cleared ResourceVariable False",
    ], r.stdout
    assert ("the script entered the scope of its own MirroredStrategy: tfdist's MirroredStrategy "
            "is no longer the program's default strategy.") in r.stderr
