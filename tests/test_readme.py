"""The front page and the Benchmarks page say what the repository holds: the benchmark figures
are the ones `make bench` last wrote (bench/results/), one source; the README stays short and its
links lead to files that exist; nothing cites a file outside the repository."""

import json
import re
import subprocess
import sys
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


def test_performance_tables_are_generated_from_the_results():
    """The Benchmarks page's tables between the bench markers are what bench/report.py makes of
    bench/results/ (make bench rewrites them): every comparison's ratios, interval and verdict."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import compare
        import report
    finally:
        sys.path.remove(str(REPO / "bench"))
    blocks = report.docs_blocks()
    data = json.loads((RESULTS / "overhead.json").read_text())
    assert set(blocks) == {"overhead", "others", "xla"}
    for name, block in blocks.items():
        assert f"<!-- bench:{name} -->\n{block}\n<!-- /bench:{name} -->" in BENCHMARKS, name
    for row in json.loads((RESULTS / "xla.json").read_text())["rows"]:
        cpu = row["cpu_per_sample"]
        assert (f"| {row['model']} | {row['keras']} | {cpu['median']:.3f} [{cpu['low']:.3f}, "
                f"{cpu['high']:.3f}] |" in blocks["xla"]), row["name"]
    for row in data["rows"]:
        cpu = row["cpu_ratio"]
        # A row of a quick run among full-run rows is marked so.
        marks = ["", " *(quick)*"] if row.get("quick") else [""]
        lines = [f"| {row['name']}{mark} | {row['a']} / {row['b']} |" for mark in marks]
        assert any(line in blocks["overhead"] for line in lines), lines
        assert row["verdict"] in blocks["overhead"]
        if cpu["median"] is not None:
            assert f"{cpu['median']:.3f} [{cpu['low']:.3f}, {cpu['high']:.3f}]" in blocks[
                "overhead"]
        # The verdict follows from the stored interval by the one rule (bench/compare.py).
        assert row["verdict"] == compare.verdict(cpu["median"], cpu["low"], cpu["high"],
                                                 len(row["cpu_ratio_rounds"]), row["rounds"],
                                                 row["subject"], row["group"] == "gain",
                                                 row.get("tells", compare.TELLS)), row["name"]


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
