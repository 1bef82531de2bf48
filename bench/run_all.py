"""`make bench`: every benchmark, then the plots, the summary table and the docs' tables.

  .venv/bin/python bench/run_all.py [--skip=NAME,...]
  BENCH_ALL=1 .venv/bin/python bench/run_all.py       # every comparison (25-46 minutes): without
                                                       # it, those longest since measured that
                                                       # fit in 22 minutes, the others kept
  BENCH_QUICK=1 .venv/bin/python bench/run_all.py     # the equal-settings rows only, about 9
                                                       # minutes, a cost told to +-5 %

Runs, in this order: allreduce.py (2), training.py (1, 3, 4), input_pipeline.py (5), xla.py
(XLA on one device, about a minute); each writes
bench/results/<name>.json. input_pipeline.json (written by that script) gets the machine record
added here. Then report.py draws bench/results/<name>.png, prints the summary table and rewrites
the generated tables of docs/benchmarks.md.

Ended by SIGTERM or Ctrl-C, it ends the running benchmark, which ends every process it started
(bench/common.py's end_children_on_signals), and exits with 128 + the signal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BENCH, GRACE, RESULTS, ROOT, end_children_on_signals, machine  # noqa: E402
from common import quiet_env, start  # noqa: E402

STEPS = {
    "allreduce": ["allreduce.py"],
    "training": ["training.py"],
    "input_pipeline": ["input_pipeline.py", "--repeats=5"],
    "xla": ["xla.py"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip",
                        default="",
                        help="comma-separated: allreduce,training,"
                        "input_pipeline,xla")
    args = parser.parse_args()
    # A benchmark ends its own processes within its GRACE; this one waits for that, then more.
    end_children_on_signals(grace=3 * GRACE)
    skip = set(filter(None, args.skip.split(",")))
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    if quick:
        skip |= {"allreduce", "input_pipeline", "xla"}
        STEPS["training"].append("--quick")
    elif os.environ.get("BENCH_ALL", "") not in ("", "0"):
        STEPS["training"].append("--all")
    started = time.time()
    failed = []
    for name, (script, *options) in STEPS.items():
        if name in skip:
            continue
        print(f"== bench/{script} ({time.time() - started:.0f} s since start)", flush=True)
        status = start([sys.executable, os.path.join(BENCH, script)] + options,
                       env=quiet_env()).wait()
        if status != 0:
            failed.append(f"{script} (status {status})")
        if name == "input_pipeline" and status == 0:
            add_machine(os.path.join(RESULTS, "input_pipeline.json"))
    print(f"== report ({time.time() - started:.0f} s since start)", flush=True)
    subprocess.call([sys.executable, os.path.join(BENCH, "report.py")], cwd=ROOT)
    print(
        f"\nmake bench: {time.time() - started:.0f} s; results and plots in "
        f"{os.path.relpath(RESULTS, ROOT)}/",
        flush=True)
    if failed:
        print("make bench: failed: " + ", ".join(failed), file=sys.stderr)
        sys.exit(1)


def add_machine(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    data["machine"] = machine()
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=2)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
