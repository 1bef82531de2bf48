"""tfdist's cluster flags, for the `tfdist` commands and for users' own absl scripts.

    from tfdist.cli import flags as tfdist_flags
    tfdist_flags.define_cluster_flags()   # next to the script's own flags
"""

from __future__ import annotations

from absl import flags

from tfdist.cluster import STRATEGIES

FLAGS = flags.FLAGS


def define_cluster_flags() -> None:
    """Define --strategy, --num_ps, --evaluator and --port (once per process)."""
    if "strategy" in FLAGS:
        return
    flags.DEFINE_enum(
        "strategy", "auto", list(STRATEGIES),
        "Distribution strategy. auto: several tasks -> multi_worker, one task -> "
        "mirrored over its GPUs (or the default strategy).")
    flags.DEFINE_integer("num_ps",
                         1, "parameter_server: number of parameter-server tasks "
                         "(task 0 is the chief, the next num_ps are ps, the rest workers).",
                         lower_bound=1)
    flags.DEFINE_bool("evaluator", False, "parameter_server: make the last task an evaluator.")
    flags.DEFINE_integer("port",
                         None, "Base port: each task listens on port + its local rank. "
                         "Default: $TFDIST_PORT, else derived from the Slurm job id in "
                         "20000-31999.",
                         lower_bound=1024,
                         upper_bound=65535)


def roles_from_flags(cluster):
    """Roles of this task from the parsed cluster flags."""
    from tfdist.cluster import build_roles

    return build_roles(cluster,
                       FLAGS.strategy,
                       num_ps=FLAGS.num_ps,
                       evaluator=FLAGS.evaluator,
                       port=FLAGS.port)
