"""Runs one stack's test suite (`make test`, `make test-newest`) in the time a 2-core machine
allows, in three parts:

1. the Slurm batch-job tests (marked `slurm`): mostly waiting for the scheduler, a signal, a
   requeue, a job's end; in a pytest process of their own, beside
2. every other test, except
3. the tests marked `alone`, whose checks compare the pace of parts of one run (input-wait
   shares, the watchdog's and the launcher's deadlines, benchmark ratios): after 1 and 2, with
   nothing beside them.

Parts 1 and 2 share the machine's cores: the Slurm tests leave them idle half the time (their
share of the suite's time was 17 of 55 minutes at 45 % CPU, measured 2026-11-25). Part 2 runs in
one pytest-xdist worker per core, a test file to a worker (`--dist loadfile`, so a module's shared
fixtures are made once): its tests start processes that wait on each other (rendezvous, collective
set-up, a peer's checkpoint); the whole suite, one test at a time, kept the cores 64 % busy.
Every test still runs once; each part writes its JUnit XML (build/test-reports/NAME-PART.xml) and
part 1's output is shown when it ends. TESTS_WORKERS=N sets part 2's workers (1: no xdist).

    python tools/run_tests.py NAME [MARKER-EXPRESSION] [-- PYTEST-ARGS...]

MARKER-EXPRESSION narrows the whole selection (e.g. "not slurm and not default_stack"). The
exit status is the first failing part's. A part the selection rules out (the Slurm part under
"not slurm") is not run; a part it leaves in that collects no test (pytest's "no tests
collected") fails: a suite that ran none of a part has not tested it. What the parts skipped is
summed up at the end with each reason (tests/cannot_run.py: under CI=true a test that cannot run
on this machine fails instead).
"""

from __future__ import annotations

import configparser
import itertools
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "build" / "test-reports"
BASETEMP = Path("/tmp/tfdist-tests")  # a tmp_path root per part: the parts run side by side
NO_TESTS = 5  # pytest's exit status when the selection is empty


def pytest_command(name: str, part: str, selection: str, extra: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-m", selection, "--durations=10",
        f"--junitxml={REPORTS / f'{name}-{part}.xml'}", "-p", "no:cacheprovider",
        f"--basetemp={BASETEMP / f'{name}-{part}'}", *extra
    ]


def workers() -> list[str]:
    """Part 2's pytest-xdist arguments: one worker per core unless TESTS_WORKERS says otherwise."""
    n = int(os.environ.get("TESTS_WORKERS") or os.cpu_count() or 1)
    return ["-n", str(n), "--dist", "loadfile"] if n > 1 else []


def cpu_jiffies() -> tuple[int, int]:
    """(busy, all) clock ticks of every core since boot (/proc/stat; (0, 0) where there is none)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0, 0
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def busy_since(start: tuple[int, int]) -> str:
    """How busy the cores were since `start`: whether a part was short of CPU or waiting."""
    busy, total = (a - b for a, b in zip(cpu_jiffies(), start))
    return f"cores {100 * busy / total:.0f} % busy" if total > 0 else "cores' load unknown"


def narrowed(selection: str, part: str) -> str:
    return f"({selection}) and ({part})" if selection.strip() else part


def markers() -> list[str]:
    """The suite's markers (setup.cfg's [tool:pytest] markers)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config.get("tool:pytest", "markers", fallback="").strip().splitlines()
    return [line.split(":", 1)[0].strip() for line in lines if line.strip()]


def can_select(expression: str, names: list[str]) -> bool:
    """Whether a test marked with some of `names` can match the marker `expression` (pytest's -m
    syntax: names, and, or, not, parentheses; Python's own boolean syntax). False: the
    expression rules every test out, so a part with it is empty by design."""
    code = compile(expression, "<marker expression>", "eval")
    for marks in itertools.product((False, True), repeat=len(names)):
        # A name that is no marker (a typo, a keyword) matches no test.
        scope = dict.fromkeys(code.co_names, False) | dict(zip(names, marks))
        if eval(code, {"__builtins__": {}}, scope):
            return True
    return False


def ok(status: int) -> bool:
    return status == 0


def skips(path: Path) -> Counter:
    """The reasons of the tests a part's JUnit XML says were skipped, with how many each."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return Counter()
    return Counter((skipped.get("message") or "").removeprefix("Skipped: ")
                   for skipped in root.iter("skipped"))


def run_part(name: str, part: str, selection: str, extra: list[str], **popen) -> subprocess.Popen:
    """Starts one part's pytest, or a no-op where `selection` rules out every test."""
    if not can_select(selection, markers()):
        print(f"run_tests: {name}: the {part} part is not selected ({selection})", flush=True)
        (REPORTS / f"{name}-{part}.xml").unlink(missing_ok=True)  # an earlier run's
        return subprocess.Popen([sys.executable, "-c", ""], **popen)
    return subprocess.Popen(pytest_command(name, part, selection, extra), cwd=REPO, **popen)


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, selection = argv[0], (argv[1] if len(argv) == 2 else "")
    REPORTS.mkdir(parents=True, exist_ok=True)
    BASETEMP.mkdir(parents=True, exist_ok=True)  # pytest makes only the last level
    start, start_cpu = time.monotonic(), cpu_jiffies()

    log_path = REPORTS / f"{name}-slurm.log"
    with open(log_path, "w") as log:
        beside = run_part(name,
                          "slurm",
                          narrowed(selection, "slurm"),
                          extra,
                          stdout=log,
                          stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL)
        if can_select(narrowed(selection, "slurm"), markers()):  # else run_part said so
            print(
                f"run_tests: {name}: the Slurm tests run beside the others (pid {beside.pid}, "
                f"output: {log_path.relative_to(REPO)}, shown when they end)",
                flush=True)
        try:
            main_status = run_part(name, "main", narrowed(selection, "not slurm and not alone"),
                                   workers() + extra).wait()
            slurm_status = beside.wait()
            beside_cpu = busy_since(start_cpu)
        finally:  # interrupted: the Slurm tests end too (their fixture stops the cluster)
            if beside.poll() is None:
                beside.terminate()
                beside.wait()
    print(f"\n---- run_tests: {name}: the Slurm tests (pytest exit status {slurm_status}) ----",
          flush=True)
    sys.stdout.write(log_path.read_text())
    print(f"---- run_tests: {name}: the tests marked alone, with nothing beside them ----",
          flush=True)
    alone_cpu = cpu_jiffies()
    alone_status = run_part(name, "alone", narrowed(selection, "alone and not slurm"), extra).wait()
    statuses = {"others": main_status, "slurm": slurm_status, "alone": alone_status}
    took = time.monotonic() - start
    print(f"run_tests: {name}: {took / 60:.1f} min ({beside_cpu} while the Slurm tests and the "
          f"others ran, {busy_since(alone_cpu)} for the alone ones); pytest exit status per "
          "part: " + ", ".join(f"{part} {status}" for part, status in statuses.items()),
          flush=True)
    for part in ("main", "slurm", "alone"):
        for reason, n in sorted(skips(REPORTS / f"{name}-{part}.xml").items()):
            print(f"run_tests: {name}: {part}: {n} skipped: {reason}", flush=True)
    for part, status in statuses.items():
        if status == NO_TESTS:
            print(f"run_tests: {name}: the {part} part collected no test: a failure", flush=True)
    failed = [status for status in statuses.values() if not ok(status)]
    return failed[0] if failed else 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main(sys.argv[1:]))
