"""Every `TFDIST_*` environment variable (and `MODEL_DIR`, which the `jobs/` scripts export), in
one place: its name, who sets it and what it does.

The code reads the names from here (e.g. `env_vars.PORT.name`), and the documentation's table of
variables is generated from `VARIABLES`, so the two cannot drift apart. `tests/test_docs.py`
fails when a `TFDIST_*` name appears in tfdist, pipelines, jobs, tools or bench but not here.
Plain Python, no imports of tfdist: every layer, the cluster layer included, may use it.
"""

from __future__ import annotations

import dataclasses

# Who sets a variable: the user (a setting), tfdist itself (for its own processes: read them,
# don't set them), or the project's own tools and tests (not settings of tfdist).
USER = "user"
TFDIST = "tfdist"
TOOLS = "tools"


@dataclasses.dataclass(frozen=True)
class EnvVar:
    name: str
    set_by: str  # USER, TFDIST or TOOLS
    default: str  # in words, as a user reads it ("" when there is none)
    meaning: str  # what it does, for the table of the docs (Markdown)


VARIABLES: list[EnvVar] = []


def _var(name: str, set_by: str, default: str, meaning: str) -> EnvVar:
    var = EnvVar(name, set_by, default, meaning)
    VARIABLES.append(var)
    return var


# Settings of tfdist and its batch scripts.
VERBOSE = _var(
    "TFDIST_VERBOSE", USER, "0", "`1`: show everything (TensorFlow's C++ and Python logging, "
    "every task's lines), as `--verbosity=1` does for one command; also for your own script.")
PORT = _var(
    "TFDIST_PORT", USER, "derived from the Slurm job id (20000–31999)",
    "Base port, as `--port` ([how ports are chosen](../security.md#the-ports)); "
    "`--port` wins over it.")
REQUEUE = _var(
    "TFDIST_REQUEUE", USER, "off (`0`); the `jobs/` scripts export `1`",
    "`1`: when preempted (SIGTERM/SIGUSR1), rank 0 runs `scontrol requeue` after the "
    "checkpoint. `tfdist train --requeue` and `rt.callbacks(requeue=True)` do the same.")
CACHE = _var(
    "TFDIST_CACHE", USER, "`~/.cache/tfdist`",
    "Where bundled pipelines keep prepared data (e.g. digits' TFRecords) when no "
    "`--data_dir` is given.")
BIN = _var("TFDIST_BIN", USER, "`$PYTHON -u -m tfdist.cli.main`",
           "`jobs/` scripts: the `tfdist` command to run instead of the one of `$PYTHON`.")
JOBS_DIR = _var(
    "TFDIST_JOBS_DIR", USER, "the folder of the batch script",
    "`jobs/` scripts: where `common.sh` and `task.sh` are, for a copy of a script kept "
    "elsewhere (Slurm runs a copy of the batch script).")
MODEL_DIR = _var(
    "MODEL_DIR", USER, "`runs/<job name>-<job id>` in the `jobs/` scripts; else none",
    "The run directory (checkpoints, `metrics.json`, the model). The `jobs/` scripts export it "
    "(their first argument) and `tfdist scale`/`tfdist sweep` set it per run; `tfdist.init()` "
    "takes it as `rt.model_dir`, the default of `rt.callbacks()` and `rt.resume()`. A "
    "directory given as `tfdist.init(model_dir=...)`, `rt.callbacks(model_dir=...)`, "
    "`rt.resume(...)` or `tfdist train --model_dir` that is not this one is an error.")
PROFILE_STEPS = _var(
    "PROFILE_STEPS", USER, "off",
    "`A:B`: every rank traces training steps A to B with TensorFlow's profiler into "
    "`MODEL_DIR/profile/<rank>/`, and the chief writes `MODEL_DIR/profile/summary.json` "
    "([where the time goes](../profiling.md)); for a script with only tfdist's two lines, "
    "and the `jobs/` scripts pass it on. `--profile_steps` and `rt.callbacks(profile_steps=...)` "
    "win.")
PROFILE_RANKS = _var(
    "PROFILE_RANKS", USER, "all", "Beside `PROFILE_STEPS`: the ranks that trace, e.g. `0,3`. "
    "`--profile_ranks` and `rt.callbacks(profile_ranks=...)` win.")
PREEMPT_GRACE = _var(
    "TFDIST_PREEMPT_GRACE", USER, "60 (seconds)",
    "`jobs/task.sh`: how long a task other than rank 0 that exits 75 (preempted) waits for "
    "rank 0 to finish its checkpoint and requeue before srun may end the step.")
WATCHDOG_TIMEOUT = _var(
    "TFDIST_WATCHDOG_TIMEOUT", USER, "`auto`: 50 step times, at least 300 s",
    "Seconds without a completed training step before the job ends naming the stuck rank(s) "
    "(exit 124; the first step, epoch ends and checkpoint writes get max(600 s, 3×)); `0` or "
    "`off`: no watchdog. `--watchdog_timeout` and `rt.callbacks(watchdog_timeout=...)` win.")
