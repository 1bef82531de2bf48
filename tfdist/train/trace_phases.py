"""Where a traced training step's time went, read from the trace TensorFlow's profiler wrote
(`<logdir>/plugins/profile/<session>/<host>.xplane.pb`, an XSpace protocol buffer: the format
TensorBoard's profile plugin reads), and one summary over the ranks.

A step is the span of a `tfdist_step` event (tfdist.train.profiling marks each traced call of the
train function on the Python thread, with its first step number and its number of steps: a
call of `steps_per_execution` N counts as N steps of a Nth of its time). Within it every instant
goes to one phase, the first that applies:
- input: the step waits for its batch (IteratorGetNext, a multi-device iterator's
  GetNextFromShard: the consumer's side; the pipeline's own threads producing ahead are not the
  step's time);
- compute: an op runs (TensorFlow's executor threads, GPU streams), other than the two others;
- collectives: an all-reduce, all-gather or broadcast is in flight and nothing computes
  (CollectiveReduceV2, NCCL, Horovod's ops): time the step waits for the other ranks or the
  network;
- idle/host: the rest (Python, callbacks, the runtime between ops).

In synchronous training every rank's step ends together: a slow rank makes the others wait in
their collectives. So the slow rank is the one with the most time outside collectives, and what
it does with that time is the phase named.
"""

from __future__ import annotations

import glob
import os
import re
import statistics
from typing import Any, Optional

STEP_EVENT = "tfdist_step"
PHASES = ("compute", "collective", "input", "idle")
WORDS = {
    "compute": "computing",
    "collective": "in collectives (all-reduce, broadcast)",
    "input": "waiting for input",
    "idle": "idle or on the host (Python, callbacks, runtime)",
}
SLOW = 1.2  # a rank this many times the others' median time outside collectives is named
_INPUT = re.compile(r"GetNext")
_COLLECTIVE = re.compile(
    r"collective|all_?reduce|all_?gather|all_?to_?all|reduce_?scatter|broadcast|bcast|nccl|"
    r"horovod|RecvBuf", re.I)
_PIPELINE_LINE = "tf_data"  # the input pipeline's own threads


def trace_files(logdir: str) -> list[str]:
    """The XSpace files under `logdir` (TensorFlow's `plugins/profile/<session>/*.xplane.pb`),
    oldest session first."""
    return sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))


def read_space(path: str):
    """The XSpace protocol buffer in `path`."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError:  # older TensorFlow
        from tensorflow.core.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    return space


def _stat(plane, event, name: str) -> Optional[int]:
    for stat in event.stats:
        if plane.stat_metadata[stat.metadata_id].name == name:
            which = stat.WhichOneof("value")
            return int(getattr(stat, which)) if which in ("int64_value", "uint64_value") else None
    return None


def _events(space):
    """(plane, line, event, name, start_ps, end_ps) of every event of the host and device
    planes."""
    for plane in space.planes:
        host = plane.name.startswith("/host:")
        if not host and not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            if not host and not line.name.startswith("Stream"):
                continue  # a device's derived lines (Steps, XLA Ops, ...) repeat its streams
            base = line.timestamp_ns * 1000
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                start = base + event.offset_ps
                yield plane, line, event, name, start, start + event.duration_ps


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif end > start:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _minus(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint `spans` less disjoint `cut` (both sorted)."""
    out, j = [], 0
    for start, end in spans:
        while j < len(cut) and cut[j][1] <= start:
            j += 1
        k = j
        while k < len(cut) and cut[k][0] < end:
            if cut[k][0] > start:
                out.append((start, cut[k][0]))
            start = max(start, cut[k][1])
            k += 1
        if start < end:
            out.append((start, end))
    return out


def _length(spans) -> int:
    return sum(e - s for s, e in spans)


def step_phases(space) -> list[dict[str, Any]]:
    """Each traced call of `space`: {"step": its first step, "calls_steps": its steps
    (steps_per_execution), "ms": wall time a step, and the ms a step of each PHASES}."""
    steps, lines_of_steps, events = [], set(), []
    for plane, line, event, name, start, end in _events(space):
        if name == STEP_EVENT:
            calls = _stat(plane, event, "steps") or 1  # steps_per_execution
            steps.append((start, end, _stat(plane, event, "step_num"), calls))
            lines_of_steps.add((plane.id, plane.name, line.id))
        else:
            events.append((plane.id, plane.name, line.id, line.name, name, start, end))
    spans: dict[str, list[tuple[int, int]]] = {p: [] for p in ("input", "compute", "collective")}
    for plane_id, plane_name, line_id, line_name, name, start, end in events:
        if _INPUT.search(name):
            spans["input"].append((start, end))
        elif (plane_id, plane_name, line_id) in lines_of_steps or end <= start:
            continue  # the Python thread's own events span the whole step
        elif _COLLECTIVE.search(name) or line_name.startswith("collective"):
            spans["collective"].append((start, end))
        elif not line_name.startswith(_PIPELINE_LINE):
            spans["compute"].append((start, end))
    merged = {phase: _union(s) for phase, s in spans.items()}
    found = []
    for start, end, number, calls in sorted(steps):
        window = [(start, end)]

        def within(phase):
            return _union([(max(s, start), min(e, end)) for s, e in merged[phase]
                           if s < end and e > start])

        waiting = within("input")
        computing = _minus(within("compute"), waiting)
        reducing = _minus(_minus(within("collective"), waiting), computing)
        total = end - start
        ps = dict(input=_length(waiting), compute=_length(computing), collective=_length(reducing))
        ps["idle"] = max(0, _length(window) - sum(ps.values()))
        # Per step: a call of steps_per_execution N runs N steps.
        found.append(
            dict(step=number,
                 calls_steps=calls,
                 ms=total / 1e9 / calls,
                 **{
                     k: v / 1e9 / calls
                     for k, v in ps.items()
                 }))
    return found


