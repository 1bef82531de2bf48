"""tfdist doctor: pre-flight checks of this task, one line each (ok / warn / PROBLEM + what to do).

Run it as the first line of a batch job, with the flags the training will get, or on a login node:
  srun --label tfdist doctor --strategy=multi_worker --model_dir=runs/exp1

Checks: the environment and this task's role, its port, the node names, GPUs seen against GPUs
requested, TensorFlow with tf-keras and Horovod (loaded in a child process, so this command itself
stays fast and never imports TensorFlow), and whether --model_dir is writable.
Exit status 1 when a PROBLEM would make training fail; warnings keep it 0.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags

from tfdist import doctor
from tfdist.cli import flags as tfdist_flags
from tfdist.cli.command import run_command

tfdist_flags.define_cluster_flags()
_MODEL_DIR = flags.DEFINE_string("model_dir", None,
                                 "Run directory the training will write; checked for writing.")
_SKIP = flags.DEFINE_multi_string(
    "skip", [], f"Checks to leave out, comma-separated or repeated: {', '.join(doctor.CHECKS)}.")


def _skipped(values: list[str]) -> tuple[str, ...]:
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


flags.register_validator("skip",
                         lambda values: set(_skipped(values)) <= set(doctor.CHECKS),
                         message=f"--skip takes names of checks: {', '.join(doctor.CHECKS)}.")
_FORMAT = flags.DEFINE_enum("format", "text", ["text", "json"],
                            "text: one line per check and a summary; json: one JSON object.")
_TF_TIMEOUT = flags.DEFINE_float("tf_timeout",
                                 180.0,
                                 "Seconds allowed for importing TensorFlow and Horovod.",
                                 lower_bound=1.0)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"tfdist doctor takes no arguments; received {argv[1:]}.")
    text = _FORMAT.value == "text"
    results = doctor.run_checks(strategy=flags.FLAGS.strategy,
                                port=flags.FLAGS.port,
                                **tfdist_flags.given_parameter_server_flags(),
                                model_dir=_MODEL_DIR.value,
                                skip=_skipped(_SKIP.value),
                                tf_timeout=_TF_TIMEOUT.value,
                                task_gpus=flags.FLAGS.task_gpus,
                                report=lambda r: print(r.line(), flush=True) if text else None)
    failed = any(r.status == doctor.PROBLEM for r in results)
    if text:
        print(doctor.summary(results), flush=True)
    else:
        print(
            json.dumps(
                {
                    "checks": [vars(r) for r in results],
                    "problems": [r.check for r in results if r.status == doctor.PROBLEM],
                    "summary": doctor.summary(results),
                },
                indent=2))
    sys.exit(1 if failed else 0)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], tfdist_flags)
