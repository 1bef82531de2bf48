"""Which GPUs this task uses: decided from its environment, before TensorFlow sees a GPU.

What a task of a Slurm 22.05 step sees (each task of the node, N GPUs on it):
- `--gres=gpu:N` or `--gpus-per-node=N`, several tasks per node: every task sees all N
  (`CUDA_VISIBLE_DEVICES=0,...,N-1`, `SLURM_GPUS_ON_NODE=N`), so each must pick one itself, or all
  of them land on the first GPU.
- `--gpus-per-task=G`: since Slurm 21.08 this implies `--gpu-bind=per_task:G`, so each task sees
  only its own G GPUs; older Slurm (or `--gpu-bind=none`) shows every task all of them.
- `--gpu-bind=closest|map_gpu:...|single:...` (`SLURM_GPU_BIND`): each task sees its share.
- The numbers in `CUDA_VISIBLE_DEVICES` are indices within the step's GPUs when the task/cgroup
  plugin constrains devices, else the node's; `SLURM_STEP_GPUS`/`SLURM_JOB_GPUS` name the node's.
- MIG: `CUDA_VISIBLE_DEVICES` holds `MIG-<uuid>` entries. CUDA 11/12 show one process only the
  first MIG device it lists (NVIDIA's MIG user guide), so a task is given one by the variable.

An engine needs one GPU per task (horovod), an equal share of the node's GPUs (multi_worker: one
each with one task per GPU, all with one task per node), all the task's GPUs (mirrored) or none
(parameter servers). A layout where the tasks of a node would share GPUs is a ClusterError naming
the Slurm option to change. No TensorFlow here: tfdist.distribute.devices applies the plan,
and `tfdist doctor` gives its verdict on it (tfdist.doctor.gpus).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.roles import Roles
from tfdist.cluster.tf_config import ordered_tasks

VISIBLE = "CUDA_VISIBLE_DEVICES"
# Set (as "RANK:VALUE") beside a CUDA_VISIBLE_DEVICES that tfdist narrowed for task RANK itself
# (`tfdist env --format=shell`), so that a later tfdist.init() sees the task's own GPUs.
PINNED = env_vars.GPUS.name
NEEDS = ("one", "share", "all", "none")
TASK_GPUS = ("auto", ) + NEEDS  # --task_gpus
_PER_TASK = "SLURM_GPUS_PER_TASK"
_ON_NODE = "SLURM_GPUS_ON_NODE"
_BIND = "SLURM_GPU_BIND"
_NODE_IDS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
_ONE_EACH = ("--ntasks-per-node=<GPUs per node> with --gpus-per-task=1 (or --gres=gpu:<GPUs per "
             "node>)")


@dataclasses.dataclass(frozen=True)
class GpuPlan:
    """The GPUs of one task: what it sees and which of those it uses."""

    need: str  # one, share, all or none
    visible: Optional[tuple[str, ...]]  # CUDA_VISIBLE_DEVICES entries; None when it is unset
    count: Optional[int]  # GPUs this task sees; None: unknown until TensorFlow lists them
    use: Optional[tuple[int, ...]]  # indices into the GPUs it sees (TensorFlow's GPU:i)
    node_ids: tuple[str, ...]  # how the node names the GPUs used, for the logs
    slot: int  # this task among the node's tasks that use GPUs
    slots: int
    own: bool  # the GPUs seen are this task's alone (Slurm bound them), not the node's
    layout: str  # what Slurm gave, in words
    notes: tuple[str, ...] = ()  # worth a warning, not an error

    @property
    def narrows(self) -> bool:
        """True when the task uses fewer GPUs than it sees."""
        return self.use is not None and self.count is not None and len(self.use) < self.count

    @property
    def mig(self) -> bool:
        return any(e.startswith("MIG-") for e in self.visible or ())

    @property
    def mechanism(self) -> str:
        """How the choice is applied: nothing to do, the CUDA_VISIBLE_DEVICES variable (MIG: CUDA
        enumerates only the first MIG device listed) or tf.config.set_visible_devices (every
        GPU stays visible to CUDA, so NCCL may still reach the node's other GPUs directly)."""
        if not self.narrows:
            return "none"
        return VISIBLE if self.mig else "set_visible_devices"

    @property
    def visible_value(self) -> Optional[str]:
        """CUDA_VISIBLE_DEVICES naming just the GPUs used, when the entries are known."""
        if self.use is None or self.visible is None:
            return None
        return ",".join(self.visible[i] for i in self.use)

    def summary(self) -> str:
        """For the start-up line: "GPU 1 of node", "GPUs 0,1 of node", "no GPU"."""
        if self.use is None:
            how = "one by local rank" if self.need == "one" else self.need
            return f"GPUs chosen when TensorFlow lists them ({how}; {VISIBLE} unset)"
        if not self.use:
            return "no GPU" + (" (none asked for)" if self.need == "none" and self.count else "")
        noun = "GPU" if len(self.use) == 1 else "GPUs"
        return f"{noun} {','.join(self.node_ids)} of node"

    def as_dict(self) -> dict[str, Any]:
        return {
            "need": self.need,
            "visible": list(self.visible) if self.visible is not None else None,
            "count": self.count,
            "use": list(self.use) if self.use is not None else None,
            "node_gpus": list(self.node_ids),
            "summary": self.summary(),
            "layout": self.layout,
            "mechanism": self.mechanism,
            # what the variable would be to show the task only its GPUs (when that narrows it)
            "cuda_visible_devices": self.visible_value if self.narrows else None,
            "notes": list(self.notes),
        }


def parse_visible(value: str) -> tuple[str, ...]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: it stops at the first invalid entry; Slurm writes
    NoDevFiles when it has no device file to name."""
    entries = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry or entry == "NoDevFiles" or entry.startswith("-"):
            break
        entries.append(entry)
    return tuple(entries)


def slurm_count(value: str) -> int:
    """GPUs in a Slurm count: "2", "a100:2", "a100:1,v100:1"."""
    try:
        return sum(int(part.rsplit(":", 1)[-1]) for part in value.split(",") if part.strip())
    except ValueError:
        raise ClusterError(f"Cannot read a GPU count from {value!r}; expected e.g. '2' or "
                           "'a100:2'.") from None


def _id_count(value: str) -> int:
    """GPUs in a Slurm id list: "0,1,4-5" (some Slurm versions add "(IDX:0-1)")."""
    total = 0
    for part in (p.strip().split("(")[0] for p in value.split(",")):
        if "-" in part:
            low, high = part.split("-")
            total += int(high) - int(low) + 1
        elif part:
            total += 1
    return total


def slurm_gpus_requested(environ: Mapping[str, str]) -> Optional[tuple[int, str, bool]]:
    """(count, variable=value, per task?) of the GPUs Slurm gave this task or its node, or None."""
    for name, per_task in ((_PER_TASK, True), (_ON_NODE, False), ("SLURM_GPUS_PER_NODE", False)):
        if environ.get(name):
            return slurm_count(environ[name]), f"{name}={environ[name]}", per_task
    for name in _NODE_IDS:
        if environ.get(name):
            return _id_count(environ[name]), f"{name}={environ[name]}", False
    return None


def _bind(environ: Mapping[str, str]) -> str:
    """SLURM_GPU_BIND without its "verbose" flag: "", "none", "closest", "per_task:1", ..."""
    parts = [p for p in environ.get(_BIND, "").split(",") if p and p != "verbose"]
    return ",".join(parts)


def engine_need(roles: Roles) -> str:
    """What the strategy asks of this task's GPUs (--task_gpus=auto)."""
    if roles.strategy in ("horovod", "one_device"):
        return "one"
    if roles.strategy == "multi_worker":
        return "share"
    if roles.strategy == "parameter_server":
        return "share" if roles.task_type == "worker" else "none"
    return "all"  # mirrored, central_storage, auto in one task


def gpu_slot(cluster: Cluster, roles: Roles) -> tuple[int, int]:
    """(this task's index, their number) among the tasks of its node that use GPUs."""
    if roles.strategy != "parameter_server" or roles.tf_config is None:
        return cluster.local_rank, cluster.local_world_size
    if cluster.tf_config is not None:  # the user's TF_CONFIG: ranks in TensorFlow's order
        types = [t for t, _, _ in ordered_tasks(roles.tf_config)]
    else:  # tfdist's own: the chief, the ps, the workers (, the evaluator), in rank order
        types = [t for t, hosts in roles.tf_config["cluster"].items() for _ in hosts]
    here = [
        r for r in range(cluster.world_size)
        if cluster.task_hosts[r] == cluster.host and types[r] == "worker"
    ]
    return (here.index(cluster.rank) if cluster.rank in here else 0), max(1, len(here))


def plan_for(cluster: Cluster,
             roles: Roles,
             environ: Mapping[str, str],
             task_gpus: str = "auto",
             visible_count: Optional[int] = None,
             slot: Optional[tuple[int, int]] = None) -> GpuPlan:
    """This task's GPUs under `roles`; `task_gpus` overrides what the strategy needs."""
    if task_gpus not in TASK_GPUS:
        raise ClusterError(f"--task_gpus={task_gpus!r}: expected one of {', '.join(TASK_GPUS)}.")
    need = engine_need(roles) if task_gpus == "auto" else task_gpus
    # Asked for explicitly, GPUs go to every task of the node, in local-rank order.
    index, slots = slot or (gpu_slot(cluster, roles) if task_gpus == "auto" else
                            (cluster.local_rank, cluster.local_world_size))
    return plan_gpus(environ,
                     need,
                     index,
                     slots,
                     rank=cluster.rank,
                     visible_count=visible_count,
                     who=roles.strategy)


def plan_gpus(environ: Mapping[str, str],
              need: str,
              slot: int = 0,
              slots: int = 1,
              rank: int = 0,
              visible_count: Optional[int] = None,
              who: str = "this engine") -> GpuPlan:
    """The GPUs of task `slot` of the `slots` tasks on its node that use GPUs.

    `visible_count` is how many GPUs the task sees when CUDA_VISIBLE_DEVICES is unset (what
    TensorFlow or nvidia-smi lists); without either the count stays unknown.
    """
    if need not in NEEDS:
        raise ClusterError(f"GPU need {need!r}: expected one of {', '.join(NEEDS)}.")
    raw = environ.get(VISIBLE)
    visible = parse_visible(raw) if raw is not None else None
    count = len(visible) if visible is not None else visible_count
    per_task = slurm_count(environ[_PER_TASK]) if environ.get(_PER_TASK) else None
    on_node = slurm_count(environ[_ON_NODE]) if environ.get(_ON_NODE) else None
    bind = _bind(environ)
    own, layout = _ownership(environ, raw, count, per_task, bind, slots, rank)
    plan = dict(need=need, visible=visible, count=count, slot=slot, slots=slots, own=own)

    if need == "none" or count == 0:
        return _plan(environ, plan, (), layout)
    if count is None:
        return GpuPlan(use=None, node_ids=(), layout=layout, **plan)
    notes = []
    if own:
        if need in ("one", "share") and on_node is not None and slots > on_node:
            raise ClusterError(
                f"{slots} tasks on this node use GPUs, but Slurm gave the step {on_node} GPU(s) "
                f"here ({layout}, {_ON_NODE}={environ[_ON_NODE]}): tasks would share a GPU. Give "
                f"each task its own: {_ONE_EACH}.")
        use = (0, ) if need == "one" else tuple(range(count))
        if need == "one" and count > 1:
            notes.append(f"this task was given {count} GPUs but {who} uses one per task: "
                         f"{count - 1} stay idle. Request --gpus-per-task=1 (and one task per "
                         "GPU).")
    elif need == "all":
        use = tuple(range(count))
        if slots > 1:
            notes.append(f"all {slots} tasks of this node use all its {count} GPU(s) (--task_gpus"
                         "=all): they share them.")
    else:
        if count < slots:
            raise ClusterError(
                f"{slots} tasks on this node use GPUs but they see {count} ({layout}): {who} "
                f"needs a GPU per task, so tasks would share one and run out of memory or crawl. "
                f"Launch at most {count} task(s) per node (--ntasks-per-node={count}), or on "
                f"nodes with enough GPUs request --gpus-per-node={slots}; one GPU per task: "
                f"{_ONE_EACH}.")
        per = 1 if need == "one" else count // slots
        use = tuple(range(slot * per, (slot + 1) * per))
        idle = count - per * slots
        if idle:
            notes.append(f"{idle} of the node's {count} GPUs stay idle: {slots} task(s) use "
                         f"{per} each. Match --ntasks-per-node to the GPUs per node.")
    if len(use) > 1 and any(visible[i].startswith("MIG-") for i in use if visible):
        notes.append("CUDA shows a process only the first MIG device it lists, so this task "
                     "uses one: run one task per MIG device (--gpus-per-task=1) to use them all.")
        use = use[:1]
    return _plan(environ, plan, use, layout, tuple(notes))


def _plan(environ, plan: dict, use: tuple[int, ...], layout: str, notes=()) -> GpuPlan:
    visible = plan["visible"]
    ids = environ.get(_NODE_IDS[0]) or environ.get(_NODE_IDS[1]) or ""
    node = [e.strip() for e in ids.split(",") if e.strip()]
    # Slurm's ids name the node's GPUs; CUDA_VISIBLE_DEVICES may count within the step instead.
    if visible is not None and len(node) == len(visible):
        names = node
    elif visible is not None:
        names = list(visible)
    else:
        names = [str(i) for i in range(plan["count"] or 0)]
    return GpuPlan(use=use,
                   node_ids=tuple(names[i] for i in use),
                   layout=layout,
                   notes=tuple(notes),
                   **plan)


def _ownership(environ, raw, count, per_task, bind, slots, rank) -> tuple[bool, str]:
    """(whether the GPUs seen are this task's alone, the layout in words)."""
    shown = _describe_visible(raw, count)
    pinned = environ.get(PINNED, "")
    if raw is not None and pinned == f"{rank}:{raw}":
        return True, f"{shown}, chosen for rank {rank} by tfdist: {PINNED}={pinned}"
    if bind and bind != "none":
        return True, f"{shown}, bound to this task by Slurm: {_BIND}={bind}"
    every = " on every task" if slots > 1 else ""
    if per_task is not None:
        slurm = f"{_PER_TASK}={environ[_PER_TASK]}"
        if bind == "none" or (count is not None and count >= per_task * slots > per_task):
            return False, f"{shown}{every}, {slurm} not bound per task"
        return True, f"{shown}, this task's own: {slurm}, which Slurm binds per task"
    if environ.get(_ON_NODE):
        return False, f"{shown}{every}, {_ON_NODE}={environ[_ON_NODE]}"
    return False, shown + every


def _describe_visible(raw: Optional[str], count: Optional[int]) -> str:
    if raw is None:
        return f"{VISIBLE} unset" + (f", {count} GPU(s) seen" if count is not None else "")
    return f"{VISIBLE}={raw!r}"
