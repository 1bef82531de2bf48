"""`import tfdist` sets the process up (import hook, TensorFlow's log level in the environment,
tfdist's log handler); importing only the TensorFlow-free cluster layer, or running the launch
guard, leaves the process as it was (tfdist.import_context). Each case in a fresh interpreter."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO, clean_environ
from tfdist.import_context import TENSORFLOW_FREE, _main_module

# What the process looks like after the import in the first lines.
STATE = """
import json, logging, os, sys
print(json.dumps({
    "hooks": [type(f).__module__ for f in sys.meta_path if type(f).__module__.startswith("tfdist")],
    "tf_cpp": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
    "handlers": len(logging.getLogger("tfdist").handlers),
    "tensorflow": "tensorflow" in sys.modules,
}))
"""


def environ() -> dict:
    env = clean_environ(PYTHONPATH=str(REPO))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # this test process's own `import tfdist` set it
    return env


def state_after(imports: str) -> dict:
    out = subprocess.run([sys.executable, "-c", imports + "\n" + STATE],
                         env=environ(),
                         capture_output=True,
                         text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


UNTOUCHED = {"hooks": [], "tf_cpp": None, "handlers": 0, "tensorflow": False}
SET_UP = {"hooks": ["tfdist.import_hooks"], "tf_cpp": "2", "handlers": 1, "tensorflow": False}


@pytest.mark.parametrize("imports", [
    "import tfdist.cluster",
    "from tfdist.cluster import detect, build_roles",
    "import tfdist.cluster.slurm",
    "import importlib; importlib.import_module('tfdist.cluster')",
    "import tfdist.cli.launch_guard",
])
def test_the_cluster_layer_and_the_guard_leave_the_process_alone(imports):
    assert state_after(imports) == UNTOUCHED


@pytest.mark.parametrize(
    "imports",
    [
        "import tfdist",
        "from tfdist import cluster",  # `import tfdist` first, then its submodule
        "import tfdist.errors",
        "import tfdist.cli.flags",
    ])
def test_import_tfdist_sets_the_process_up(imports):
    assert state_after(imports) == SET_UP


def test_tfdist_init_sets_up_a_process_that_imported_the_cluster_layer_first():
    state = state_after("import tfdist.cluster\nimport tfdist\n"
                        "tfdist.init(strategy='one_device')")
    assert state == dict(SET_UP, tensorflow=True)


def test_the_launch_guard_leaves_its_rank_the_environment_it_got():
    read, write = os.pipe()  # the launcher's pipe: held open here while the guard runs
    try:
        out = subprocess.run(
            [
                sys.executable, "-m", "tfdist.cli.launch_guard",
                str(read), "5", "--", sys.executable, "-c",
                "import os; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
            ],
            env=environ(),
            pass_fds=(read, ),
            start_new_session=True,  # as launch starts it: it ends its group
            capture_output=True,
            text=True,
            timeout=300)
    finally:
        os.close(read)
        os.close(write)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_python_m_names_the_module_it_runs():
    python = sys.executable
    assert _main_module([python, "-m", "tfdist.cli.launch_guard", "3", "30"]) == TENSORFLOW_FREE[1]
    assert _main_module([python, "-X", "dev", "-mtfdist.cli.launch_guard"]) == TENSORFLOW_FREE[1]
    assert _main_module([python, "-c", "pass"]) is None
