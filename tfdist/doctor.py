"""Pre-flight checks of one task, each a small function that returns one `Result` line.

Imports no TensorFlow: whether TensorFlow loads with tf-keras, and whether Horovod imports, is
asked of a child Python process (`start_probe`), so a broken or slow TensorFlow install is reported
instead of hanging or crashing the check itself. The `tfdist doctor` command prints the results.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from tfdist.cluster import Cluster, ClusterError, Roles, build_roles, check_port_free, detect
from tfdist.cluster.gpus import gpu_notes, placement_check

OK, INFO, WARN, PROBLEM, SKIP = "ok", "info", "warn", "PROBLEM", "skip"
# In the order they print: the fast ones first, while the TensorFlow probe runs beside them.
CHECKS = ("cluster", "port", "hosts", "gpus", "model_dir", "tensorflow", "horovod")

_GPU_OPTION = "sbatch --gpus-per-node={n} (or --gres=gpu:{n})"
_PROBE_MARK = "TFDIST_DOCTOR_PROBE "
# Run by the child: the same imports as a training script, in the same order.
_PROBE = f"""
import importlib.util, json
out = {{}}
try:
    import tfdist
    from tfdist.keras_check import require_legacy_keras
    require_legacy_keras()
    import tensorflow as tf, tf_keras
    found = tf.config.list_physical_devices("GPU")
    out.update(tensorflow=tf.__version__, tf_keras=tf_keras.__version__, tf_gpus=len(found),
               tf_gpu_cc=[tf.config.experimental.get_device_details(g).get("compute_capability")
                          for g in found])
except BaseException as e:
    out["tensorflow_error"] = f"{{type(e).__name__}}: {{e}}"
if "tensorflow_error" not in out:
    if importlib.util.find_spec("horovod") is None:
        out["horovod_missing"] = True
    else:
        try:
            from tfdist.distribute.horovod_setup import import_horovod_keras
            hvd = import_horovod_keras()
            import horovod
            out.update(horovod=horovod.__version__, gloo=bool(hvd.gloo_built()),
                       mpi=bool(hvd.mpi_built()), nccl=int(hvd.nccl_built()))
        except BaseException as e:
            out["horovod_error"] = f"{{type(e).__name__}}: {{e}}"
print({_PROBE_MARK!r} + json.dumps(out), flush=True)
"""


@dataclasses.dataclass(frozen=True)
class Result:
    check: str
    status: str  # OK, INFO, WARN, PROBLEM or SKIP
    message: str

    def line(self) -> str:
        return f"{self.status:<9}{self.check}: {self.message}"


# --- cluster, port, hosts ---------------------------------------------------------------------


def check_cluster(
    strategy: str,
    num_ps: int = 1,
    evaluator: bool = False,
    port: Optional[int] = None,
    environ: Optional[Mapping[str,
                              str]] = None) -> tuple[Result, Optional[Cluster], Optional[Roles]]:
    """The environment and this task's role; a ClusterError is a problem, with its message."""
    try:
        cluster = detect(environ)
        roles = build_roles(cluster, strategy, num_ps=num_ps, evaluator=evaluator, port=port)
    except ClusterError as e:
        return Result("cluster", PROBLEM, str(e)), None, None
    role = "" if roles.task_type is None else f", task {roles.task_type}:{roles.task_index}"
    job = f", job {cluster.job_id}" if cluster.job_id else ""
    message = (f"{cluster.environment}{job}: rank {cluster.rank} of {cluster.world_size} on "
               f"{cluster.host} (node {cluster.node_rank + 1} of {len(cluster.nodes)}, local rank "
               f"{cluster.local_rank} of {cluster.local_world_size}), strategy {roles.strategy}"
               f"{role}")
    return Result("cluster", OK, message), cluster, roles


