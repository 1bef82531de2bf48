"""tfdist's absl flags, for the `tfdist` commands and for users' own absl scripts.

    from absl import app
    from tfdist.cli import flags as tfdist_flags

    tfdist_flags.define_flags()            # next to the script's own flags

    def main(argv):
        rt = tfdist_flags.init_from_flags()  # tfdist.init with --strategy, --port, ...
"""

from __future__ import annotations

from absl import flags

from tfdist.cluster import STRATEGIES
from tfdist.cluster.gpus import TASK_GPUS
from tfdist.distribute.defaults import (COLLECTIVES, COMPRESSIONS, DEFAULT_BYTES_PER_PACK,
                                        DEFAULT_COLLECTIVE_TIMEOUT)
from tfdist.runtime import LR_SCALING
from tfdist.app.config import DEFAULTS as D

FLAGS = flags.FLAGS

CLUSTER_FLAGS = ("strategy", "num_ps", "evaluator", "port", "task_gpus")
RUNTIME_FLAGS = ("batch_size", "lr_scaling", "collective", "gpu_memory_growth", "bytes_per_pack",
                 "collective_timeout", "compression", "backward_passes_per_step", "cpu_devices")


def _defined_here_already(names) -> bool:
    """Whether this module defined `names` already (a second call: nothing to do). A name another
    module (the user's script) defined first is refused, naming the fix: absl would keep the
    script's flag and tfdist's others would go undefined, failing later on an unrelated name."""
    for name in names:
        if name not in FLAGS:
            continue
        owner = FLAGS.find_module_defining_flag(name)
        if owner != __name__:
            per_replica = (" (tfdist's is the batch per replica: rt.global_batch_size(FLAGS."
                           "batch_size) is the global one)" if name == "batch_size" else "")
            raise flags.DuplicateFlagError(
                f"--{name} is defined by {owner} before tfdist_flags.define_flags() defines it "
                f"too{per_replica}. Fix: drop the script's --{name} and read FLAGS.{name}, which "
                f"tfdist defines; tfdist's flags: {', '.join(names)}.")
    return all(name in FLAGS for name in names)


def define_cluster_flags() -> None:
    """--strategy, --num_ps, --evaluator, --port: what the cluster layer needs (no TensorFlow)."""
    if _defined_here_already(CLUSTER_FLAGS):
        return
    flags.DEFINE_enum(
        "strategy", D.strategy, list(STRATEGIES),
        "Distribution strategy. auto: several tasks -> multi_worker, one task -> "
        "mirrored over its GPUs (or the default strategy).")
    flags.DEFINE_integer("num_ps",
                         D.num_ps, "parameter_server: number of parameter-server tasks "
                         "(task 0 is the chief, the next num_ps are ps, the rest workers).",
                         lower_bound=1)
    flags.DEFINE_bool("evaluator", D.evaluator,
                      "parameter_server: make the last task an evaluator.")
    flags.DEFINE_integer("port",
                         D.port, "Base port: each task listens on port + its local rank. "
                         "Default: $TFDIST_PORT, else one derived from the job id (how ports are "
                         "chosen: docs/security.md, The ports).",
                         lower_bound=1024,
                         upper_bound=65535)
    flags.DEFINE_enum(
        "task_gpus", D.task_gpus, list(TASK_GPUS),
        "GPUs of each task. auto: what the strategy needs (horovod: one per task by local rank; "
        "multi_worker: an equal share of the node's GPUs, all with one task per node; mirrored: "
        "all; ps, chief and evaluator of parameter_server: none); one, share, all or none.")


