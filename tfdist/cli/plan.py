"""tfdist plan: memory per replica and batch per strategy, from the built Keras model (no training).

Builds --model for --pipeline's input (or --input_shape/--num_classes) under --mixed_precision,
builds the real --optimizer for it, and prints: parameters (model.count_params()), bytes of
weights, gradients and optimizer slots (counted from the optimizer's variables), an activation
estimate per replica at --batch_size, the bytes on one replica's device for each strategy, whether
that fits --gpu_memory and the largest per-replica batch that does, and the global batch and
scaled learning rate for N replicas under the linear and square-root rules and under
--lr_scaling, the rule tfdist train uses.

It reads these of tfdist train's flags as train does, and refuses the values train refuses
(the same error; whether the job has tasks enough for --num_ps only train can tell):
  --keras          the Keras train builds with (stated; the counts are of tf-keras's build of
                   the same layers: the same parameters)
  --pipeline_option  the recipe's options, checked, and its input shape and classes with them
  --lr_scaling     the learning-rate column train trains with
  --warmup_epochs, --lr_schedule, --lr_decay_epochs, --lr_decay_rate
                   how train's rate gets to that column and what it does after (said below it)
  --num_ps, --evaluator  parameter_server's tasks besides the workers, and bytes per ps task
  --strategy       the default --optimizer and --lr; parameter_server: replicas per worker
It accepts train's other flags (--epochs, --model_dir, ...) and ignores them: they change
nothing it shows.

  tfdist plan --model=resnet50 --input_shape=224,224,3 --num_classes=1000 --optimizer=adam \\
      --batch_size=64 --gpu_memory=80GB
  tfdist plan --model=cnn --measure     # also run two steps here and read TensorFlow's peak

The activation estimate is every layer's output for one sample, times the batch; TensorFlow's
measured peak on CPU was within the factor in docs/planning.md (--measure checks it here).
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from tfdist.app.config import default_keras, given_or_default
from tfdist.app.plan import PlanOptions, make_plan
from tfdist.cli import flags as tfdist_flags
from tfdist.cli import train as train_cli
from tfdist.cli.command import run_command

FLAGS = flags.FLAGS

_GPU_MEMORY = flags.DEFINE_string(
    "gpu_memory", None, "Memory of one replica's device, e.g. 80GB (10^9 bytes), 40GiB (2^30), "
    "16000MB; with it: fits? and the largest per-replica batch that fits.")
_REPLICAS = flags.DEFINE_list("replicas", ["1", "2", "4", "8", "16", "32", "64"],
                              "Replica counts for the global batch and learning-rate table.")
_INPUT_SHAPE = flags.DEFINE_list(
    "input_shape", None, "Input shape of one sample, e.g. 224,224,3 (default: --pipeline's).")
_NUM_CLASSES = flags.DEFINE_integer("num_classes",
                                    None,
                                    "Classes (default: --pipeline's).",
                                    lower_bound=2)
_MEASURE = flags.DEFINE_bool(
    "measure", False, "Also train two steps of --batch_size on this machine's first GPU, else "
    "its CPU, and compare TensorFlow's measured peak memory with the estimate.")
_FORMAT = flags.DEFINE_enum("format", "text", ["text", "json"], "text: tables; json: one object.")

KERAS_NAMES = {2: "2 (tf-keras)", 3: "3 (Keras 3)"}

# TensorFlow's default CPU allocator (oneDNN's) leaves allocations under 256 KiB out of its
# statistics; its BFC allocator counts every one. Read when TensorFlow starts.
BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def options_from_flags() -> PlanOptions:
    """The flags as PlanOptions; optimizer and lr as the strategy's defaults when not given, the
    Keras as train resolves it, --pipeline_option parsed as train parses it."""
    from pipelines import parse_option_pairs

    return PlanOptions(model=FLAGS.model,
                       optimizer=given_or_default("optimizer", FLAGS.optimizer, FLAGS.strategy),
                       lr=given_or_default("lr", FLAGS.lr, FLAGS.strategy),
                       mixed_precision=FLAGS.mixed_precision,
                       batch_size=FLAGS.batch_size,
                       input_shape=tuple(
                           int(d) for d in _INPUT_SHAPE.value) if _INPUT_SHAPE.value else None,
                       num_classes=_NUM_CLASSES.value,
                       pipeline=FLAGS.pipeline,
                       data_dir=FLAGS.data_dir,
                       gpu_memory=_GPU_MEMORY.value,
                       replicas=tuple(int(r) for r in _REPLICAS.value),
                       keras=int(FLAGS.keras) if FLAGS.keras else default_keras(),
                       lr_scaling=FLAGS.lr_scaling,
                       warmup_epochs=FLAGS.warmup_epochs,
                       lr_schedule=FLAGS.lr_schedule,
                       lr_decay_epochs=FLAGS.lr_decay_epochs,
                       lr_decay_rate=FLAGS.lr_decay_rate,
                       pipeline_options=parse_option_pairs(FLAGS.pipeline_option),
                       strategy=FLAGS.strategy,
                       num_ps=FLAGS.num_ps,
                       evaluator=FLAGS.evaluator,
                       measure=_MEASURE.value)


def text(plan: dict) -> str:
    from tfdist.app.memory import CPU_PEAK_FACTOR, REPLICATED, VARIABLES_ELSEWHERE, human

    m = plan["memory"]
    per_param = lambda n: f"{n / max(1, m['params']):.1f} B/param"  # noqa: E731
    options = "".join(f" --pipeline_option={k}={v}" for k, v in plan["pipeline_options"].items())
    lines = [
        f"tfdist plan: {plan['model']} (input {'x'.join(map(str, plan['input_shape']))}, "
        f"{plan['num_classes']} classes), {plan['optimizer']}, {plan['mixed_precision']}, "
        f"batch {plan['batch_size']} per replica",
        f"  pipeline         {plan['pipeline']}{options}" +
        ("" if plan["input_from_pipeline"] else
         " (its input not read: --input_shape and --num_classes given)"),
        f"  keras            {KERAS_NAMES[plan['keras']]}, what tfdist train builds with "
        "(--keras); counted from tf-keras's build of the same layers: the same parameters",
        f"  parameters       {m['params']:,} ({m['trainable_params']:,} trainable)" +
        ("" if m["params"] == plan["count_params"] else
         f" -- model.count_params() says {plan['count_params']:,}"),
        f"  weights          {human(m['weight_bytes']):>10}   {per_param(m['weight_bytes'])}",
        f"  gradients        {human(m['gradient_bytes']):>10}   {per_param(m['gradient_bytes'])}",
        f"  optimizer slots  {human(m['slot_bytes']):>10}   {per_param(m['slot_bytes'])} "
        f"({m['slot_variables']} variables of the built {plan['optimizer']})",
    ]
    if m["compute_copy_bytes"]:
        lines.append(f"  low-precision copy of the weights {human(m['compute_copy_bytes'])}")
    low, high = CPU_PEAK_FACTOR
    lines += [
        f"  activations      {human(plan['activation_bytes']):>10}   "
        f"{human(m['activation_bytes_per_sample'])} per sample (layer outputs + 2x the largest)",
        f"  (an estimate: TensorFlow's measured peak on CPU was within {low:g}-{high:g}x of the "
        "total for the bundled models, but a small convolutional model's was up to 9x on a CPU "
        "whose convolutions take a larger workspace; leave room, or check with --measure)"
    ]
    memory_given = plan["device_memory_bytes"] is not None
    fits = f"fits {plan['gpu_memory']}?"
    head = f"  {'strategies':<44} {'per replica':>11}"
    if memory_given:
        head += f"  {fits:>{len(fits)}}  {'largest batch':>13}"
    lines += ["", f"one replica's device (batch {plan['batch_size']}):", head]
    for group in (REPLICATED, VARIABLES_ELSEWHERE):
        s = plan["strategies"][group[0]]
        row = f"  {', '.join(group):<44} {human(s['replica_bytes']):>11}"
        if memory_given:
            row += f"  {'yes' if s['fits'] else 'NO':>{len(fits)}}  {s['largest_batch']:>13,}"
        lines.append(row)
    ps = plan["parameter_server"]
    lines += [
        f"  {', '.join(REPLICATED)}: weights, gradients, slots and activations on every replica.",
        f"  {', '.join(VARIABLES_ELSEWHERE)}: weights + slots ({human(plan['ps_bytes'])}) stay on "
        "the ps tasks or the CPU; each replica reads the weights for its step.",
        f"  parameter_server with --num_ps={ps['num_ps']}: 1 chief + {ps['num_ps']} ps" +
        (" + 1 evaluator" if ps["evaluator"] else "") +
        f" + the workers (W workers: W + {ps['tasks_besides_workers']} tasks); " +
        (f"the ps task holds {human(ps['ps_task_bytes_average'])} of weights + slots."
         if ps["num_ps"] == 1 else f"per ps task about {human(ps['ps_task_bytes_average'])} of "
         f"weights + slots; the fullest holds at least {human(ps['ps_task_bytes_at_least'])} "
         "(whole variables, placed round-robin: the largest with its slots on one).")
    ]
    train_column = f"train: {plan['lr_scaling']}"
    lines += [
        "", f"global batch and learning rate for N replicas in sync (--lr={plan['lr']:g} for one "
        f"replica's batch of {plan['batch_size']}; tfdist train scales it by "
        f"--lr_scaling={plan['lr_scaling']}):", f"  {'N':>5}  {'global batch':>12}  "
        f"{'linear (lr*N)':>14}  {'sqrt (lr*sqrt N)':>16}  {train_column:>16}"
    ]
    for r in plan["replicas"]:
        lines.append(f"  {r['replicas']:>5}  {r['global_batch_size']:>12,}  {r['lr_linear']:>14.4g}"
                     f"  {r['lr_sqrt']:>16.4g}  {r['lr']:>16.4g}")
    course = course_text(plan)
    if course:
        lines.append(course)
    if plan["strategy"] == "parameter_server":
        lines.append("  parameter_server: the replicas in sync are one worker's GPUs (1 without); "
                     "the workers step asynchronously, so train scales --lr and the batch by "
                     "those, not by the number of workers.")
    if "measured" in plan:
        x = plan["measured"]
        lines += [
            "", f"measured on {x['device']}: peak {human(x['peak_bytes'])} during a training "
            f"step, estimate {human(x['estimate_bytes'])} (measured / estimate = "
            f"{x['factor']:.2f}); in use after it: {human(x['current_bytes'])}"
        ]
    return "\n".join(lines)


def course_text(plan: dict) -> str:
    """What train does with the rate in time (--warmup_epochs, --lr_schedule), or "" when it keeps
    the table's rate from the first step to the last."""
    course = plan["lr_course"]
    warmup, schedule = course["warmup_epochs"], course["schedule"]
    if warmup <= 0 and schedule == "constant":
        return ""
    if schedule == "step":  # lr_course gives the step schedule its interval and factor
        then = (f"multiplies it by {course['decay_rate']:g} every {course['decay_epochs']:g} "
                "epochs (--lr_decay_rate, --lr_decay_epochs)")
    else:
        then = {
            "constant": "keeps it",
            "cosine": "decays it along a cosine to 0 at the last epoch (--epochs)"
        }[schedule]
    column = f"`train: {plan['lr_scaling']}` column's rate"
    start = (f"ramps the rate linearly from --lr={plan['lr']:g} to the {column} over the first "
             f"{warmup:g} epochs (--warmup_epochs), then "
             if warmup > 0 else f"starts at the {column} and ")
    return f"  tfdist train {start}{then} (--lr_schedule={schedule})."


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        print(f"tfdist plan: unexpected arguments {argv[1:]}; flags are --name=value.",
              file=sys.stderr)
        sys.exit(2)
    if _MEASURE.value:
        os.environ.setdefault(BFC_ENV, "true")
    import tfdist  # noqa: F401  (quiets TensorFlow's start-up logs before it loads)

    plan = make_plan(options_from_flags())
    print(json.dumps(plan, indent=2) if _FORMAT.value == "json" else text(plan), flush=True)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], train_cli, tfdist_flags)