MAX_RESTARTS = _var(
    "TFDIST_MAX_RESTARTS", USER, "2",
    "With `TFDIST_REQUEUE=1`: how often a Slurm job is requeued after a hang or a lost task "
    "(time-limit requeues do not count); then it fails, saying what happened each time.")
PROGRESS_DIR = _var(
    "TFDIST_PROGRESS_DIR", USER, "`MODEL_DIR/progress`",
    "A directory every rank can write (shared by all nodes), where the watchdog's progress "
    "records go when there is no model directory.")
RENDEZVOUS_DIR = _var(
    "TFDIST_RENDEZVOUS_DIR", USER, "`~/.tfdist/rendezvous`",
    "Under `mpirun`, `mpiexec`, `flux run` or `jsrun` on several nodes: a directory every node "
    "sees, where the ranks write their hosts to find each other ([other launchers]"
    "(../launchers.md)).")
RENDEZVOUS_TIMEOUT = _var(
    "TFDIST_RENDEZVOUS_TIMEOUT", USER, "300 (seconds)",
    "How long a rank waits there for the others before it stops with an error naming them.")
RENDEZVOUS_ID = _var(
    "TFDIST_RENDEZVOUS_ID", USER, "the launcher's id for the launch",
    "The same value on every rank of one launch, for a launcher that names none (MVAPICH's "
    "`mpirun_rsh` outside a batch job): `mpirun_rsh ... TFDIST_RENDEZVOUS_ID=$RANDOM ...`.")

# Set by tfdist for the processes it starts or configures.
STRATEGY = _var(
    "TFDIST_STRATEGY", TFDIST, "",
    "The strategy the launcher runs its processes under: `jobs/<strategy>.sbatch` and "
    "`tfdist launch --strategy` export it. `tfdist.init()` (strategy `auto`) takes it, in every "
    "environment; a script or `--strategy` that asks for another stops with an error naming "
    "both.")
NUM_PS = _var(
    "TFDIST_NUM_PS", TFDIST, "",
    "Beside `TFDIST_STRATEGY=parameter_server`: the parameter-server tasks "
    "(`jobs/parameter_server.sbatch`'s `NUM_PS`, `tfdist launch --num_ps`); `tfdist.init()` "
    "takes it, another `num_ps` in the script is an error.")
EVALUATOR = _var(
    "TFDIST_EVALUATOR", TFDIST, "",
    "Beside `TFDIST_STRATEGY=parameter_server`: `1` makes the last task the evaluator, `0` "
    "not (`jobs/parameter_server.sbatch`'s `EVALUATOR`, `tfdist launch --evaluator`); another "
    "`evaluator` in the script is an error.")
STRATEGY_BY = _var(
    "TFDIST_STRATEGY_BY", TFDIST, "",
    "Who set `TFDIST_STRATEGY`, for the messages: `jobs/horovod.sbatch`, `tfdist launch`, ...")
LAUNCH_RANK = _var("TFDIST_LAUNCH_RANK", TFDIST, "", "`tfdist launch`: this process's rank.")
LAUNCH_WORLD_SIZE = _var("TFDIST_LAUNCH_WORLD_SIZE", TFDIST, "",
                         "`tfdist launch`: the number of processes.")
LAUNCH_PORT = _var("TFDIST_LAUNCH_PORT", TFDIST, "",
                   "`tfdist launch`: the base port it checked free.")
TASK_HOSTS = _var(
    "TFDIST_TASK_HOSTS", TFDIST, "",
    "Under a launcher that names only each process's rank: every rank's host, once exchanged "
    "(JSON), so that the processes a rank starts do not exchange again.")
SWEEP_DIR = _var(
    "TFDIST_SWEEP_DIR", TFDIST, "",
    "`tfdist sweep`: the sweep's directory, given to every element of its job array "
    "(`jobs/common.sh` reads the element's MODEL_DIR and flags from it).")
SWEEP_OFFSET = _var(
    "TFDIST_SWEEP_OFFSET", TFDIST, "0",
    "`tfdist sweep`: element index = this + SLURM_ARRAY_TASK_ID (a sweep larger "
    "than MaxArraySize is several arrays).")
GPUS = _var(
    "TFDIST_GPUS", TFDIST, "", "`RANK:VALUE`, exported by `tfdist env --format=shell` beside the "
    "`CUDA_VISIBLE_DEVICES` it narrowed for task RANK, so that a later `tfdist.init()` takes "
    "that value as the task's own GPUs.")
HOROVOD = _var(
    "TFDIST_HOROVOD", TFDIST, "",
    "`1` beside the `HOROVOD_*` variables tfdist wrote itself (they are rebuilt, not kept, in "
    "a process that inherits them).")
SCALE_SIZE = _var("TFDIST_SCALE_SIZE", TFDIST, "", "`tfdist scale`: the size (tasks) of this run.")
SCALE_RUN_DIR = _var(
    "TFDIST_SCALE_RUN_DIR", TFDIST, "",
    "`tfdist scale`: the run directory of this size (also as `$MODEL_DIR`); your script writes "
    "its `metrics.json` there.")
