"""`tfdist.init()`: cluster detected, roles built, engine made — one object for the training code.

    import tensorflow as tf
    import tfdist                      # anywhere: tf.keras stays the Keras TensorFlow makes it
    rt = tfdist.init(strategy="multi_worker")  # its strategy now the program's default
    start = rt.resume()                # where a preempted run in $MODEL_DIR stopped (or epoch 0)
    with rt.scope():                   # optional: what is built after init() is under it anyway
        model = build_model()
        model.compile(optimizer=rt.optimizer(tf.keras.optimizers.SGD(rt.scale_lr(0.1))), ...)
    model.fit(rt.dataset(input_fn, skip_steps=start.steps_done), epochs=10, steps_per_epoch=...,
              callbacks=rt.callbacks(batch_size=32))  # in $MODEL_DIR: checkpoints, requeue, ...
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from typing import Any, Optional

from tfdist import env_vars
from tfdist.cluster import Cluster, Roles, build_roles, detect
from tfdist.cluster.gpus import GpuPlan
from tfdist.distribute import Engine, make_engine
from tfdist.errors import ConfigError
from tfdist.logs import quiet_other_tasks

log = logging.getLogger("tfdist")

LR_SCALING = ("linear", "sqrt", "none")


def check_lr_scaling(rule: str) -> str:
    """`rule` when it is one of LR_SCALING, else a ConfigError naming it."""
    if rule not in LR_SCALING:
        raise ConfigError(f"lr_scaling={rule!r}: expected one of {', '.join(LR_SCALING)} "
                          "(--lr_scaling).")
    return rule


def scale_lr(lr: float, replicas: float, rule: str = "linear") -> float:
    """The single-replica rate `lr` for `replicas` times its batch: ηN (linear), η√N (sqrt)."""
    check_lr_scaling(rule)
    return {"linear": lr * replicas, "sqrt": lr * math.sqrt(replicas), "none": lr}[rule]


class Runtime:
    """This task's engine, with the questions training code asks of it."""

    def __init__(self,
                 cluster: Cluster,
                 roles: Roles,
                 engine: Engine,
                 lr_scaling: str = "linear",
                 gpus: Optional[GpuPlan] = None,
                 model_dir: Optional[str] = None):
        self.cluster, self.roles, self.engine = cluster, roles, engine
        self.lr_scaling = check_lr_scaling(lr_scaling)  # at init, not at the first scale_lr
        self.gpus = gpus  # the GPUs this task uses (tfdist.cluster.gpus.GpuPlan)
        # The run directory (init's model_dir, else $MODEL_DIR, else None): callbacks' and
        # resume's default.
        self.model_dir = model_dir
        self._input_counter = None  # batches delivered, for the progress watchdog
        self._element_spec = None  # of rt.dataset's batches: builds a Keras 3 model to restore
        # The most steps an rt.dataset skips (a validation set made after it skips none): a
        # mid-epoch checkpoint resumes at its step only if the input skips the steps done.
        self._input_skips = 0
        self._watchdog_off = False  # rt.callbacks(watchdog_timeout=0): nothing to count for

    @property
    def strategy(self):
        """The tf.distribute strategy (Horovod: TensorFlow's default strategy)."""
        return self.engine.strategy

    @property
    def strategy_name(self) -> str:
        """The engine's name: mirrored, multi_worker, parameter_server, horovod, ..."""
        return self.engine.name

    @property
    def num_replicas(self) -> int:
        """Replicas in sync: each takes one per-replica batch a step (all GPUs of all workers)."""
        return self.engine.num_replicas_in_sync

    @property
    def is_chief(self) -> bool:
        """The task that writes checkpoints, logs and metrics.json (worker 0, the chief, rank 0)."""
        return self.engine.is_chief

    @property
    def trains(self) -> bool:
        """Whether this task runs model.fit (not a parameter server, worker of parameter_server
        or the evaluator)."""
        return self.roles.trains

    @property
    def is_evaluator(self) -> bool:
        """The parameter-server evaluator (--evaluator): it trains nothing and evaluates the
        chief's checkpoints (tfdist.train.sidecar) until the chief has finished."""
        return self.roles.is_evaluator

    @property
    def rank(self) -> int:
        """This task's rank, 0 to world_size - 1."""
        return self.engine.rank

    @property
    def world_size(self) -> int:
        """Tasks (processes) in the job, every role included."""
        return self.engine.world_size

    def scope(self) -> contextlib.AbstractContextManager:
        """The strategy's scope. Optional after tfdist.init(), which makes the strategy the
        program's default (tfdist.distribute.default_strategy); entering it again changes
        nothing."""
        return self.engine.scope()

    def global_batch_size(self, per_replica: int) -> int:
        """The batch one step trains on: `per_replica` times the replicas in sync."""
        return per_replica * max(1, self.num_replicas)

    def scale_lr(self, lr: float, rule: Optional[str] = None) -> float:
        """The single-replica rate `lr` scaled to the replicas in sync: ηN (linear), η√N (sqrt)."""
        return scale_lr(lr, max(1, self.num_replicas), rule or self.lr_scaling)

    def dataset(self, dataset_fn, skip_steps: int = 0, starts_at_step: int = 0):
        """What model.fit takes: dataset_fn(input_context) built once per input pipeline, less
        the batches of the first `skip_steps` steps (a resumed run: `rt.resume(d).steps_done`, or
        `.step` when dataset_fn already starts at the resumed epoch). `starts_at_step`: the
        steps into the resumed epoch at which dataset_fn's input already starts by itself
        (nothing skipped here); either says that a mid-epoch checkpoint resumes at its step."""
        exact = self.engine.capabilities.exact_resume
        if skip_steps and not exact:
            log.info("%s has no exact data position to resume at: the data starts over.",
                     self.engine.name)
            skip_steps = 0
        self._input_skips = max(self._input_skips, skip_steps, starts_at_step if exact else 0)
        if skip_steps:

            def skipped(ctx, dataset_fn=dataset_fn):
                # Each step takes one per-replica batch from a pipeline per replica it feeds.
                per_step = max(1, ctx.num_replicas_in_sync // ctx.num_input_pipelines)
                return dataset_fn(ctx).skip(skip_steps * per_step)

            dataset_fn = skipped

        def recorded(ctx, dataset_fn=dataset_fn):
            dataset = dataset_fn(ctx)
            self._element_spec = getattr(dataset, "element_spec", None)
            return dataset

        dataset_fn = recorded
        # Steps that take one batch from each pipeline: the batches delivered tell the watchdog
        # which rank waits for its input (tfdist.train.input_count).
        if exact and self.trains and not self._watchdog_off:
            from tfdist.train.input_count import InputCounter
            from tfdist.train.watchdog import timeout_setting

            if timeout_setting() != 0.0 and InputCounter.possible():
                self._input_counter = self._input_counter or InputCounter()
                dataset_fn = self._input_counter.counted(dataset_fn)
        return self.engine.distribute_dataset(dataset_fn)

    def optimizer(self, optimizer):
        """`optimizer` wrapped where the engine needs it (Horovod: DistributedOptimizer), else
        itself."""
        return self.engine.wrap_optimizer(optimizer)

    def resume(self,
               model_dir: Optional[str] = None,
               batch_size: Optional[int] = None,
               **identity: Any):
        """Where training in model_dir (default: rt.model_dir) continues: a
        tfdist.train.checkpoint.Resume with `epoch`, `step`, `steps_done` (zeros for a new run, or
        without a model directory). A checkpoint of another strategy, global
        batch (checked when the per-replica `batch_size` is given) or `identity` (e.g.
        model="cnn") is refused (ResumeRefused), as rt.callbacks would; another world size with
        the same global batch is allowed, and the log says so."""
        from tfdist.train.callbacks import resume_identity
        from tfdist.train.checkpoint import resume_point

        model_dir = self._given_run_directory(model_dir, "rt.resume")
        return resume_point(model_dir, resume_identity(self.engine, batch_size, identity))

    def callbacks(self, model_dir: Optional[str] = None, **options: Any) -> list:
        """The callbacks for model.fit: the engine's (Horovod: broadcast and metric averaging) and
        the throughput meter; with `model_dir` (default: rt.model_dir, from tfdist.init's
        model_dir or $MODEL_DIR) also checkpoints, resume, preemption (exit 75,
        requeue), TensorBoard and metrics.json; and the progress watchdog (a stalled job ends
        naming the stuck rank). Options: tfdist.train.callbacks.CallbackOptions (batch_size,
        checkpoint_steps, requeue, meter, tensorboard, preemption, progress, identity, facts,
        watchdog_timeout, profile_steps, profile_ranks); another name is a ConfigError naming
        it."""
        from tfdist.train.callbacks import CallbackOptions, training_callbacks
        from tfdist.train.watchdog import timeout_setting

        model_dir = self._given_run_directory(model_dir, "rt.callbacks")
        # rt.dataset may come later: the callbacks ask for its counts and element spec when due.
        given = CallbackOptions.of(
            **{
                "input_batches": self._input_batches,
                "element_spec": lambda: self._element_spec,
                "input_skips": lambda: self._input_skips,
                **options
            })
        self._watchdog_off = timeout_setting(given.watchdog_timeout) == 0.0
        return training_callbacks(self.engine, model_dir, given)

    def _given_run_directory(self, model_dir, call: str) -> Optional[str]:
        """`model_dir` as given to `call`, else rt.model_dir; one that is not the job's $MODEL_DIR
        is refused, as tfdist.init refuses it."""
        if model_dir is None:
            return self.model_dir
        return run_directory(model_dir, os.environ, call)[0]

    def _input_batches(self) -> Optional[int]:
        return self._input_counter.read() if self._input_counter is not None else None

    def barrier(self) -> None:
        """Wait until every training task gets here."""
        self.engine.barrier()

    def shutdown(self) -> None:
        """Release the engine's resources (Horovod: shut Horovod down); safe to call twice."""
        self.engine.shutdown()


def init(strategy: str = "auto",
         num_ps: Optional[int] = None,
         evaluator: Optional[bool] = None,
         port: Optional[int] = None,
         lr_scaling: str = "linear",
         serve_and_exit: bool = True,
         task_gpus: str = "auto",
         gpu_memory_growth: bool = True,
         model_dir: Optional[str] = None,
         weak_scaling: bool = False,
         **engine_options: Any) -> Runtime:
    """Detect the cluster, build this task's roles for `strategy` and make its engine.

    `strategy` auto takes the launcher's (`jobs/<strategy>.sbatch`, `tfdist launch --strategy`:
    $TFDIST_STRATEGY), else multi_worker for several tasks, else one task's default; a strategy,
    `num_ps` or `evaluator` other than the launcher's is a ConfigError naming both. `num_ps`
    (default 1) and `evaluator` (default False) are parameter_server's.

    `model_dir` (default: $MODEL_DIR, which the `jobs/` scripts export) is the run directory,
    `rt.model_dir`: the default of `rt.callbacks()` and `rt.resume()`. One that is not
    $MODEL_DIR's directory is a ConfigError naming both.

    Parameter-server and worker tasks of `parameter_server` serve until the chief finishes and then
    exit the process (status 0) when `serve_and_exit`, so one script serves every role unchanged.
    The evaluator (`evaluator=True`: the last task) returns: check `rt.is_evaluator`.

    Before the engine exists, TensorFlow is made to see only this task's GPUs (`task_gpus`: auto
    is what the strategy needs, e.g. one per task by local rank under horovod; or one, share, all,
    none), with memory growth unless `gpu_memory_growth=False`.
    `weak_scaling`: the script's fit `batch_size` is each replica's (the global batch N times
    it) and the rate it compiles with is scaled by `lr_scaling`'s rule (tfdist.train.weak_scaling);
    by default `batch_size` is the global batch and the rate is the script's.

    `engine_options` are those of the strategy's engine: mirrored `cpu_devices`; multi_worker
    `collective`, `bytes_per_pack`, `collective_timeout`; horovod `compression`,
    `backward_passes_per_step` (the flags of the same names say what each does); parameter_server
    `chief_timeout` (seconds its ps and workers wait for the chief to come up); auto any of them,
    each used by the engine auto becomes. Another name is a ConfigError naming it.

    In a training task the engine's strategy becomes the program's default (of the calling
    thread; tfdist.distribute.default_strategy): the model, optimizer and metrics built after
    init() live under it without `with rt.scope()`. Horovod's and one device's strategy is
    TensorFlow's own default: nothing changes there. A model built before init() is refused by
    its fit where it would train alone (tfdist.keras_compat.strategy_guard); a
    `tf.distribute.MirroredStrategy()` the script makes after init() where the strategy spans
    several processes (multi_worker, parameter_server) is refused at that call, with the line to
    write instead (tfdist.distribute.mirrored_guard). Under horovod the
    script's own compile and fit are made Horovod's (tfdist.distribute.horovod_fit): the
    optimizer wrapped, the first weights broadcast, the data split per rank with `batch_size`
    the global batch.
    """
    import tfdist
    from tfdist.distribute import default_strategy, horovod_fit, mirrored_guard, shared_seed
    from tfdist.train import auto_callbacks, user_callbacks
    from tfdist.train import weak_scaling as weak_scaling_hooks
    from tfdist.distribute.devices import pin_gpus

    tfdist._set_up_process()  # done at `import tfdist`, unless tfdist.cluster came first
    default_strategy.clear()  # an earlier init()'s, before this engine is made
    mirrored_guard.install(None)  # an earlier init()'s too: this engine may be a MirroredStrategy
    model_dir, model_dir_from = run_directory(model_dir, os.environ)
    cluster = detect()
    quiet_other_tasks(cluster.rank)
    roles = build_roles(cluster, strategy, num_ps=num_ps, evaluator=evaluator, port=port)
    slot = cluster.horovodrun.local if cluster.horovodrun and roles.strategy == "horovod" else None
    plan = pin_gpus(cluster, roles, task_gpus, gpu_memory_growth, slot=slot)
    engine = make_engine(cluster, roles, engine_options, asked=strategy)
    # The script's own MirroredStrategy() cannot span the processes: refused with the fix.
    mirrored_guard.install(engine)
    quiet_other_tasks(engine.rank)
    role = f" {roles.task_type}" if roles.task_type else ""
    growth = ", memory growth " + ("on" if gpu_memory_growth else "off") if plan.use else ""
    # e.g. "tfdist: slurm, rank 3 of 4 on node2 (local rank 1 of 2), strategy horovod, GPU 1 of
    # node, memory growth on"
    log.info("%s, rank %d of %d on %s (local rank %d of %d), strategy %s%s, %s%s",
             cluster.environment, engine.rank, engine.world_size, cluster.host, cluster.local_rank,
             cluster.local_world_size, engine.name, role, plan.summary(), growth)
    runtime = Runtime(cluster, roles, engine, lr_scaling=lr_scaling, gpus=plan, model_dir=model_dir)
    if model_dir:
        log.info("model dir %s (%s)", model_dir, model_dir_from)
    _explain_uncaught_failures(engine)
    if roles.trains:
        # Unseeded shuffles the same on every worker, before the script builds its input.
        shared_seed.install(engine)
        _guard_fit(engine)  # before the default changes: it asks what TensorFlow's own is
        _guard_xla(engine)
        user_callbacks.install(engine)  # the script's own callbacks and saves: the chief writes
        default_strategy.make_default(engine.strategy)
        replicas = max(1, engine.num_replicas_in_sync)
        # Before the hooks that read the global batch (auto_callbacks, horovod_fit).
        weak_scaling_hooks.install(weak_scaling, replicas, scale_lr(1.0, replicas, lr_scaling))
        auto_callbacks.install(
            lambda directory, batch: runtime.callbacks(directory, batch_size=batch), model_dir,
            engine.num_replicas_in_sync, engine.strategy)
        horovod_fit.install(engine)  # after auto_callbacks: its hook sees the global batch
    else:
        auto_callbacks.uninstall()
        weak_scaling_hooks.install(False, 1, 1.0)
    if not roles.trains and not roles.is_evaluator and serve_and_exit:
        engine.serve()  # parameter_server's ps and worker tasks (the others train)
        log.info("%s %s done: the chief has finished.", roles.task_type, roles.task_index)
        sys.exit(0)
    return runtime


def _guard_fit(engine: Engine) -> None:
    """Make `fit` refuse a model made outside the engine's strategy where that model would train
    as one copy per worker or on one device of several (tfdist.keras_compat.strategy_guard).
    Horovod's and a single device's strategy is TensorFlow's default: nothing to refuse."""
    import tensorflow as tf

    from tfdist.keras_compat import strategy_guard

    strategy = engine.strategy
    several = engine.num_replicas_in_sync > 1 or engine.world_size > 1
    if strategy is None or strategy is tf.distribute.get_strategy() or not several:
        strategy_guard.expect(None, "")
        return
    strategy_guard.expect(strategy, _in_words(engine), engine.world_size)


def _in_words(engine: Engine) -> str:
    return (f"--strategy={engine.name}, {engine.world_size} "
            f"task{'s' if engine.world_size > 1 else ''}, {engine.num_replicas_in_sync} "
            f"replica{'s' if engine.num_replicas_in_sync > 1 else ''} in sync")


def _guard_xla(engine: Engine) -> None:
    """Make `fit` refuse a step compiled with XLA where the engine cannot run one, and `compile`
    say where Keras 3's "auto" turned XLA off (tfdist.keras_compat.xla_guard)."""
    import tensorflow as tf

    from tfdist.keras_compat import xla_guard

    several = engine.num_replicas_in_sync > 1 or engine.world_size > 1
    xla_guard.expect(_in_words(engine),
                     engine.xla_refusal() if several else None, several,
                     bool(tf.config.get_visible_devices("GPU")))


def run_directory(model_dir: Optional[str],
                  environ,
                  call: str = "tfdist.init") -> tuple[Optional[str], str]:
    """The run directory `call` (tfdist.init, rt.callbacks, rt.resume, tfdist train) is given and
    where it came from: `model_dir`, else $MODEL_DIR; both given, they must be one directory (a
    script's own directory inside a job would take the checkpoints away from the job's run
    directory, its log and its requeue, and every job of the script would resume from the same
    one)."""
    name = env_vars.MODEL_DIR.name
    job = environ.get(name) or None
    if model_dir is None:
        return job, f"from ${name}"
    model_dir = os.fspath(model_dir)
    if job is not None and os.path.realpath(model_dir) != os.path.realpath(job):
        command = call == "tfdist train"  # a flag, not an argument
        given = f"{call} --model_dir={model_dir}" if command else f"{call}(model_dir={model_dir!r})"
        leave = (f"leave --model_dir out (tfdist train takes ${name})" if command else
                 f"leave model_dir out of {call}() (it takes ${name}: rt.model_dir)")
        raise ConfigError(
            f"{given}, but this job's {name} is {job!r} (the `jobs/` scripts export their run "
            f"directory as {name}): two run directories for one run. Fix: {leave}, or give the "
            f"job that directory (`sbatch jobs/<strategy>.sbatch {model_dir} -- ...`, or "
            f"{name}={model_dir}).")
    return model_dir, f"{call}(model_dir=...)"


def _explain_uncaught_failures(engine: Engine) -> None:
    """After the traceback of an uncaught error, say in plain words which peer task was lost."""
    previous = sys.excepthook

    def hook(etype, value, tb):
        previous(etype, value, tb)
        message = engine.explain_failure(value)
        if message:
            print(f"tfdist: {message}", file=sys.stderr, flush=True)
            from tfdist.train.watchdog import current

            if current() is not None:  # rt.callbacks' watchdog: who stopped, requeue
                current().end_now(message)

    sys.excepthook = hook
