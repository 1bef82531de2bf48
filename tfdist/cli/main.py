"""`tfdist COMMAND [--flags]`: dispatch to one sub-command module, each an absl program."""

from __future__ import annotations

import importlib
import sys

# name -> (module, one-line summary). Modules are imported only when their command runs, so
# `tfdist env` never loads TensorFlow.
COMMANDS = {
    "env": ("tfdist.cli.env", "print this task's cluster, roles, TF_CONFIG and Horovod variables"),
    "train": ("tfdist.cli.train", "train a named model on a named pipeline under any strategy"),
    "launch": ("tfdist.cli.launch", "start N processes of a command on this machine"),
    "convert": ("tfdist.cli.convert", "pack images, arrays or a TFDS split into shards"),
    "doctor": ("tfdist.cli.doctor", "pre-flight checks: port, hosts, GPUs, TensorFlow, Horovod"),
    "scale": ("tfdist.cli.scale", "scaling study: one training at several sizes, table + plot"),
    "sweep": ("tfdist.cli.sweep", "many trainings over a grid of settings as a Slurm job array"),
    "plan": ("tfdist.cli.plan", "memory per replica and batch per strategy, from the built model"),
}


def usage() -> str:
    lines = [
        "usage: tfdist COMMAND [--flags]   (tfdist COMMAND --help for its flags)", "", "commands:"
    ]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0 if len(argv) >= 2 else 2)
    name = argv[1]
    if name not in COMMANDS:
        print(f"tfdist: unknown command {name!r}; expected one of {', '.join(COMMANDS)}.\n\n" +
              usage(),
              file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(COMMANDS[name][0])
    module.run([f"tfdist {name}"] + argv[2:])


if __name__ == "__main__":
    run()