def rank_phases(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """One rank's mean step over its traced `steps` (ms), and how many there were."""
    n = max(1, len(steps))
    mean = {k: round(sum(s[k] for s in steps) / n, 3) for k in ("ms", ) + PHASES}
    return dict(steps=[s["step"] for s in steps],
                step_ms=mean.pop("ms"),
                **{
                    f"{k}_ms": v
                    for k, v in mean.items()
                })


def summarize(ranks: dict[int, dict[str, Any]],
              steps: tuple[int, int],
              untraced_collectives: bool = False) -> dict[str, Any]:
    """The summary over `ranks` (rank -> rank_phases): every rank's numbers, the slowest rank and
    its phase, and the one line that says it. `untraced_collectives`: the all-reduce runs
    outside TensorFlow's executor (Horovod's background thread), so waiting for the other ranks
    shows as idle: a rank's own time is then its compute and input only."""
    first, last = steps
    which = f"steps {first}-{last}" if first != last else f"step {first}"
    kept = ("steps", "step_ms") + tuple(f"{k}_ms" for k in PHASES)
    traced = {r: {k: p[k] for k in kept} for r, p in sorted(ranks.items()) if p.get("step_ms")}
    summary: dict[str, Any] = dict(steps=[first, last],
                                   ranks={
                                       str(r): p
                                       for r, p in traced.items()
                                   })
    if not traced:
        summary["line"] = f"profile: {which}: no traced step found in the traces"
        return summary

    own = ("compute", "input") if untraced_collectives else ("compute", "input", "idle")

    def outside(p):  # the time a rank spends on its own work, not waiting for the others
        return sum(p[f"{k}_ms"] for k in own)

    def share(p, phase):
        return p[f"{phase}_ms"] / p["step_ms"] if p["step_ms"] else 0.0

    slowest = max(traced, key=lambda r: outside(traced[r]))
    others = [outside(p) for r, p in traced.items() if r != slowest]
    ratio = outside(traced[slowest]) / statistics.median(others) if others and statistics.median(
        others) > 0 else None
    median_step = statistics.median(p["step_ms"] for p in traced.values())
    if ratio is not None and ratio >= SLOW:
        p = traced[slowest]
        phase = max(own, key=lambda k: p[f"{k}_ms"])
        summary["slowest"] = dict(rank=slowest,
                                  ratio=round(ratio, 2),
                                  phase=phase,
                                  share=round(share(p, phase), 3))
        line = (f"profile: rank {slowest} is {ratio:.1f}x the median rank's time outside "
                f"collectives: {100 * share(p, phase):.0f} % {WORDS[phase]} ({which}, "
                f"{p['step_ms']:.0f} ms a step; the other ranks wait for it in collectives)")
        if untraced_collectives:
            line += "; Horovod's all-reduce is not in the trace: the others' wait shows as idle"
        elif share(p, "collective") >= 0.25:  # what the all-reduce costs with no rank to wait for
            line += (f"; collectives still take {100 * share(p, 'collective'):.0f} % of its "
                     "own step")
    else:
        # No rank holds the others up: the phase of the typical rank's step.
        rank = min(traced, key=lambda r: abs(traced[r]["step_ms"] - median_step))
        p = traced[rank]
        phase = max(PHASES, key=lambda k: p[f"{k}_ms"])
        summary["slowest"] = dict(rank=None,
                                  ratio=round(ratio, 2) if ratio else None,
                                  phase=phase,
                                  share=round(share(p, phase), 3))
        alone = "" if len(traced) == 1 else f"no rank is {SLOW}x slower than the others: "
        line = (f"profile: {alone}the step is {100 * share(p, phase):.0f} % {WORDS[phase]} "
                f"({which}, {p['step_ms']:.0f} ms a step)")
    summary["line"] = line
    return summary
