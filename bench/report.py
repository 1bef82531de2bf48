"""Plots (bench/results/<name>.png) and the summary table of the benchmark results.

  .venv/bin/python bench/report.py          # from the JSON files already in bench/results/

The table is printed and written to bench/results/summary.md, and the tables of
docs/benchmarks.md between the `<!-- bench:NAME -->` markers are rewritten from the same results
(tests/test_readme.py checks that they agree).
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, ROOT, table  # noqa: E402
from common import load_result as load  # noqa: E402

DOCS = os.path.join(ROOT, "docs", "benchmarks.md")

NAMES = ("overhead", "allreduce", "weak_scaling", "startup", "input_pipeline")


def _med(s):
    return None if not s else s.get("median")


def _err(s):
    """Error bars (below, above) from a summary's min and max around its median."""
    if not s or s.get("median") is None:
        return [0], [0]
    return [s["median"] - s["min"]], [s["max"] - s["median"]]


def _bars(ax, groups, series, values, errors=None, ylabel=""):
    import numpy as np

    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        vals = [values[g].get(name) or 0 for g in groups]
        kwargs = {}
        if errors is not None:
            lo = [errors[g].get(name, ([0], [0]))[0][0] for g in groups]
            hi = [errors[g].get(name, ([0], [0]))[1][0] for g in groups]
            kwargs = dict(yerr=[lo, hi], capsize=3)
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, label=name, **kwargs)
    ax.set_xticks(x)
    ax.set_xticklabels([g.replace("/", "\n") for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def plot_overhead(data, plt) -> None:
    rows = [r for r in data["rows"] if r["cpu_ratio"]["median"] is not None]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    x = list(range(len(rows)))
    for key, offset, label in (("cpu_ratio", -0.2, "CPU-seconds per sample"), ("rate_ratio", 0.2,
                                                                               "samples/s")):
        med = [r[key]["median"] for r in rows]
        lo = [r[key]["median"] - r[key]["low"] for r in rows]
        hi = [r[key]["high"] - r[key]["median"] for r in rows]
        ax.errorbar([i + offset for i in x], med, yerr=[lo, hi], fmt="o", capsize=3, label=label)
    ax.axhspan(0.98, 1.02, color="0.85", label="within 2 %")
    ax.axhline(1.0, color="k", linewidth=0.5)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['name']}\n{r['a']} / {r['b']}" for r in rows],
                       fontsize=7,
                       rotation=30,
                       ha="right")
    ax.set_ylabel("ratio A / B (median, bootstrap 95 %)")
    ax.legend(fontsize=8)
    fig.suptitle("1. tfdist against its twin and against itself")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "overhead.png"), dpi=80)


def plot_allreduce(data, plt) -> None:
    cases = [c for c in ("1MB", "25MB", "100MB", "resnet50") if c in data["bandwidth"]]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    for ax, engine in zip(axes, ("multi_worker", "horovod")):
        settings = []
        for c in cases:
            for k in data["bandwidth"][c].get(engine, {}):
                if k not in settings:
                    settings.append(k)
        values = {c: {} for c in cases}
        errors = {c: {} for c in cases}
        for c in cases:
            for k, bw in data["bandwidth"][c].get(engine, {}).items():
                values[c][k] = _med(bw["gb_per_s"])
                errors[c][k] = _err(bw["gb_per_s"])
        _bars(ax, cases, settings, values, errors, "bus bandwidth (GB/s)")
        if data.get("tcp_limit_gb_per_s"):
            ax.axhline(data["tcp_limit_gb_per_s"], color="k", linestyle="--", linewidth=1)
            ax.text(0, data["tcp_limit_gb_per_s"], " loopback TCP", va="bottom", fontsize=8)
        if data.get("tcp_duplex_gb_per_s"):
            ax.axhline(data["tcp_duplex_gb_per_s"], color="k", linestyle=":", linewidth=1)
            ax.text(0,
                    data["tcp_duplex_gb_per_s"],
                    " TCP both ways at once (each)",
                    va="bottom",
                    fontsize=8)
        ax.set_title(engine)
    fig.suptitle("2. All-reduce between 2 processes vs loopback TCP")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "allreduce.png"), dpi=80)