def check_port(cluster: Cluster, roles: Roles) -> Result:
    """This task's server port can be bound here (when its role runs a server)."""
    if cluster.world_size == 1:
        return Result("port", OK, "one task: it runs no server, no port needed")
    if roles.port is None:
        return Result(
            "port", OK, f"rank {cluster.rank} runs no server under strategy "
            f"{roles.strategy}; no port needed")
    try:
        check_port_free(roles.port, cluster.host, cluster.rank)
    except ClusterError as e:
        return Result("port", PROBLEM, str(e))
    return Result("port", OK, f"{roles.port} free on {cluster.host} (rank {cluster.rank})")


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address == "::1"


def check_hosts(cluster: Cluster,
                resolve: Callable[..., Any] = socket.getaddrinfo,
                timeout: float = 10.0) -> Result:
    """Every node name resolves here, and no other node resolves to this machine's loopback
    (in a job whose other nodes have network addresses)."""
    nodes = list(cluster.nodes)
    failed: dict[str, str] = {}
    only_loopback: dict[str, bool] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(nodes)))
    futures = {node: pool.submit(resolve, node, None) for node in nodes}
    done, _ = concurrent.futures.wait(futures.values(), timeout=timeout)
    pool.shutdown(wait=False)  # a lookup still hanging must not hold up the report
    for node, future in futures.items():
        if future not in done:
            failed[node] = f"no answer within {timeout:.0f} s"
        elif future.exception() is not None:
            e = future.exception()
            failed[node] = getattr(e, "strerror", None) or str(e)
        else:
            only_loopback[node] = all(_is_loopback(info[4][0]) for info in future.result())
    # All tasks on this machine (TF_CONFIG with localhost, tfdist launch) is fine; a job with real
    # network addresses where another node's name leads back here is not.
    loopback = [node for node, local in only_loopback.items()
                if local and node != cluster.host] if not all(only_loopback.values()) else []
    if failed:
        names = ", ".join(f"{node} ({why})" for node, why in failed.items())
        return Result(
            "hosts", PROBLEM,
            f"cannot resolve {names} from {cluster.host}; the tasks connect to each other by "
            "these names. Check the node names (SLURM_STEP_NODELIST/SLURM_JOB_NODELIST, or the "
            "hosts in TF_CONFIG) and that DNS or /etc/hosts on this node knows them.")
    if loopback:
        return Result(
            "hosts", PROBLEM,
            f"{', '.join(loopback)} resolve(s) to a loopback address on {cluster.host}, so this "
            "task would connect to itself instead of that node. Fix the node's entry in "
            "/etc/hosts (or DNS) to its network address.")
    return Result("hosts", OK, f"{len(nodes)} node name(s) resolve: {_short(nodes)}")


def _short(names: list[str], keep: int = 4) -> str:
    return ", ".join(names[:keep]) + (f", ... ({len(names)} in all)" if len(names) > keep else "")


# --- GPUs ----------------------------------------------------------------------------------


def _gpu_count(value: str) -> int:
    """A GPU count from a Slurm value: "2", "a100:2", "a100:1,v100:1", or an id list "0,1,4-5"."""
    total = 0
    for part in value.split(","):
        part = part.strip().split("(")[0]  # "0-1(IDX:0-1)" in some Slurm versions
        if not part:
            continue
        if ":" in part:
            total += int(part.rsplit(":", 1)[1])
        elif "-" in part:
            low, high = part.split("-")
            total += int(high) - int(low) + 1
        else:
            total += 1
    return total


def gpus_requested(environ: Mapping[str, str]) -> Optional[tuple[int, str, bool]]:
    """(count, variable=value, per task?) of the GPUs Slurm gave this task or its node, or None."""
    value = environ.get("SLURM_GPUS_PER_TASK")
    if value:
        return _gpu_count(value) if ":" in value else int(
            value), f"SLURM_GPUS_PER_TASK={value}", True
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"):
        value = environ.get(name)
        if value:
            count = int(value) if value.isdigit() else _gpu_count(value)
            return count, f"{name}={value}", False
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = environ.get(name)
        if value:
            return _gpu_count(value), f"{name}={value}", False
    return None


