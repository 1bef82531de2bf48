"""tools/build_horovod_wheel.sh: builds for every TensorFlow setup.cfg accepts, refuses any other
saying what to do (the interpreter is a stand-in that only answers the version query: no build is
started), and carries each of its Horovod patches with the header that says why."""

import configparser
import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "build_horovod_wheel.sh"
PATCHES = sorted((REPO / "tools" / "horovod-patches").glob("*.patch"))


def _built_minors() -> list[str]:
    line = re.search(r'^HOROVOD_TF_BUILT="([^"]+)"', SCRIPT.read_text(), re.M)
    return line.group(1).split()


def _accepted_minors() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    reqs = [Requirement(r) for r in cfg["options"]["install_requires"].split("\n") if r.strip()]
    spec = next(r.specifier for r in reqs if r.name == "tensorflow")
    return [f"2.{m}" for m in range(0, 40) if Version(f"2.{m}.0") in spec]


def test_the_script_builds_for_every_tensorflow_setup_cfg_accepts():
    assert _built_minors() == _accepted_minors()


@pytest.mark.parametrize("tf_version", ["2.15.1", "2.22.0"])
def test_other_tensorflow_is_refused_with_the_way_out(tmp_path, tf_version):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho {tf_version} cp311\n")
    fake.chmod(0o755)
    r = subprocess.run(["bash", str(SCRIPT), "--install"],
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
    assert "against TensorFlow 2.16, 2.17, 2.18, 2.19, 2.20, 2.21;" in r.stderr
    assert "--strategy=multi_worker" in r.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.whl"))


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_each_patch_says_what_it_fixes_for_which_tensorflow_and_where_from(patch):
    header = patch.read_text().split("\n--- a/")[0]
    for field in ("What it fixes:", "TensorFlow versions:", "Where it came from:"):
        assert field in header, f"{patch.name}: no '{field}' in its header"
