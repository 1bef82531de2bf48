"""`tfdist sweep status`'s text: one line per element, and the counts of each state."""

from __future__ import annotations

from typing import Any, Optional


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
