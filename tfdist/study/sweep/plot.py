"""`tfdist sweep status --plot`: DIR/sweep.png, a final metric against each swept setting."""

from __future__ import annotations

from typing import Any, Optional


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
