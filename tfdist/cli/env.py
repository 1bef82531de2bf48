"""tfdist env: print what this task will use — environment, rank, nodes, TF_CONFIG, Horovod.

Imports no TensorFlow, so it answers at once inside a batch script:
  eval "$(srun tfdist env --strategy=multi_worker --format=shell)"   # or --format=json
"""

from __future__ import annotations

import json
import os
import shlex
import sys

from absl import app, flags

from tfdist.cli import flags as tfdist_flags
from tfdist.cli.command import run_command
from tfdist.cluster import ClusterError, check_port_free, detect, gpus
from tfdist.tf_environ import tf_environ

tfdist_flags.define_cluster_flags()
_FORMAT = flags.DEFINE_enum("format", "json", ["json", "shell"],
                            "json: one JSON object; shell: `export NAME=value` lines to eval.")
_CHECK_PORT = flags.DEFINE_bool("check_port", True,
                                "Check that this task's port is free (when it runs a server).")


def describe() -> dict:
    """Everything `tfdist env` prints, as one dict."""
    cluster = detect()
    roles = tfdist_flags.roles_from_flags(cluster)
    if _CHECK_PORT.value and roles.port is not None and cluster.world_size > 1:
        check_port_free(roles.port, cluster.host, cluster.rank)
    return dict(cluster.as_dict(),
                strategy=roles.strategy,
                task_type=roles.task_type,
                task_index=roles.task_index,
                port=roles.port,
                tf_config=roles.tf_config,
                horovod=roles.horovod,
                tf_environ=tf_environ(),
                gpus=gpus.plan_for(cluster, roles, os.environ, flags.FLAGS.task_gpus).as_dict())


def as_shell(info: dict) -> str:
    lines = [
        f"# tfdist env: {info['environment']}, rank {info['rank']} of {info['world_size']} "
        f"on {info['nodes'][info['node_rank']]}, strategy {info['strategy']}"
    ]
    # The Keras switch too: a script run after `eval` must get tf-keras, as under `tfdist launch`.
    for name, value in info["tf_environ"].items():
        lines.append(f"export {name}={shlex.quote(value)}")
    if info["tf_config"] is not None:
        lines.append(f"export TF_CONFIG={shlex.quote(json.dumps(info['tf_config']))}")
    for name, value in (info["horovod"] or {}).items():
        lines.append(f"export {name}={shlex.quote(value)}")
    lines.append(f"# GPUs: {info['gpus']['summary']}")
    value = info["gpus"]["cuda_visible_devices"]
    if value is not None:  # for the programs started after eval; tfdist.init() then keeps it
        lines.append(f"export {gpus.VISIBLE}={shlex.quote(value)}")
        lines.append(f"export {gpus.PINNED}={shlex.quote(str(info['rank']) + ':' + value)}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"tfdist env takes no arguments; received {argv[1:]}.")
    try:
        info = describe()
    except ClusterError as e:
        print(f"tfdist env: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info, indent=2) if _FORMAT.value == "json" else as_shell(info))


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], tfdist_flags)