def plot_weak_scaling(data, plt) -> None:
    groups = list(data["results"])
    fig, ax = plt.subplots(figsize=(7, 4))
    values = {g: {"efficiency": _med(data["results"][g]["efficiency"])} for g in groups}
    errors = {g: {"efficiency": _err(data["results"][g]["efficiency"])} for g in groups}
    _bars(ax, groups, ["efficiency"], values, errors, "throughput(2) / (2 x throughput(1))")
    ax.axhline(0.9, color="k", linestyle="--", linewidth=1)
    ax.text(-0.4, 0.9, "goal 0.90", va="bottom", fontsize=8)
    ax.set_title("3. Weak scaling, resnet_small, one core per worker")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "weak_scaling.png"), dpi=80)


def plot_startup(data, plt) -> None:
    res = data["results"]
    groups = [g for g in res if "/" in g and g.split("/")[0] in ("multi_worker", "horovod")]
    values, errors = {}, {}
    for g in groups:
        values[g], errors[g] = {}, {}
        for side in ("tfdist", "hand"):
            s = res[g].get(f"{side}_first_step_end_s")
            values[g][side] = _med(s)
            errors[g][side] = _err(s)
    plain = res.get("plain_single_process/cnn", {}).get("first_step_end_s")
    fig, ax = plt.subplots(figsize=(9, 4))
    _bars(ax, groups, ["tfdist", "hand"], values, errors, "seconds: launch -> first step done")
    if _med(plain):
        ax.axhline(_med(plain), color="k", linestyle="--", linewidth=1)
        ax.text(-0.4, _med(plain), " single plain process", va="bottom", fontsize=8)
    env = res.get("tfdist_env", {}).get("tfdist_env_multi_worker", {})
    if _med(env):
        ax.set_title(f"4. Start-up, 2 processes (tfdist env: {_med(env):.2f} s)")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "startup.png"), dpi=80)


def plot_input_pipeline(data, plt) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    names = ["tfdist", "naive", "limit"]
    vals = [data["samples_per_s"][n] for n in names]
    ax.bar(names, vals, color=["C0", "C1", "C2"])
    rounds = data.get("rounds", {})
    cores = data.get("cores", 1)
    for i, n in enumerate(names):
        pts = rounds.get("single_core" if n == "limit" else n, [])
        if n == "limit":
            pts = [p * cores for p in pts]
        ax.scatter([i] * len(pts), pts, color="k", s=10, zorder=3)
    ax.set_ylabel("samples/s (bars: best round, dots: every round)")
    ax.set_title("5. Input pipeline: decode + augment")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "input_pipeline.png"), dpi=80)


def plots() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name in NAMES:
        data = load(name)
        if data is None:
            continue
        try:
            globals()[f"plot_{name}"](data, plt)
        except Exception as e:  # a broken plot must not hide the other results
            print(f"plot {name}: {type(e).__name__}: {e}", file=sys.stderr)
        plt.close("all")


