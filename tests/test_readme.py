"""The front page and the Benchmarks page say what the repository holds: the benchmark figures
are the ones `make bench` last wrote (bench/results/), one source; the README stays short and its
links lead to files that exist; nothing cites a file outside the repository."""

import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BENCHMARKS = (REPO / "docs" / "benchmarks.md").read_text()
RESULTS = REPO / "bench" / "results"


def section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end > 0 else len(text)]


def test_input_benchmark_section_quotes_the_last_run():
    data = json.loads((RESULTS / "input_pipeline.json").read_text())
    best = data["samples_per_s"]
    rounds = len(data["rounds"]["tfdist"])
    row = (f"| samples/s (best of {rounds} rounds) | {best['tfdist']:.0f} | {best['naive']:.0f} | "
           f"{best['limit']:.0f} | {data['tfdist_over_limit']:.2f} | "
           f"{data['tfdist_over_naive']:.2f} |")
    text = section(BENCHMARKS, "## The input pipeline")
    assert row in text
    cpu = data["samples_per_cpu_s"]
    assert f"{cpu['tfdist']:.0f} against {cpu['single_core']:.0f} samples per" in text
    assert data["machine"]["date"][:10] in text


def test_performance_table_quotes_the_summary():
    """Each samples/s pair of the summary's rows 1 and 5 appears in the Benchmarks table."""
    summary = (RESULTS / "summary.md").read_text()
    table = section(BENCHMARKS, "## The last run")
    rows = re.findall(r"^(1 overhead|5 input pipeline) +(.+?) samples/s +(\d+) +(\d+)", summary,
                      re.M)
    assert len(rows) == 6, summary
    for _, what, tfdist, reference in rows:
        line = next(
            (x
             for x in table.splitlines() if x.startswith("| ") and tfdist in x and reference in x),
            None)
        assert line is not None, f"{what}: {tfdist} vs {reference} not in the Benchmarks table"


def test_readme_is_a_short_front_page():
    assert len(README.splitlines()) <= 150


def test_readme_links_lead_to_files_of_the_repository():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, missing


def test_nothing_cites_a_file_outside_the_repository():
    files = subprocess.run(["git", "ls-files"],
                           cwd=REPO,
                           capture_output=True,
                           text=True,
                           check=True).stdout.split()
    cited = [
        f for f in files if f != "tests/test_readme.py" and (REPO / f).is_file()
        and re.search(r"shared/design|FACTS\.md", (REPO / f).read_text(errors="replace"))
    ]
    assert not cited, cited
