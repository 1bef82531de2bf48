"""A sweep: many trainings that differ in a few settings, run as one Slurm job array.

Each element is a full tfdist job (a jobs/*.sbatch script: any strategy, one or several nodes)
whose settings are flags added to `tfdist train` or to the user's own command, and whose
MODEL_DIR is derived from those settings: DIR/runs/<setting=value,...>. The index -> settings
mapping (DIR/sweep.json) is written before anything is submitted; jobs/common.sh reads the
element's MODEL_DIR and flags back from it (`tfdist sweep element DIR INDEX`). Submitting the same
sweep again resumes it: the elements that finished are not run again, the others resume from their
checkpoints. An element preempted or at its time limit requeues itself, never the array
(tfdist.cluster.requeue).

No TensorFlow here: `tfdist sweep` answers at once on a login node.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

from tfdist import env_vars
from tfdist.errors import ConfigError
from tfdist.files import write_json

SWEEP_FILE = "sweep.json"
SWEEP_DIR, SWEEP_OFFSET = env_vars.SWEEP_DIR.name, env_vars.SWEEP_OFFSET.name
JOBS_DIR = env_vars.JOBS_DIR.name
DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


@dataclasses.dataclass(frozen=True)
class Element:
    index: int
    settings: tuple[tuple[str, str], ...]  # (flag, value) in the sweep's order

    @property
    def name(self) -> str:
        """Readable and stable: "lr=0.1,batch_size=32"; the element's run directory's name."""
        return ",".join(f"{k}={_path_safe(v)}" for k, v in self.settings) or "default"

    @property
    def args(self) -> list[str]:
        return [f"--{k}={v}" for k, v in self.settings]


def _path_safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", value)


# --- settings --------------------------------------------------------------------------------


def parse_grid(text: str) -> list[dict[str, str]]:
    """--grid="lr=0.01,0.1;batch_size=32,64": every combination, the last setting varying
    fastest."""
    axes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, values = part.partition("=")
        name = name.strip().lstrip("-")
        listed = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not listed:
            raise ConfigError(f"--grid: {part!r} is not NAME=VALUE[,VALUE...]; e.g. "
                              "--grid='lr=0.01,0.1;batch_size=32,64'.")
        axes.append((name, listed))
    if not axes:
        raise ConfigError("--grid is empty; e.g. --grid='lr=0.01,0.1;batch_size=32,64'.")
    names = [n for n, _ in axes]
    if len(set(names)) != len(names):
        raise ConfigError(f"--grid names a setting twice: {', '.join(names)}.")
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]


def parse_settings_file(path: str) -> list[dict[str, str]]:
    """One element per line: flags, e.g. `--lr=0.1 --batch_size=32` (blank lines and # comments
    skipped)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"--settings_file={path}: {e.strerror}.") from None
    elements = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        settings = {}
        for token in shlex.split(line):
            name, sep, value = token.lstrip("-").partition("=")
            if not token.startswith("--") or not sep or not name:
                raise ConfigError(f"{path}:{number}: {token!r} is not --NAME=VALUE.")
            settings[name] = value
        elements.append(settings)
    if not elements:
        raise ConfigError(f"--settings_file={path} lists no settings (one line of flags each).")
    return elements


def elements_of(settings: Sequence[dict[str, str]]) -> list[Element]:
    elements = [Element(i, tuple(s.items())) for i, s in enumerate(settings)]
    names = [e.name for e in elements]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"The sweep lists the same settings more than once: {', '.join(twice)}.")
    return elements


# --- the sweep's directory -------------------------------------------------------------------


def new_sweep(settings: Sequence[dict[str, str]], job: str, train_args: list[str],
              command: list[str], sbatch_args: list[str]) -> dict[str, Any]:
    return {
        "job":
        job,
        "train_args":
        train_args,
        "command":
        command,
        "sbatch_args":
        sbatch_args,
        "elements": [{
            "index": e.index,
            "settings": dict(e.settings),
            "name": e.name
        } for e in elements_of(settings)],
        "submissions": [],
    }


def load(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, SWEEP_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{directory} is not a sweep's directory (no {SWEEP_FILE}); start one "
                          f"with `tfdist sweep {directory} --grid=...`.") from None


def save(directory: str, sweep: dict[str, Any]) -> None:
    write_json(os.path.join(directory, SWEEP_FILE), sweep)


def same_plan(old: dict[str, Any], new: dict[str, Any]) -> Optional[str]:
    """None when `new` is the sweep `old` already is; else what differs."""
    for key in ("job", "train_args", "command", "elements"):
        if old[key] != new[key]:
            return key
    return None