def _fmt(x, digits=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _yes(met):
    return {True: "yes", False: "NO", None: "?"}[met]


def _spread(s):
    return f" (±{s['spread'] / 2:.0%})" if s and s.get("spread") is not None else ""


def rounds_text(row: dict) -> str:
    """"36" or, over several pairs of runs, "3 x 12"."""
    pairs = row.get("run_pairs") or 1
    return str(row["rounds"]) if pairs <= 1 else f"{pairs} x {row['rounds'] // pairs}"


def keras_text(row: dict) -> str:
    """The Keras each side's fit ran, "A / B" ("Keras 3.15.1 / Keras 3.15.1"); "-" for a side
    not recorded (runs before the bench recorded it)."""
    return " / ".join(row[side].get("keras") or "-" for side in ("a_side", "b_side"))


# Said under the table while rows on record lack their Kerases: what those rows compared.
UNRECORDED_KERAS = (
    "Keras \"-\": not recorded, the rows are from before each row had one Keras told to both "
    "sides. In their tfdist / hand-written rows the tfdist side trained TensorFlow's default "
    "(Keras 3) and the hand-written one tf-keras (issue 45): those ratios compare two Kerases as "
    "much as tfdist and its twin. They are to be re-measured with `make bench` on an idle "
    "machine.")


def plan_text() -> str:
    """What the comparisons of `make bench` take as bench/training.py now runs them, priced at
    the seconds per round and per pair of runs of the rows on record."""
    import training

    args = training.arguments([])
    every = training.arguments(["--all"])
    quick = training.arguments(["--quick"])
    todo, kept = training.selection(args)
    return (f"`make bench` now: {training.plan_text(todo, args, kept)}; "
            "then the start-up runs, the all-reduce and the input pipeline. `BENCH_ALL=1`: "
            f"{training.plan_text(training.todo_pairs(every), every)}. `BENCH_QUICK=1`: "
            f"{training.plan_text(training.todo_pairs(quick), quick)}.")


def interval_text(r: dict) -> str:
    """A ratio's median and its 95 % interval: "1.004 [0.991, 1.013]"."""
    if r.get("median") is None:
        return "-"
    return f"{r['median']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


COMPARISON_HEADER = ("comparison", "A / B", "Keras A / B", "CPU-ms/sample A", "B",
                     "CPU ratio [95 %]", "samples/s A", "B", "samples/s ratio [95 %]",
                     "verdict (CPU)")


def comparison_rows() -> list:
    """One line per comparison of bench/results/overhead.json."""
    data = load("overhead")
    out = []
    for r in (data or {}).get("rows", []):
        a, b = r["a_side"], r["b_side"]
        out.append([
            r["name"], f"{r['a']} / {r['b']}",
            keras_text(r),
            _fmt(a["cpu_per_sample_ms"], 4),
            _fmt(b["cpu_per_sample_ms"], 4),
            interval_text(r["cpu_ratio"]),
            _fmt(a["samples_per_sec"], 0),
            _fmt(b["samples_per_sec"], 0),
            interval_text(r["rate_ratio"]), r["verdict"]
        ])
    return out


def rows() -> list:
    out = []
    data = load("allreduce")
    if data:
        limit = data.get("tcp_limit_gb_per_s")
        out.append(["2 allreduce", "loopback TCP GB/s", "-", _fmt(limit), "-", "the limit", "-"])
        if data.get("tcp_duplex_gb_per_s"):
            out.append([
                "2 allreduce", "loopback TCP both ways at once GB/s (each)", "-",
                _fmt(data["tcp_duplex_gb_per_s"]), "-", "(info)", "-"
            ])
        for case, engines in data.get("defaults_vs_best", {}).items():
            for engine, v in engines.items():
                out.append([
                    "2 allreduce", f"{case} {engine} default vs best GB/s",
                    _fmt(v["default_gb_per_s"], 3), f"{_fmt(v['best_gb_per_s'], 3)} ({v['best']})",
                    _fmt(v["default_over_best"], 3), ">= 0.95",
                    _yes(v["met"])
                ])
        for case in ("100MB", "resnet50"):
            fp16 = data["bandwidth"].get(case, {}).get("horovod",
                                                       {}).get("default (fusion 64MB) + fp16")
            if fp16:
                out.append([
                    "2 allreduce", f"{case} horovod default + fp16 GB/s",
                    _fmt(_med(fp16["gb_per_s"]), 3), "-", "-", "(lossy, info)", "-"
                ])
        b = data.get("best_on_100MB")
        if b:
            out.append([
                "2 allreduce", f"100MB best ({b['setting']}) / TCP",
                _fmt(b["gb_per_s"], 3),
                _fmt(limit),
                _fmt(b["ratio_to_tcp_limit"], 3), ">= 0.40",
                _yes(b["met"])
            ])
            if b.get("ratio_to_tcp_duplex") is not None:
                out.append([
                    "2 allreduce", "100MB best / TCP both ways",
                    _fmt(b["gb_per_s"], 3),
                    _fmt(data["tcp_duplex_gb_per_s"]),
                    _fmt(b["ratio_to_tcp_duplex"], 3), "(info)", "-"
                ])
    data = load("weak_scaling")
    if data:
        for g, r in data["results"].items():
            e = r["efficiency"]
            out.append([
                "3 weak scaling", f"resnet_small {g} efficiency",
                _fmt(_med(r["two_workers"]), 0),
                _fmt(_med(r["one_worker"]), 0) + " (x1)",
                (interval_text(e) if "low" in e else _fmt(_med(e), 3) + _spread(e)),
                "ceiling" if r["met"] is None else ">= 0.90",
                "-" if r["met"] is None else _yes(r["met"])
            ])
    data = load("startup")
    if data:
        res = data["results"]
        for g, r in res.items():
            if not isinstance(r, dict) or "added_s_to_first_step_end" not in r:
                continue
            added = r["added_s_to_first_step_end"]
            out.append([
                "4 start-up", f"{g} s to first step done",
                _fmt(_med(r["tfdist_first_step_end_s"]), 1),
                _fmt(_med(r["hand_first_step_end_s"]), 1),
                "-" if _med(added) is None else f"{_med(added):+.2f} s", "< +1 s",
                _yes(r["met"])
            ])
        plain = res.get("plain_single_process/cnn", {})
        out.append([
            "4 start-up", "single plain process (cnn) s", "-",
            _fmt(_med(plain.get("first_step_end_s")), 1), "-", "reference", "-"
        ])
        env = res.get("tfdist_env", {})
        out.append([
            "4 start-up", "tfdist env --format=shell s",
            _fmt(_med(env.get("tfdist_env_multi_worker")), 3),
            _fmt(_med(env.get("python_no_op")), 3) + " (python -c pass)", "-", "-", "-"
        ])
    data = load("input_pipeline")
    if data:
        s = data["samples_per_s"]
        out.append([
            "5 input pipeline", "tfdist vs limit samples/s",
            _fmt(s["tfdist"], 0),
            _fmt(s["limit"], 0),
            _fmt(data["tfdist_over_limit"], 3), "-", "-"
        ])
        out.append([
            "5 input pipeline", "tfdist vs naive samples/s",
            _fmt(s["tfdist"], 0),
            _fmt(s["naive"], 0),
            _fmt(data["tfdist_over_naive"], 3), "-", "-"
        ])
    return out


HEADER = ("benchmark", "measure", "tfdist", "reference", "ratio", "goal", "met")
QUICK_SUMMARY = (
    " (with QUICK rows, BENCH_QUICK=1: the equal-settings rows in 2 pairs of runs of 6 "
    "rounds, a cost told to +-5 %)")


def summary_text() -> str:
    text = ""
    data = load("overhead")
    if data:
        setup = data["setup"]
        text += (f"1 overhead: CPU-seconds per trained sample (all processes of the run) and "
                 f"samples/s, A / B, {setup['rounds']} rounds of alternating slices (variants: "
                 f"{setup.get('variant_rounds', setup['rounds'])})"
                 f"{QUICK_SUMMARY if setup.get('quick') else ''}\n\n")
        text += table(comparison_rows(), COMPARISON_HEADER) + "\n\n"
        if any(not r["a_side"].get("keras") for r in data["rows"]):
            text += UNRECORDED_KERAS + "\n\n"
    text += table(rows(), HEADER)
    data = next((d for d in (load(n) for n in NAMES) if d and "machine" in d), None)
    if data:
        m = data["machine"]
        text += (f"\n\nmachine: {m['cores']} cores ({m.get('cpu')}), {m.get('memory_gb')} GB, "
                 f"Python {m.get('python')}, TensorFlow {m.get('tensorflow')}, tf-keras "
                 f"{m.get('tf_keras')}, Horovod {m.get('horovod')}; load average at start "
                 f"{m.get('load_average')}")
    return text


def _md(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def runs_text(data: dict) -> str:
    """When the rows were measured and the load average at the start and end of their run: the
    run of most rows first, then each other run with its rows (`--only` re-measures some)."""
    m = data["machine"]
    runs: dict = {}
    for row in data["rows"]:
        load = row.get("load_average") or [
            m["load_average"][0], data.get("load_average_end", ["?"])[0]
        ]
        runs.setdefault((row.get("date", m["date"]), tuple(load)), []).append(row["name"])
    ordered = sorted(runs.items(), key=lambda item: -len(item[1]))
    texts = [
        f"{date[:10]}, load average {load[0]} at the start and {load[1]} at the end"
        for (date, load), _ in ordered
    ]
    if len(texts) == 1:
        return texts[0]
    return texts[0] + "; " + "; ".join(f"{', '.join(names)}: {text}"
                                       for (_, names), text in zip(ordered[1:], texts[1:]))


def docs_blocks() -> dict:
    """The generated tables of docs/benchmarks.md, by marker name."""
    blocks = {}
    data = load("overhead")
    if data:
        setup = data["setup"]
        all_quick = all(r.get("quick", setup.get("quick")) for r in data["rows"])
        quick = ("**A quick run** (`BENCH_QUICK=1`: the equal-settings rows in 2 pairs of runs "
                 "of 6 rounds, a cost told to +-5 % instead of +-3 %), not the full `make "
                 "bench`. " if all_quick else
                 "Rows marked *(quick)* are from a quick run (`BENCH_QUICK=1`: the equal-settings "
                 "rows in 2 pairs of runs of 6 rounds, a cost told to +-5 % instead of +-3 %); "
                 "the others from " if setup.get("quick") else "")
        pairs, most = setup.get("run_pairs", 1), setup.get("max_run_pairs", 1)
        more = (f", then {setup['rounds'] // pairs} more rounds in a fresh pair of runs while the "
                f"row's interval is wider than +-3 %, up to {most} pairs of runs"
                if most > pairs else "")
        blocks["overhead"] = (
            f"{quick}{setup['rounds']} rounds in {pairs} fresh pairs of runs{more} "
            f"(the Keras 3 and addition rows: {setup.get('variant_rounds', setup['rounds'])} "
            "rounds, one pair of runs) of alternating slices of about "
            f"{setup['slice_seconds']:g} s per side (epochs of {setup['steps_per_epoch']} steps), "
            f"{runs_text(data)}. A / B: the median per-round "
            "ratio, with its bootstrap 95 % interval (over the pairs of runs, then the rounds; "
            "rounds: pairs of runs x rounds each; Keras: the one each side's fit ran, as its "
            "rank 0 recorded it).\n\n" + _md(
                ("comparison", "A / B", "Keras, A / B", "rounds", "CPU-ms per sample, A / B",
                 "CPU ratio [95 %]", "samples/s, A / B", "samples/s ratio [95 %]", "verdict"),
                [(r["name"] + (" *(quick)*" if r.get("quick") and not all_quick else ""),
                  f"{r['a']} / {r['b']}", keras_text(r), rounds_text(r),
                  f"{_fmt(r['a_side']['cpu_per_sample_ms'], 4)} / "
                  f"{_fmt(r['b_side']['cpu_per_sample_ms'], 4)}", interval_text(
                      r["cpu_ratio"]), f"{_fmt(r['a_side']['samples_per_sec'], 0)} / "
                  f"{_fmt(r['b_side']['samples_per_sec'], 0)}", interval_text(
                      r["rate_ratio"]), r["verdict"]) for r in data["rows"]]))
        if any(not r["a_side"].get("keras") for r in data["rows"]):
            blocks["overhead"] += "\n\n" + UNRECORDED_KERAS
        blocks["overhead"] += "\n\n" + plan_text()
    xla = load("xla")
    if xla:
        blocks["xla"] = (
            f"{xla['machine']['date'][:10]}, one device, {xla['setup']['rounds']} rounds of "
            f"alternating slices of {xla['setup']['steps_per_slice']} steps of "
            f"{xla['setup']['batch']} samples (`.venv/bin/python bench/xla.py`). XLA on / off: "
            "the median per-round ratio, with its bootstrap 95 % interval.\n\n" + _md(
                ("model", "Keras", "CPU per sample, XLA on / off [95 %]",
                 "samples/s, XLA on / off"),
                [(r["model"], r["keras"], interval_text(
                    r["cpu_per_sample"]), _fmt(r["samples_per_sec"]["median"]))
                 for r in xla["rows"]]))
    other = rows()
    if other:
        weak = load("weak_scaling")
        note = ("The start-up and weak-scaling rows below are from a quick run: not for the "
                "record.\n\n" if weak and weak["setup"].get("quick") else "")
        blocks["others"] = note + _md(HEADER, other)
    return blocks


def update_docs(path: str = DOCS) -> None:
    """Rewrite each `<!-- bench:NAME -->...<!-- /bench:NAME -->` block of the docs page."""
    with open(path) as f:
        text = f.read()
    for name, block in docs_blocks().items():
        text = re.sub(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->",
                      lambda m, name=name, block=block:
                      f"<!-- bench:{name} -->\n{block}\n<!-- /bench:{name} -->",
                      text,
                      flags=re.S)
    with open(path, "w") as f:
        f.write(text)


def main() -> None:
    plots()
    text = summary_text()
    with open(os.path.join(RESULTS, "summary.md"), "w") as f:
        f.write("```\n" + text + "\n```\n")
    update_docs()
    print(text)


if __name__ == "__main__":
    main()