def define_flags() -> None:
    """The cluster flags plus the runtime's: batch size, learning-rate scaling, engine options."""
    define_cluster_flags()
    if _defined_here_already(RUNTIME_FLAGS):
        return
    flags.DEFINE_integer("batch_size",
                         D.batch_size, "Batch size per replica; the global batch is this "
                         "times the replicas in sync.",
                         lower_bound=1)
    flags.DEFINE_enum(
        "lr_scaling", D.lr_scaling, list(LR_SCALING),
        "How the learning rate grows with N replicas: linear (lr*N), sqrt "
        "(lr*sqrt(N)) or none.")
    flags.DEFINE_enum(
        "collective", "auto", list(COLLECTIVES),
        "multi_worker: how gradients are all-reduced. auto: NCCL when the worker trains on "
        "GPUs, else TensorFlow's ring over gRPC (TensorFlow's own AUTO means the ring).")
    flags.DEFINE_bool(
        "gpu_memory_growth", D.gpu_memory_growth, "Let TensorFlow allocate GPU memory as needed "
        "instead of nearly all of it at start.")
    flags.DEFINE_integer("bytes_per_pack",
                         DEFAULT_BYTES_PER_PACK, "multi_worker: pack gradients into chunks of this "
                         "many bytes per all-reduce (0: TensorFlow's one pack, slower on CPU).",
                         lower_bound=0)
    flags.DEFINE_float("collective_timeout",
                       DEFAULT_COLLECTIVE_TIMEOUT, "multi_worker: seconds after which a "
                       "collective fails (0: none). A lost worker is caught in seconds by "
                       "MultiWorkerMirroredStrategy's health check anyway; a timeout costs one "
                       "sleeping thread per collective op until it expires.",
                       lower_bound=0)
    flags.DEFINE_enum("compression", "none", list(COMPRESSIONS),
                      "horovod: compress gradients for the all-reduce.")
    flags.DEFINE_integer("backward_passes_per_step",
                         1, "horovod: local gradient accumulation "
                         "steps per all-reduce.",
                         lower_bound=1)
    flags.DEFINE_integer("cpu_devices",
                         0, "mirrored: split the CPU into this many logical "
                         "devices (testing mirrored on machines without GPUs).",
                         lower_bound=0)

    def only_with(strategies, names):

        def check(values):
            return values["strategy"] in strategies or all(values[n] == FLAGS[n].default
                                                           for n in names)

        flags.register_multi_flags_validator(
            ["strategy"] + names,
            check,
            message=f"--{'/--'.join(names)} apply only to --strategy="
            f"{' or '.join(strategies)}; remove them or change --strategy.")

    only_with(("parameter_server", "auto"), ["num_ps", "evaluator"])
    only_with(("horovod", ), ["compression", "backward_passes_per_step"])
    only_with(("mirrored", ), ["cpu_devices"])
    only_with(("multi_worker", "auto"), ["collective", "bytes_per_pack"])


def given_parameter_server_flags() -> dict:
    """--num_ps and --evaluator where given on the command line, else None: a flag's default must
    not contradict the job's choice (TFDIST_NUM_PS, TFDIST_EVALUATOR)."""
    return {
        name: FLAGS[name].value if FLAGS[name].present else None
        for name in ("num_ps", "evaluator")
    }


def roles_from_flags(cluster):
    """Roles of this task from the parsed cluster flags."""
    from tfdist.cluster import build_roles

    return build_roles(cluster, FLAGS.strategy, port=FLAGS.port, **given_parameter_server_flags())


def engine_options_from_flags() -> dict:
    """The engine options of the chosen strategy, from the parsed flags."""
    multi_worker = {
        "collective": FLAGS.collective,
        "bytes_per_pack": FLAGS.bytes_per_pack,
        "collective_timeout": FLAGS.collective_timeout
    }
    return {
        "auto": multi_worker,
        "multi_worker": multi_worker,
        "horovod": {
            "compression": FLAGS.compression,
            "backward_passes_per_step": FLAGS.backward_passes_per_step
        },
        "mirrored": {
            "cpu_devices": FLAGS.cpu_devices
        },
    }.get(FLAGS.strategy, {})


def init_from_flags(**overrides):
    """tfdist.init() from the parsed flags (call inside main, after absl parsed them)."""
    from tfdist.runtime import init

    kwargs = dict(strategy=FLAGS.strategy,
                  port=FLAGS.port,
                  lr_scaling=FLAGS.lr_scaling,
                  task_gpus=FLAGS.task_gpus,
                  gpu_memory_growth=FLAGS.gpu_memory_growth,
                  **given_parameter_server_flags(),
                  **engine_options_from_flags())
    kwargs.update(overrides)
    return init(**kwargs)