def element(sweep: dict[str, Any], directory: str, index: int) -> tuple[str, list[str]]:
    """The element's MODEL_DIR and its flags (what jobs/common.sh runs it with)."""
    listed = sweep["elements"]
    if not 0 <= index < len(listed):
        raise ConfigError(f"Element {index} is not in the sweep {directory}, which has "
                          f"{len(listed)} (0..{len(listed) - 1}).")
    e = listed[index]
    return run_dir(directory, e), Element(index, tuple(e["settings"].items())).args


def run_dir(directory: str, e: dict[str, Any]) -> str:
    return os.path.join(os.path.abspath(directory), "runs", e["name"])


def log_path(directory: str, array_job: str, task: int) -> str:
    return os.path.join(os.path.abspath(directory), "logs", f"{array_job}_{task}.out")


# --- Slurm -----------------------------------------------------------------------------------

Runner = Callable[[list[str]], subprocess.CompletedProcess]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise ConfigError(f"`{cmd[0]}` is not on PATH: tfdist sweep submits to Slurm; run it "
                          "on a machine of the cluster (a login node).") from None


def max_array_size(run: Runner = _run) -> int:
    """Slurm's MaxArraySize (array indices run 0..MaxArraySize-1)."""
    out = run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(found.group(1)) if found else DEFAULT_MAX_ARRAY_SIZE


def array_chunks(indices: Iterable[int], max_size: int) -> list[tuple[int, list[int]]]:
    """Element indices split into arrays whose task ids stay below `max_size`: (offset, task ids),
    element index = offset + task id."""
    chunks: dict[int, list[int]] = {}
    for index in sorted(set(indices)):
        offset = index // max_size * max_size
        chunks.setdefault(offset, []).append(index - offset)
    return sorted(chunks.items())


def array_spec(task_ids: Sequence[int], max_running: Optional[int] = None) -> str:
    """sbatch --array's value: ranges ("0-3,7"), throttled with %N."""
    ranges, ids = [], sorted(task_ids)
    start = prev = ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(ranges) + (f"%{max_running}" if max_running else "")


def submit(directory: str,
           sweep: dict[str, Any],
           indices: Sequence[int],
           jobs_dir: str,
           max_running: Optional[int] = None,
           run: Runner = _run) -> list[dict[str, Any]]:
    """sbatch the elements `indices` as job arrays (several when there are more than the
    cluster's MaxArraySize); records and returns the submissions."""
    script = os.path.join(jobs_dir, f"{sweep['job']}.sbatch")
    if not os.path.isfile(script):
        raise ConfigError(f"No batch script {script} for --job={sweep['job']}: set "
                          "TFDIST_JOBS_DIR to the jobs/ folder of a tfdist checkout.")
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    directory = os.path.abspath(directory)
    tail = list(sweep["train_args"]) + (["--", *sweep["command"]] if sweep["command"] else [])
    made = []
    for offset, tasks in array_chunks(indices, max_array_size(run)):
        cmd = [
            "sbatch",
            "--parsable",
            f"--array={array_spec(tasks, max_running)}",
            f"--job-name={os.path.basename(directory)}",
            f"--output={os.path.join(directory, 'logs', '%A_%a.out')}",
            # The jobs/ folder too: an element's script finds it without asking slurmctld.
            f"--export=ALL,{SWEEP_DIR}={directory},{SWEEP_OFFSET}={offset},"
            f"{JOBS_DIR}={os.path.abspath(jobs_dir)}",
            *sweep["sbatch_args"],
            script,
            *tail
        ]
        done = run(cmd)
        if done.returncode != 0:
            raise ConfigError(f"sbatch refused the array: {done.stderr.strip() or done.stdout}\n"
                              f"  {shlex.join(cmd)}")
        array_job = done.stdout.strip().split(";")[0]
        made.append({
            "array_job": array_job,
            "offset": offset,
            "indices": [offset + t for t in tasks],
            "submitted": time.strftime("%Y-%m-%d %H:%M:%S"),
        })
        sweep["submissions"].append(made[-1])
        save(directory, sweep)  # recorded at once: a later failure keeps what was submitted
    return made


def live_states(sweep: dict[str, Any], run: Runner = _run) -> dict[str, str]:
    """squeue's state of every element job still known to Slurm, by "ARRAY_TASK" id."""
    arrays = sorted({s["array_job"] for s in sweep["submissions"]})
    if not arrays:
        return {}
    done = run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(arrays)])
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


# --- status ----------------------------------------------------------------------------------


def last_submission(sweep: dict[str, Any], index: int) -> Optional[dict[str, Any]]:
    for s in reversed(sweep["submissions"]):
        if index in s["indices"]:
            return s
    return None