def nvidia_smi_count(timeout: float = 20.0) -> tuple[Optional[int], str]:
    """(GPUs `nvidia-smi -L` lists, how that was learnt); None when it is absent or fails."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None, "no nvidia-smi on PATH"
    try:
        r = subprocess.run([path, "-L"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"nvidia-smi -L failed ({e})"
    if r.returncode != 0:
        why = (r.stdout + r.stderr).strip().splitlines()
        return 0, f"nvidia-smi -L failed ({why[0] if why else f'exit {r.returncode}'})"
    count = sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))
    return count, f"nvidia-smi -L lists {count}"


def gpus_seen(environ: Mapping[str, str]) -> tuple[int, str]:
    """(GPUs this task can use, how that was learnt) from CUDA_VISIBLE_DEVICES and nvidia-smi."""
    smi, smi_note = nvidia_smi_count()
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return smi or 0, f"CUDA_VISIBLE_DEVICES unset, {smi_note}"
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    # CUDA stops at the first invalid entry; Slurm writes NoDevFiles when it hides every GPU.
    visible = 0
    for entry in entries:
        if entry in ("NoDevFiles", ) or entry.startswith("-"):
            break
        visible += 1
    seen = visible if smi is None else min(visible, smi)
    return seen, f"CUDA_VISIBLE_DEVICES={cvd!r}, {smi_note}"


def check_gpus(environ: Optional[Mapping[str, str]] = None,
               local_tasks: int = 1,
               seen: Optional[tuple[int, str]] = None) -> Result:
    """GPUs seen by this task (`gpus_seen`) against the GPUs Slurm allocated to it or its node."""
    environ = os.environ if environ is None else environ
    seen, how = gpus_seen(environ) if seen is None else seen
    asked = gpus_requested(environ)
    under_slurm = "SLURM_JOB_ID" in environ
    if asked is None:
        if seen == 0:
            return Result(
                "gpus", WARN, f"no GPU visible ({how}): TensorFlow will train on the CPU. Fine "
                "for a CPU job; for GPUs request them with " + _GPU_OPTION.format(n="N") + ".")
        if under_slurm:
            return Result(
                "gpus", WARN, f"this task sees {seen} GPU(s) ({how}) but the job requested none; "
                f"request them with {_GPU_OPTION.format(n=seen)} so Slurm reserves them for "
                "this job.")
        return Result("gpus", OK, f"{seen} GPU(s) visible ({how})")
    count, source, per_task = asked
    # Tasks of one node either all see the node's GPUs (each picks one by local rank) or are
    # bound to an equal share of them (--gpu-bind, --gpus-per-task).
    if seen == count or (not per_task and local_tasks > 1 and seen * local_tasks == count):
        return Result("gpus", OK, f"{seen} GPU(s) seen, as requested ({source}; {how})")
    where = "this task" if per_task else "this node"
    if seen < count:
        todo = ("Check that the job script does not set CUDA_VISIBLE_DEVICES itself and that the "
                "node's driver works (nvidia-smi -L); or request what the node can give: "
                f"{_GPU_OPTION.format(n=seen)}.")
    else:
        todo = (f"TensorFlow would also use GPUs not allocated to this job. Request them with "
                f"{_GPU_OPTION.format(n=seen)}, or leave CUDA_VISIBLE_DEVICES to Slurm.")
    return Result(
        "gpus", PROBLEM, f"Slurm allocated {count} GPU(s) to {where} ({source}), but this "
        f"task sees {seen} ({how}). {todo}")


# --- run directory ---------------------------------------------------------------------------

_NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm")


def _local_root(path: Path) -> str:
    return next(root for root in _NODE_LOCAL if path.is_relative_to(root))


def check_model_dir(model_dir: Optional[str], multi_node: bool = False) -> Result:
    """The run directory, or the nearest existing parent it would be created in, is writable."""
    if not model_dir:
        return Result("model_dir", SKIP, "no --model_dir given")
    path = Path(model_dir).expanduser().absolute()
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        what = "is" if existing == path else f"cannot be created: {existing} is"
        return Result(
            "model_dir", PROBLEM, f"{path} {what} a file, not a directory. Choose another "
            "--model_dir, or move that file away.")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".tfdist-doctor-"):
            pass
    except OSError as e:
        reason = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e))
        return Result(
            "model_dir", PROBLEM, f"cannot write in {existing} ({reason}), so the chief cannot "
            f"write checkpoints in {path}. Choose a --model_dir on a file system you can write "
            f"(project or scratch space), or fix its permissions (ls -ld {existing}).")
    state = "writable" if existing == path else f"will be created in {existing} (writable)"
    if multi_node and any(path.is_relative_to(root) for root in _NODE_LOCAL):
        return Result(
            "model_dir", WARN, f"{path} {state}, but it is under {_local_root(path)}, which "
            "is usually node-local, and this job spans several nodes: a job resumed on other "
            "nodes would not find its checkpoints. Use a directory on a shared file system.")
    return Result("model_dir", OK, f"{path} {state}")


# --- TensorFlow and Horovod, asked of a child process ----------------------------------------


def start_probe(python: str = sys.executable) -> subprocess.Popen:
    """Start the child that imports tfdist, TensorFlow with tf-keras and Horovod's Keras API."""
    env = dict(os.environ)
    # The child imports the same tfdist as this process (also when it runs from a source tree).
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), here) if p)
    return subprocess.Popen([python, "-c", _PROBE],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True,
                            env=env)


