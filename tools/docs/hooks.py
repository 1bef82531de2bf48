"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages generated from the code at build time.

- `reference/cli.md`: every `tfdist` command and flag, from the absl definitions
  (tools/docs/cli_flags.py, one process per command);
- `reference/environment.md`: every `TFDIST_*` variable, from tfdist/env_vars.py;
- the benchmark plots of bench/results/, so the Benchmarks page shows the files `make bench` wrote.

Nothing is fetched from anywhere: the build reads this checkout only.
"""

from __future__ import annotations

import concurrent.futures
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
PLOTS = REPO / "bench" / "results"


def _cell(text: str) -> str:
    """Text for one cell of a Markdown table: no pipes, no raw HTML, one line."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _command(name: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "docs" / "cli_flags.py"), name],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"tools/docs/cli_flags.py {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _kind(flag: dict) -> str:
    if flag["values"]:
        kind = "one of " + ", ".join(f"`{v}`" for v in flag["values"])
    elif flag["boolean"]:
        kind = "boolean"
    else:
        kind = flag["type"]
    lo, hi = flag["lower_bound"], flag["upper_bound"]
    if lo is not None and hi is not None:
        kind += f" in {lo}..{hi}"
    elif lo is not None:
        kind += f" ≥ {lo}"
    elif hi is not None:
        kind += f" ≤ {hi}"
    if flag["multi"]:
        kind += "; repeat the flag for several"
    return kind


def _flag_item(flag: dict) -> str:
    name = f"**`--{flag['name']}`**" + (f" (`-{flag['short_name']}`)" if flag["short_name"] else "")
    default = "" if flag["default"] in (None, "") else f", default `{_text(flag['default'])}`"
    # absl starts the help of an enum with its values ("<a|b>: ..."), said already.
    help_text = re.sub(r"^<[^>]*>:\s*", "", " ".join(flag["help"].split()))
    # ... and a multi flag's with this, said already too.
    help_text = help_text.replace(";  repeat this option to specify a list of values", "")
    help_text = help_text.replace("; repeat this option to specify a list of values", "")
    return f"- {name} — {_kind(flag)}{default}.  \n  {_text(help_text)}"


def _text(text: str) -> str:
    """Plain text for Markdown: no raw HTML."""
    return html.escape(str(text), quote=False)


def cli_page(commands: list[dict]) -> str:
    lines = [
        "# Command-line reference", "",
        "Generated from the absl flag definitions in `tfdist/cli/` at every docs build: these are "
        "the flags `tfdist COMMAND --help` lists. Every command also takes absl's own flags "
        "(`--verbosity=1` shows everything, TensorFlow's logging included; `--helpfull` lists "
        "them all). A flag is given as `--name=value`; a boolean as `--name` or `--noname`.", "",
        "| command | what it does |", "|---|---|"
    ]
    lines += [
        f"| [`tfdist {c['command']}`](#tfdist-{c['command']}) | {_cell(c['summary'])} |"
        for c in commands
    ]
    for c in commands:
        summary = _text(c["summary"])
        lines += ["", f"## tfdist {c['command']}", "", summary[:1].upper() + summary[1:] + ".", ""]
        lines += ["```text", c["doc"].strip(), "```", ""]
        lines += [_flag_item(f) for f in c["flags"]]
    return "\n".join(lines) + "\n"


def environment_page() -> str:
    from tfdist import env_vars as env

    groups = [
        (env.USER, "Settings", "Set them in the environment of a job or a shell."),
        (env.TFDIST, "Set by tfdist for its own processes",
         "tfdist exports these for the processes it starts or configures; read them if useful, "
         "don't set them."),
        (env.TOOLS, "The project's tools and tests", "Not settings of tfdist: they steer the "
         "Horovod build, the version-range check, the test Slurm cluster and the tests."),
    ]
    lines = [
        "# Environment variables", "",
        "Every `TFDIST_*` variable, generated from `tfdist/env_vars.py`, the one place that names "
        "them (the code reads the names from there). Variables of other programs that tfdist "
        "sets (`TF_CONFIG`, `HOROVOD_*`, `TF_USE_LEGACY_KERAS`, `CUDA_VISIBLE_DEVICES`) are "
        "explained where they matter: [Slurm and GPUs](../slurm.md), [Horovod](../horovod.md)."
    ]
    for set_by, title, intro in groups:
        lines += [
            "", f"## {title}", "", intro, "", "| variable | default | what it does |",
            "|---|---|---|"
        ]
        for var in env.VARIABLES:
            if var.set_by == set_by:
                lines.append(f"| `{var.name}` | {var.default} | {var.meaning} |")
    return "\n".join(lines) + "\n"


def on_files(files: Files, config) -> Files:
    from tfdist.cli.main import COMMANDS

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        commands = list(pool.map(_command, COMMANDS))
    files.append(File.generated(config, "reference/cli.md", content=cli_page(commands)))
    files.append(File.generated(config, "reference/environment.md", content=environment_page()))
    for plot in sorted(PLOTS.rglob("*.png")):
        files.append(
            File(str(plot.relative_to(REPO)),
                 src_dir=str(REPO),
                 dest_dir=config["site_dir"],
                 use_directory_urls=config["use_directory_urls"]))
    return files
