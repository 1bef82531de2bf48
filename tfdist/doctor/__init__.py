"""Pre-flight checks of one task, each a small function that returns one `Result` line, split by
what they check: placement (cluster, port, hosts), gpus, rundir (model_dir), software
(TensorFlow, Horovod, from a child process: probe). The `tfdist doctor` command prints them.

Imports no TensorFlow: whether TensorFlow loads with tf-keras, and whether Horovod imports, is
asked of a child Python process.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

from tfdist.cluster.gpus import slurm_gpus_requested as gpus_requested
from tfdist.doctor.gpus import check_gpus, check_placement, gpu_notes, gpus_seen
from tfdist.doctor.placement import check_cluster, check_hosts, check_network, check_port
from tfdist.doctor.probe import finish_probe, start_probe
from tfdist.doctor.result import INFO, OK, PROBLEM, SKIP, WARN, Result
from tfdist.doctor.rundir import check_model_dir
from tfdist.doctor.software import check_horovod, check_keras3, check_tensorflow
from tfdist.errors import ConfigError

# In the order they print: the fast ones first, while the TensorFlow probe runs beside them.
CHECKS = ("cluster", "port", "hosts", "network", "gpus", "model_dir", "tensorflow", "keras",
          "horovod")


def run_checks(strategy: str = "auto",
               num_ps: Optional[int] = None,
               evaluator: Optional[bool] = None,
               port: Optional[int] = None,
               model_dir: Optional[str] = None,
               skip: tuple[str, ...] = (),
               tf_timeout: float = 180.0,
               task_gpus: str = "auto",
               report: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """Every check not in `skip`, in CHECKS order; `report` sees each result as it is known."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ConfigError(f"Unknown check(s) {', '.join(unknown)}: expected some of "
                          f"{', '.join(CHECKS)} (--skip).")
    results: list[Result] = []

    def add(result: Result) -> None:
        results.append(result)
        report(result)

    probe = None
    if "tensorflow" not in skip or "horovod" not in skip:  # keras: only beside one of them
        probe = start_probe()  # runs while the quick checks below do
    try:
        result, cluster, roles = check_cluster(strategy, num_ps, evaluator, port)
        if "cluster" not in skip:
            add(result)
        for name, check in (("port", lambda: check_port(cluster, roles)),
                            ("hosts", lambda: check_hosts(cluster))):
            if name in skip:
                continue
            add(check() if cluster is not None else Result(
                name, SKIP, "not checked: the cluster was not detected (see above)"))
        network = cluster and "network" not in skip and check_network(cluster, roles)
        if network:  # several nodes: what the job opens to the network
            add(network)
        gpus = 0
        if "gpus" not in skip:
            seen = gpus_seen(os.environ)
            gpus = seen[0]
            add(check_gpus(local_tasks=cluster.local_world_size if cluster else 1, seen=seen))
            placed = cluster and check_placement(cluster, roles, os.environ, gpus, task_gpus)
            if placed:  # which GPU(s) this task takes; tasks that would share one: PROBLEM
                add(placed)
        if "model_dir" not in skip:
            add(
                check_model_dir(model_dir,
                                multi_node=cluster is not None and len(cluster.nodes) > 1))
        if probe is not None:
            findings = finish_probe(probe, tf_timeout)
            probe = None
            if "tensorflow" not in skip:
                add(check_tensorflow(findings, gpus))
            if "keras" not in skip:
                add(check_keras3(findings))
            if "horovod" not in skip:
                add(check_horovod(findings, roles.strategy if roles else strategy))
            notes = [] if "gpus" in skip else gpu_notes(findings,
                                                        roles.strategy if roles else strategy)
            for note in notes:  # NCCL in Horovod, mixed precision
                add(note)
    finally:
        if probe is not None:  # an exception above: do not leave the child behind
            probe.kill()
            probe.communicate()
    return results


def summary(results: list[Result]) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (OK, INFO, WARN, PROBLEM, SKIP)}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    problems = [r.check for r in results if r.status == PROBLEM]
    if problems:
        return (f"tfdist doctor: {tally}: training would fail ({', '.join(problems)}); fix the "
                "PROBLEM lines above.")
    return f"tfdist doctor: no problems ({tally})."


__all__ = [
    "CHECKS", "INFO", "OK", "PROBLEM", "SKIP", "WARN", "Result", "check_cluster", "check_gpus",
    "check_horovod", "check_hosts", "check_keras3", "check_network", "check_model_dir",
    "check_placement", "check_port", "check_tensorflow", "finish_probe", "gpu_notes",
    "gpus_requested", "gpus_seen", "run_checks", "start_probe", "summary"
]
