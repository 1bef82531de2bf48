"""Prints the slowest tests of one or more pytest runs from their JUnit XML files (pytest
--junitxml=...), and what the tests took in all: `.ci/run` calls it after each stack so the
distance to CI's budget, and what spends it, shows in every run.

    python tools/slowest_tests.py [--top N] LABEL FILE.xml [FILE.xml ...]
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET


def read(paths: list[str]) -> list[tuple[float, str, float | None]]:
    """(seconds, test id, CPU seconds or None) of every test case in the files (setup and
    teardown included; the CPU seconds are tests/conftest.py's `cpu_s` property)."""
    cases = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            cpu = [p.get("value") for p in case.iter("property") if p.get("name") == "cpu_s"]
            cases.append((float(case.get("time", 0)), name, float(cpu[0]) if cpu else None))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("label")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    cases = read(args.files)
    total = sum(t for t, _, _ in cases)
    cpu = sum(c or 0 for _, _, c in cases)
    print(f"ci: {args.label}: {len(cases)} tests, {total / 60:.1f} min of test time, "
          f"{cpu / 60:.1f} min of CPU (Slurm jobs' not counted); the {args.top} slowest:")
    for seconds, name, _ in sorted(cases, reverse=True)[:args.top]:
        print(f"ci:   {seconds:6.1f} s  {name}")
    print(f"ci: {args.label}: the {args.top} costliest in CPU (what the budget is spent on):")
    for _, name, cpu_s in sorted(cases, key=lambda c: -(c[2] or 0))[:args.top]:
        print(f"ci:   {cpu_s or 0:6.1f} CPU-s  {name}")


if __name__ == "__main__":
    main()
