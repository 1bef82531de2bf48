"""A scaling study's speed-ups and efficiencies, its table, and its plot (scale.png)."""

from __future__ import annotations

from typing import Any, Optional


def add_scaling(study: dict[str, Any]) -> None:
    """Speed-up and efficiency of every measured size against the smallest measured size:
    speed-up = rate / base rate, efficiency = speed-up / (size / base size), from the measured
    samples/s only (weak and strong alike: the ideal rate grows with the size)."""
    measured = [r for r in study["results"] if r.get("samples_per_sec")]
    base = min(measured, key=lambda r: r["size"]) if measured else None
    study["base_size"] = base["size"] if base else None
    for r in study["results"]:
        if not r.get("samples_per_sec"):
            r.update(speedup=None, efficiency=None, ideal_samples_per_sec=None)
            continue
        speedup = r["samples_per_sec"] / base["samples_per_sec"]
        r["speedup"] = speedup
        r["efficiency"] = speedup / (r["size"] / base["size"])
        r["ideal_samples_per_sec"] = base["samples_per_sec"] * r["size"] / base["size"]


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _spread(rates: list[float]) -> str:
    """± half the range of the timed epochs' rates, in % of their mean (the noise of a row)."""
    if len(rates) < 2:
        return ""
    mean = sum(rates) / len(rates)
    return f" ±{50 * (max(rates) - min(rates)) / mean:.0f}%"


def table(study: dict[str, Any]) -> str:
    """The printed table: one line per size, failures included."""
    head = ("size", "nodes x tasks", "global batch", "scaled LR", "samples/s", "time/epoch",
            "speed-up", "efficiency", "input wait")
    rows = []
    for r in study["results"]:
        cells = [str(r["size"]), r.get("layout") or "-", str(r["global_batch_size"])]
        cells.append(f"{r['learning_rate']:.4g}")
        if r.get("samples_per_sec"):
            wait = r.get("input_wait")
            cells += [
                f"{r['samples_per_sec']:.0f}{_spread(r.get('epoch_samples_per_sec') or [])}",
                _duration(r.get("time_per_epoch")), f"{r['speedup']:.2f}", f"{r['efficiency']:.0%}",
                "?" if wait is None else f"{wait:.1%}"
            ]
        else:
            cells.append(f"FAILED: {r.get('error')}")
        rows.append(cells)
    widths = [max(len(head[i]), *(len(c[i]) for c in rows if len(c) > i)) for i in range(len(head))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    for cells in rows:
        if len(cells) == len(head):
            lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
        else:  # a failed size: its reason runs on after the columns it has
            lines.append("  ".join(c.rjust(w)
                                   for c, w in zip(cells[:-1], widths)) + "  " + cells[-1])
    base = study.get("base_size")
    lines.append(f"{study['scaling']} scaling, --strategy={study['strategy']}; speed-up and "
                 f"efficiency against size {base}; samples/s: mean of {study['timed_steps']} "
                 "timed steps (± half the range of its epochs); time/epoch: one pass over the "
                 "training split at that rate; input wait: share of step time waiting for input.")
    return "\n".join(lines)


def plot(study: dict[str, Any], path: str, title: str = "") -> Optional[str]:
    """Draw throughput and efficiency against size, with the ideal lines, into `path`. Returns
    None, or the reason there is no plot (matplotlib missing, nothing measured)."""
    measured = [r for r in study["results"] if r.get("samples_per_sec")]
    if not measured:
        return "no size was measured"
    try:
        import matplotlib
    except ImportError:
        return ("matplotlib is not installed (`pip install matplotlib`, a dependency of tfdist "
                "that this environment lacks); scale.json has every number")
    matplotlib.use("Agg")  # files only: no display on a compute node
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(sizes, [r["samples_per_sec"] for r in measured], "o-", label="measured")
    left.plot(sizes, [r["ideal_samples_per_sec"] for r in measured], "k--", label="ideal (linear)")
    for r in measured:
        rates = r.get("epoch_samples_per_sec") or []
        if len(rates) > 1:  # the timed epochs' range
            left.vlines(r["size"], min(rates), max(rates), colors="C0", alpha=0.5)
    left.set_ylim(bottom=0)
    left.set_xlabel("size (tasks)")
    left.set_ylabel("samples/s")
    left.set_title("throughput")
    left.legend()
    right.plot(sizes, [100 * r["efficiency"] for r in measured], "o-", label="measured")
    right.axhline(100, color="k", linestyle="--", label="ideal")
    right.set_ylim(0, 110)
    right.set_xlabel("size (tasks)")
    right.set_ylabel("efficiency %")
    right.set_title("scaling efficiency")
    right.legend()
    for ax in (left, right):
        ax.set_xticks(sizes)
        ax.grid(alpha=0.3)
    fig.suptitle(title or f"tfdist scale: {study['scaling']} scaling, {study['strategy']}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return None
