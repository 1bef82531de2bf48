"""The README's figures are the ones `make bench` last wrote (bench/results/), one source."""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
RESULTS = REPO / "bench" / "results"


def section(title: str) -> str:
    start = README.index(title)
    return README[start:README.index("\n## ", start)]


def test_input_benchmark_section_quotes_the_last_run():
    data = json.loads((RESULTS / "input_pipeline.json").read_text())
    best = data["samples_per_s"]
    rounds = len(data["rounds"]["tfdist"])
    row = (f"| samples/s (best of {rounds} rounds) | {best['tfdist']:.0f} | {best['naive']:.0f} | "
           f"{best['limit']:.0f} | {data['tfdist_over_limit']:.2f} | "
           f"{data['tfdist_over_naive']:.2f} |")
    text = section("### Input benchmark")
    assert row in text
    cpu = data["samples_per_cpu_s"]
    assert f"{cpu['tfdist']:.0f} against {cpu['single_core']:.0f} samples per" in text
    assert data["machine"]["date"][:10] in text


def test_performance_table_quotes_the_summary():
    """Each samples/s pair of the summary's rows 1 and 5 appears in the Performance table."""
    summary = (RESULTS / "summary.md").read_text()
    table = section("## Performance")
    rows = re.findall(r"^(1 overhead|5 input pipeline) +(.+?) samples/s +(\d+) +(\d+)", summary,
                      re.M)
    assert len(rows) == 6, summary
    for _, what, tfdist, reference in rows:
        line = next(
            (x
             for x in table.splitlines() if x.startswith("| ") and tfdist in x and reference in x),
            None)
        assert line is not None, f"{what}: {tfdist} vs {reference} not in the Performance table"