def finish_probe(probe: subprocess.Popen, timeout: float) -> dict[str, Any]:
    """The child's findings; {"probe_error": ...} when it hangs or dies without reporting."""
    try:
        out, err = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.communicate()
        return {
            "probe_error": f"importing tfdist and TensorFlow did not finish within "
            f"{timeout:.0f} s",
            "timeout": True
        }
    for line in out.splitlines():
        if line.startswith(_PROBE_MARK):
            return json.loads(line[len(_PROBE_MARK):])
    last = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["no output"]
    return {
        "probe_error":
        f"python exited with status {probe.returncode} while importing "
        f"tfdist and TensorFlow ({last[0].strip()})"
    }


def check_tensorflow(probe: Mapping[str, Any], gpus: int = 0) -> Result:
    """TensorFlow loads with tf-keras as tf.keras; sees the GPUs the node shows."""
    if "probe_error" in probe:
        todo = ("Raise --tf_timeout if the file system is slow, else run "
                "`python -c 'import tfdist, tensorflow'` to see where it hangs."
                if probe.get("timeout") else
                "Run `python -c 'import tfdist, tensorflow'` in the job's environment to see why.")
        return Result("tensorflow", PROBLEM, f"{probe['probe_error']}. {todo}")
    if "tensorflow_error" in probe:
        error = probe["tensorflow_error"]
        if "KerasVersionError" in error:
            todo = ("Something imports TensorFlow with Keras 3 before tfdist (a sitecustomize, "
                    "PYTHONSTARTUP or a wrapper): remove it or `export TF_USE_LEGACY_KERAS=1`.")
        else:
            todo = ("tfdist needs TensorFlow 2.18 with tf-keras 2.18: "
                    "pip install 'tensorflow~=2.18.0' 'tf-keras~=2.18.0' (or pip install tfdist).")
        return Result("tensorflow", PROBLEM, f"TensorFlow with tf-keras does not load: {error}. "
                      f"{todo}")
    tf_version, keras_version = probe["tensorflow"], probe["tf_keras"]
    versions = f"TensorFlow {tf_version}, tf.keras is tf-keras {keras_version}"
    if tf_version.split(".")[:2] != keras_version.split(".")[:2]:
        minor = ".".join(tf_version.split(".")[:2])
        return Result(
            "tensorflow", WARN, f"{versions}: their versions differ; install the tf-keras "
            f"made for this TensorFlow: pip install 'tf-keras~={minor}.0'.")
    if gpus and probe.get("tf_gpus", 0) < gpus:
        return Result(
            "tensorflow", WARN, f"{versions}, but TensorFlow sees {probe['tf_gpus']} of the "
            f"{gpus} GPU(s) this task has: it would train on the CPU. Install a TensorFlow "
            "built for CUDA (pip install 'tensorflow[and-cuda]~=2.18.0') or load the CUDA "
            "modules your site needs.")
    return Result("tensorflow", OK, f"{versions}, {probe.get('tf_gpus', 0)} GPU(s) in TensorFlow")


