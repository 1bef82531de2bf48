"""tools/build_horovod_wheel.sh refuses a TensorFlow it does not build against, saying what to do
(the interpreter is a stand-in that only answers the version query: no build is started)."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tf_version", ["2.21.0", "2.19.1", "2.16.2"])
def test_other_tensorflow_is_refused_with_the_way_out(tmp_path, tf_version):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho {tf_version} cp311\n")
    fake.chmod(0o755)
    r = subprocess.run(["bash", str(REPO / "tools" / "build_horovod_wheel.sh"), "--install"],
                       env={
                           "PATH": "/usr/bin:/bin",
                           "PYTHON": str(fake),
                           "TFDIST_WHEEL_CACHE": str(tmp_path / "cache")
                       },
                       capture_output=True,
                       text=True,
                       timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"this Python has TensorFlow {tf_version}" in r.stderr
    assert "against TensorFlow 2.18 only" in r.stderr
    assert "--strategy=multi_worker" in r.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.whl"))
