import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfdist.distribute.horovod_setup import horovod_available

TFDIST = str(Path(sys.executable).parent / "tfdist")
HERE = Path(__file__).parent

needs_horovod = pytest.mark.skipif(not horovod_available(),
                                   reason="Horovod is not installed (make horovod builds it)")


def run(cmd, timeout=600, **kwargs):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM", "TFDIST_LAUNCH", "HOROVOD")) and k != "TF_CONFIG"
    }
    env.update(kwargs.pop("env", {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kwargs)


def launch(n, *cmd, timeout=600, **kwargs):
    return run([TFDIST, "launch", "-n", str(n), "--", *cmd], timeout=timeout, **kwargs)