SCALE_BATCH_SIZE = _var("TFDIST_SCALE_BATCH_SIZE", TFDIST, "",
                        "`tfdist scale`: the per-replica batch of this size.")
SCALE_LR = _var("TFDIST_SCALE_LR", TFDIST, "", "`tfdist scale`: the single-replica learning rate.")
SCALE_LR_SCALING = _var("TFDIST_SCALE_LR_SCALING", TFDIST, "",
                        "`tfdist scale`: the learning-rate scaling rule (linear, sqrt, none).")
SCALE_STEPS = _var("TFDIST_SCALE_STEPS", TFDIST, "", "`tfdist scale`: steps per epoch.")
SCALE_EPOCHS = _var("TFDIST_SCALE_EPOCHS", TFDIST, "",
                    "`tfdist scale`: epochs (one warm-up epoch + the timed ones).")

# The project's tools and tests (not settings of tfdist).
TEST_EXIT_AFTER_STEP = _var(
    "TFDIST_TEST_EXIT_AFTER_STEP", TOOLS, "",
    "Tests only: every task exits (status 3) right after the checkpoint of global step N, so a "
    "test stops a run at a known mid-epoch step. Not a user setting.")
TEST_EXIT_WHILE_SAVING = _var(
    "TFDIST_TEST_EXIT_WHILE_SAVING", TOOLS, "",
    "Tests only: the chief exits in the middle of writing the checkpoint of global step N, as a "
    "crash mid-write would. Not a user setting.")
TEST_PAUSE_AFTER_STEP = _var(
    "TFDIST_TEST_PAUSE_AFTER_STEP", TOOLS, "",
    "Tests only: `N` or `N:FILE`: every task waits at its first preemption check at or after "
    "global step N until it is signalled (or FILE exists), so a test signals a run that is "
    "certainly still training. Not a user setting.")
TEST_AUTO_STEPS_MS = _var(
    "TFDIST_TEST_AUTO_STEPS_MS", TOOLS, "20",
    "Tests only: the milliseconds a call of `tfdist train --steps_per_execution=auto` should take "
    "at least, so a test gets the count it expects whatever the machine's pace (a huge value: "
    "the largest divisor of the epoch's steps). Not a user setting.")
TEST_AUTO_SWITCH_MS = _var(
    "TFDIST_TEST_AUTO_SWITCH_MS", TOOLS, "the run's first call",
    "Tests only: the milliseconds `tfdist train --steps_per_execution=auto` takes a second fit's "
    "start to cost (0: it switches to the count chosen whatever the steps left). Not a user "
    "setting.")
WHEEL_CACHE = _var("TFDIST_WHEEL_CACHE", TOOLS, "`~/.cache/tfdist/wheels`",
                   "`tools/build_horovod_wheel.sh` (`make horovod`): where built wheels are kept.")
HOROVOD_ANY_TF = _var(
    "TFDIST_HOROVOD_ANY_TF", TOOLS, "0",
    "`1`: `tools/build_horovod_wheel.sh` tries to build Horovod 0.28.1 against a TensorFlow "
    "outside 2.16-2.21 (untested).")
NO_CCACHE = _var("TFDIST_NO_CCACHE", TOOLS, "0",
                 "`1`: `tools/build_horovod_wheel.sh` does not use ccache even when installed.")
RANGE_DIR = _var("TFDIST_RANGE_DIR", TOOLS, "`.venv-range/`",
                 "`make test-range`: where its venvs (one per TensorFlow) are kept.")
REPO = _var("TFDIST_REPO", TOOLS, "the checkout that holds `jobs/`",
            "`jobs/` scripts (internal): the checkout whose `.venv` they fall back to.")
SLURM_DIR = _var("TFDIST_SLURM_DIR", TOOLS, "`/run/tfdist-slurm`",
                 "The test Slurm cluster (`tools/slurm/cluster.sh`): its files.")
SLURM_LOCK = _var("TFDIST_SLURM_LOCK", TOOLS, "`/run/lock/tfdist-slurm.lock`",
                  "The test Slurm cluster: its lock file, shared by every test session.")
SLURM_CRED_EXPIRE = _var(
    "TFDIST_SLURM_CRED_EXPIRE", TOOLS, "10 (seconds)",
    "The test Slurm cluster: `AuthInfo cred_expire`, how long a requeued job is held.")
SLURM_KEEP = _var("TFDIST_SLURM_KEEP", TOOLS, "0",
                  "`1`: the test sessions leave the test Slurm cluster up at their end.")
SLURM_STARTED_BY = _var(
    "TFDIST_SLURM_STARTED_BY", TOOLS, "",
    "`tests`: the test fixture started the test Slurm cluster (and takes it down again).")
KERAS3_TRY = _var(
    "TFDIST_KERAS3_TRY", TOOLS, "0",
    "`1`: `tools/keras3_releases.py` only: tfdist's Keras 3 corrections run on Keras code that "
    "`tfdist.keras_compat.known_sources.RUN` does not list, to measure it. Not a user setting.")

__all__ = ["EnvVar", "VARIABLES", "USER", "TFDIST", "TOOLS"]
