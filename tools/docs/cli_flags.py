"""Print one `tfdist` command's flags as JSON: exactly the flags its --help lists.

    python tools/docs/cli_flags.py train

Run once per command, each in a process of its own: the commands define some flags of the same
name (e.g. --format) in absl's one global registry. The command's own `run` is called with
`run_command` replaced by a recorder, so the flag modules are the ones the command passes to it.
"""

from __future__ import annotations

import importlib
import json
import sys

from absl import flags

from tfdist.cli import command, main


def _describe(flag: flags.Flag, module: str) -> dict:
    parser = flag.parser
    values = getattr(parser, "enum_values", None)
    item_parser = getattr(parser, "item_parser", None)  # multi_enum
    values = values or getattr(item_parser, "enum_values", None)
    default = flag.default
    if isinstance(default, (list, tuple)):
        default = ",".join(str(x) for x in default)
    return {
        "name": flag.name,
        "short_name": flag.short_name,
        "type": flag.flag_type(),
        "boolean": bool(flag.boolean),
        "multi": isinstance(flag, flags.MultiFlag),
        "default": None if default is None else str(default),
        "values": list(values) if values else None,
        "lower_bound": getattr(parser, "lower_bound", None),
        "upper_bound": getattr(parser, "upper_bound", None),
        "help": flag.help,
        "module": module,
    }


def describe(name: str) -> dict:
    recorded = []
    command.run_command = lambda fn, argv, *modules: recorded.extend(modules)
    module = importlib.import_module(main.COMMANDS[name][0])
    module.run([f"tfdist {name}"])
    seen, described = set(), []
    for flag_module in recorded:
        for flag in flags.FLAGS.get_key_flags_for_module(flag_module.__name__):
            if flag.name not in seen:
                seen.add(flag.name)
                described.append(_describe(flag, flag_module.__name__))
    return {
        "command": name,
        "summary": main.COMMANDS[name][1],
        "doc": recorded[0].__doc__ or "",
        "flags": described,
    }


if __name__ == "__main__":
    json.dump(describe(sys.argv[1]), sys.stdout, indent=1, default=str)