def element_status(directory: str, sweep: dict[str, Any], e: dict[str, Any],
                   live: dict[str, str]) -> dict[str, Any]:
    """state (done, pending, running, failed, stopped, cancelled, not submitted), its detail,
    requeues, epochs, final metrics and log of one element."""
    row: dict[str, Any] = {"index": e["index"], "name": e["name"], "settings": e["settings"]}
    metrics_path = os.path.join(run_dir(directory, e), "metrics.json")
    metrics = _read_json(metrics_path) or {}
    row["final"] = metrics.get("final") or {}
    row["epochs"] = metrics.get("epochs")
    sub = last_submission(sweep, e["index"])
    log = None
    if sub is not None:
        task = e["index"] - sub["offset"]
        row["job"] = f"{sub['array_job']}_{task}"
        log = log_path(directory, sub["array_job"], task)
        row["log"] = log
    text = _read(log) if log else ""
    row["requeues"] = max([int(n) for n in re.findall(r"SLURM_RESTART_COUNT=(\d+)", text)] or [0])
    state = live.get(row.get("job", ""))
    if state in ACTIVE:
        row["state"], row["detail"] = state.lower(), ""
    elif row["final"]:
        row["state"], row["detail"] = "done", ""
    elif sub is None:
        row["state"], row["detail"] = "not submitted", ""
    else:
        row["state"], row["detail"] = _ended(text)
    return row


def _ended(log: str) -> tuple[str, str]:
    """How an element that is no longer in Slurm's queue ended, from its log."""
    if not log:
        return "failed", "no log (the job ended before its script ran?)"
    if "CANCELLED" in log and "DUE TO TIME LIMIT" not in log:
        return "cancelled", _last_error(log)
    if re.search(r"tfdist job: preempted \(status 75\)", log):
        return "stopped", "preempted, resumable: resubmit it"
    status = re.findall(r"failed with status (\d+)", log)
    if "DUE TO TIME LIMIT" in log:
        return "failed", "time limit (not requeued): " + _last_error(log)
    return "failed", (f"status {status[-1]}: " if status else "") + _last_error(log)


def _last_error(log: str) -> str:
    """What the failing task said last (its lines are labelled "N: " by srun: an exception's last
    line, a message before an exit), else the last line that reads like an error."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    said = [line for line in lines if re.match(r"^\d+: ", line)]
    if said:
        return said[-1][:200]
    for line in reversed(lines):
        if re.search(r"error|Error|Traceback|CANCELLED|Killed", line):
            return line[:200]
    return lines[-1][:200] if lines else ""


def status(directory: str, run: Runner = _run) -> list[dict[str, Any]]:
    sweep = load(directory)
    live = live_states(sweep, run) if sweep["submissions"] else {}
    return [element_status(directory, sweep, e, live) for e in sweep["elements"]]


def unfinished(rows: list[dict[str, Any]], failed_only: bool = False) -> list[int]:
    """The elements to resubmit: failed, stopped, cancelled (and never submitted, unless
    `failed_only`); never the done, pending or running ones."""
    wanted = {"failed", "stopped", "cancelled"} | (set() if failed_only else {"not submitted"})
    return [r["index"] for r in rows if r["state"] in wanted]


def table(rows: list[dict[str, Any]], sort_by: Optional[str] = None) -> str:
    """One line per element: its settings, state, requeues, epochs and final metrics."""
    if sort_by:
        rows = sorted(rows,
                      key=lambda r:
                      (r["final"].get(sort_by) is None, -(r["final"].get(sort_by) or 0)))
    names = list(dict.fromkeys(k for r in rows for k in r["settings"]))
    metrics = list(dict.fromkeys(k for r in rows for k in r["final"]))
    head = ["#", *names, "state", "requeues", "epochs", *metrics]
    body = []
    for r in rows:
        cells = [str(r["index"]), *(str(r["settings"].get(n, "")) for n in names)]
        cells += [r["state"], str(r["requeues"]), "-" if r["epochs"] is None else str(r["epochs"])]
        cells += [_number(r["final"].get(m)) for m in metrics]
        body.append(cells)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in [head] + body
    ]
    details = [
        f"  #{r['index']} {r['state']}: {r['detail']} ({r.get('log', 'no log')})" for r in rows
        if r["detail"]
    ]
    return "\n".join(lines + details)


def summary(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return f"{len(rows)} element(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _number(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def plot(rows: list[dict[str, Any]], metric: str, path: str) -> Optional[str]:
    """The metric against each swept setting, one panel per setting; None, or why not."""
    points = [r for r in rows if isinstance(r["final"].get(metric), (int, float))]
    if not points:
        return f"no element has a final {metric} yet"
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (`pip install matplotlib`)"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(k for r in rows for k in r["settings"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        values = [r["settings"].get(name) for r in points]
        numeric = all(_is_number(v) for v in values)
        xs = [float(v) if numeric else str(v) for v in values]
        ax.scatter(xs, [r["final"][metric] for r in points])
        if numeric and min(xs) > 0 and max(xs) / min(xs) >= 10:
            ax.set_xscale("log")
        ax.set_xlabel(name)
        ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def _read(path: Optional[str]) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except (OSError, TypeError):
        return ""


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