def check_horovod(probe: Mapping[str, Any], strategy: str) -> Result:
    """horovod.tensorflow.keras imports: a problem under --strategy=horovod, else information."""
    needed = strategy == "horovod"
    if "probe_error" in probe or "tensorflow_error" in probe:
        return Result("horovod", SKIP, "not checked: TensorFlow did not load (see above)")
    from tfdist.distribute.horovod_setup import INSTALL_HINT  # TF-free

    if probe.get("horovod_missing"):
        if needed:
            return Result(
                "horovod", PROBLEM,
                f"Horovod is not installed, but --strategy=horovod needs it. {INSTALL_HINT}")
        return Result("horovod", INFO, "not installed (only --strategy=horovod needs it)")
    if "horovod_error" in probe:
        error = probe["horovod_error"]
        if not needed:
            return Result(
                "horovod", INFO, "horovod.tensorflow.keras does not import (only "
                f"--strategy=horovod needs it): {error}")
        # tfdist's import_horovod_keras says what to do; anything else gets the same advice.
        prefix = "HorovodSetupError: "
        message = (error[len(prefix):] if error.startswith(prefix) else
                   f"Cannot import horovod.tensorflow.keras ({error}). {INSTALL_HINT}")
        return Result("horovod", PROBLEM, message)
    built = ", ".join(f"{name} {'yes' if probe.get(key) else 'no'}"
                      for name, key in (("gloo", "gloo"), ("MPI", "mpi"), ("NCCL", "nccl")))
    if needed and not probe["gloo"]:
        return Result(
            "horovod", WARN, f"Horovod {probe['horovod']} ({built}): built without gloo, so it "
            "runs only under mpirun/horovodrun with MPI, not under a plain srun; rebuild with "
            "HOROVOD_WITH_GLOO=1 (make horovod).")
    return Result("horovod", OK, f"Horovod {probe['horovod']} imports ({built})")


# --- all together ----------------------------------------------------------------------------


def run_checks(strategy: str = "auto",
               num_ps: int = 1,
               evaluator: bool = False,
               port: Optional[int] = None,
               model_dir: Optional[str] = None,
               skip: tuple[str, ...] = (),
               tf_timeout: float = 180.0,
               task_gpus: str = "auto",
               report: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """Every check not in `skip`, in CHECKS order; `report` sees each result as it is known."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValueError(f"Unknown check(s) {', '.join(unknown)}: expected some of "
                         f"{', '.join(CHECKS)} (--skip).")
    results: list[Result] = []

    def add(result: Result) -> None:
        results.append(result)
        report(result)

    probe = None
    if "tensorflow" not in skip or "horovod" not in skip:
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
        gpus = 0
        if "gpus" not in skip:
            seen = gpus_seen(os.environ)
            gpus = seen[0]
            add(check_gpus(local_tasks=cluster.local_world_size if cluster else 1, seen=seen))
            placed = cluster and placement_check(cluster, roles, os.environ, gpus, task_gpus)
            if placed:  # which GPU(s) this task takes; tasks that would share one: PROBLEM
                add(Result("gpus", *placed))
        if "model_dir" not in skip:
            add(
                check_model_dir(model_dir,
                                multi_node=cluster is not None and len(cluster.nodes) > 1))
        if probe is not None:
            findings = finish_probe(probe, tf_timeout)
            probe = None
            if "tensorflow" not in skip:
                add(check_tensorflow(findings, gpus))
            if "horovod" not in skip:
                add(check_horovod(findings, roles.strategy if roles else strategy))
            notes = [] if "gpus" in skip else gpu_notes(findings,
                                                        roles.strategy if roles else strategy)
            for status, message in notes:  # NCCL in Horovod, mixed precision
                add(Result("gpus", status, message))
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
    "CHECKS", "Result", "check_cluster", "check_gpus", "check_horovod", "check_hosts",
    "check_model_dir", "check_port", "check_tensorflow", "finish_probe", "gpus_requested",
    "gpus_seen", "run_checks", "start_probe", "summary"
]
