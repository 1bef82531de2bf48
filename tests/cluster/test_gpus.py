"""Which GPUs a task uses, for GPU layouts as Slurm 22.05 shows them to each task (faked
environments: these are pure functions). Each row: the sbatch options, what one task sees, the
strategy, and the GPUs it must use (indices into what it sees) or the error it must raise."""

import pytest

from tests.cluster.test_slurm import step
from tfdist.cluster import ClusterError, build_roles, detect, gpus


def one_node(rank, ntasks, **extra):
    """Task `rank` of an srun step with `ntasks` tasks on node n1."""
    return step(rank,
                "n1",
                nodelist="n1",
                ntasks=ntasks,
                tpn=str(ntasks),
                SLURM_LOCALID=rank,
                **extra)


def two_nodes(rank, **extra):
    """Task `rank` of 2 nodes x 2 tasks (ranks 0, 1 on n1; 2, 3 on n2)."""
    return step(rank, f"n{rank // 2 + 1}", nodelist="n[1-2]", SLURM_LOCALID=rank % 2, **extra)


SEED = dict(CUDA_VISIBLE_DEVICES="0,1",
            SLURM_STEP_GPUS="0,1",
            SLURM_JOB_GPUS="0,1",
            SLURM_GPUS_ON_NODE=2)

# (name, environment of the task, strategy, visible_count, expected use, node ids, mechanism)
LAYOUTS = [
    # The seed job: --gres=gpu:2 --ntasks-per-node=2 shows both GPUs to both tasks.
    ("seed gres=gpu:2 x2 tasks, horovod rank 0", one_node(0, 2, **SEED), "horovod", None, [0],
     ["0"], "set_visible_devices"),
    ("seed gres=gpu:2 x2 tasks, horovod rank 1", one_node(1, 2, **SEED), "horovod", None, [1],
     ["1"], "set_visible_devices"),
    # Same, cgroup-constrained step on the node's GPUs 2 and 3: CUDA counts within the step.
    ("gres=gpu:2 x2 on GPUs 2,3 with cgroups, rank 1",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="0,1", SLURM_STEP_GPUS="2,3",
              SLURM_GPUS_ON_NODE=2), "horovod", None, [1], ["3"], "set_visible_devices"),
    # Two nodes x 2 tasks, multi_worker one task per GPU: rank 3 is local task 1 of node 2.
    ("gres=gpu:2, 2 nodes x 2 tasks, multi_worker rank 3", two_nodes(3, **SEED), "multi_worker",
     None, [1], ["1"], "set_visible_devices"),
    # --gpus-per-task=1 implies --gpu-bind=per_task:1 since Slurm 21.08: each task sees its own.
    ("gpus-per-task=1 x2 (bound), rank 1",
     one_node(1,
              2,
              CUDA_VISIBLE_DEVICES="1",
              SLURM_STEP_GPUS="1",
              SLURM_GPUS_PER_TASK=1,
              SLURM_GPUS_ON_NODE=2), "horovod", None, [0], ["1"], "none"),
    # ... unless --gpu-bind=none (or Slurm < 21.08): every task sees both.
    ("gpus-per-task=1 gpu-bind=none x2, rank 1",
     one_node(1,
              2,
              CUDA_VISIBLE_DEVICES="0,1",
              SLURM_GPUS_PER_TASK=1,
              SLURM_GPU_BIND="none",
              SLURM_GPUS_ON_NODE=2), "horovod", None, [1], ["1"], "set_visible_devices"),
    ("gpus-per-task=1 on Slurm 20.11 (no binding) x2, rank 1",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="0,1",
              SLURM_GPUS_PER_TASK=1), "horovod", None, [1], ["1"], "set_visible_devices"),
    # One task per node with all its GPUs: multi_worker and mirrored use them all.
    ("gpus-per-node=4 x1 task, multi_worker",
     step(1,
          "n2",
          nodelist="n[1-2]",
          ntasks=2,
          tpn="1(x2)",
          SLURM_LOCALID=0,
          CUDA_VISIBLE_DEVICES="0,1,2,3",
          SLURM_GPUS_PER_NODE=4,
          SLURM_GPUS_ON_NODE=4), "multi_worker", None, [0, 1, 2, 3], ["0", "1", "2", "3"], "none"),
    ("gpus-per-node=4 x2 tasks, multi_worker rank 1 takes half",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="0,1,2,3",
              SLURM_GPUS_ON_NODE=4), "multi_worker", None, [2, 3], ["2",
                                                                    "3"], "set_visible_devices"),
    ("ntasks=1 gpus-per-node=2, mirrored",
     one_node(0, 1, CUDA_VISIBLE_DEVICES="0,1",
              SLURM_GPUS_ON_NODE=2), "mirrored", None, [0, 1], ["0", "1"], "none"),
    # --gpu-bind=closest, 4 GPUs and 2 tasks: each sees its two; horovod uses one of them.
    ("gres=gpu:4 gpu-bind=closest x2, rank 1",
     one_node(1,
              2,
              CUDA_VISIBLE_DEVICES="2,3",
              SLURM_GPU_BIND="verbose,closest",
              SLURM_GPUS_ON_NODE=4), "horovod", None, [0], ["2"], "set_visible_devices"),
    # MIG: CUDA enumerates only the first MIG device listed, so the variable is narrowed.
    ("MIG gres=gpu:2 x2, rank 1",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="MIG-aaaa,MIG-bbbb",
              SLURM_GPUS_ON_NODE=2), "horovod", None, [1], ["MIG-bbbb"], "CUDA_VISIBLE_DEVICES"),
    ("MIG gpus-per-task=1 (bound), rank 1",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="MIG-bbbb",
              SLURM_GPUS_PER_TASK=1), "horovod", None, [0], ["MIG-bbbb"], "none"),
    # parameter_server on 2 nodes x 2 GPUs: chief and ps use none, the two workers one each.
    ("parameter_server chief", two_nodes(0, **SEED), "parameter_server", None, [], [],
     "set_visible_devices"),
    ("parameter_server ps", two_nodes(1, **SEED), "parameter_server", None, [], [],
     "set_visible_devices"),
    ("parameter_server worker rank 3", two_nodes(3, **SEED), "parameter_server", None, [1], ["1"],
     "set_visible_devices"),
    # CPU-only nodes, and Slurm's marker for "no device file".
    ("CPU node, 2 tasks", one_node(1, 2), "horovod", 0, [], [], "none"),
    ("NoDevFiles", one_node(0, 1,
                            CUDA_VISIBLE_DEVICES="NoDevFiles"), "mirrored", None, [], [], "none"),
    # No CUDA_VISIBLE_DEVICES (a workstation): TensorFlow's count decides.
    ("workstation, 2 GPUs seen, rank 1", one_node(1, 2), "horovod", 2, [1], ["1"],
     "set_visible_devices"),
    # A variable tfdist narrowed for this rank itself (tfdist env --format=shell) is kept.
    ("narrowed by tfdist env for rank 1", one_node(1,
                                                   2,
                                                   CUDA_VISIBLE_DEVICES="1",
                                                   TFDIST_GPUS="1:1"), "horovod", None, [0], ["1"],
     "none"),
]


@pytest.mark.parametrize("name,environ,strategy,count,use,node_ids,mechanism",
                         LAYOUTS,
                         ids=[row[0] for row in LAYOUTS])
def test_layouts(name, environ, strategy, count, use, node_ids, mechanism):
    cluster = detect(environ)
    roles = build_roles(cluster, strategy, port=25000)
    plan = gpus.plan_for(cluster, roles, environ, visible_count=count)
    assert list(plan.use) == use
    assert list(plan.node_ids) == node_ids
    assert plan.mechanism == mechanism
    if mechanism == "CUDA_VISIBLE_DEVICES":
        assert plan.visible_value == node_ids[0]


ERRORS = [
    # 3 tasks, 2 GPUs: one would have to share.
    ("gres=gpu:2 x3 tasks, horovod", one_node(2,
                                              3,
                                              CUDA_VISIBLE_DEVICES="0,1",
                                              SLURM_GPUS_ON_NODE=2), "horovod",
     ["3 tasks on this node", "they see 2", "--ntasks-per-node=2", "--gpus-per-task=1"]),
    ("gres=gpu:2 x3 tasks, multi_worker",
     one_node(0, 3, CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE=2), "multi_worker",
     ["3 tasks on this node", "--ntasks-per-node=2"]),
    # Bound one GPU each, but two tasks per GPU (--gpu-bind=single:2 on a 1-GPU node).
    ("gpus-per-node=1 gpu-bind=single:2 x2",
     one_node(1, 2, CUDA_VISIBLE_DEVICES="0", SLURM_GPU_BIND="single:2", SLURM_GPUS_ON_NODE=1),
     "horovod", ["2 tasks on this node", "gave the step 1 GPU", "would share a GPU"]),
    # A CUDA_VISIBLE_DEVICES=0 exported by hand for every task.
    ("CUDA_VISIBLE_DEVICES=0 by hand x2", one_node(1, 2, CUDA_VISIBLE_DEVICES="0"), "horovod",
     ["2 tasks on this node", "they see 1", "CUDA_VISIBLE_DEVICES='0'"]),
]


@pytest.mark.parametrize("name,environ,strategy,words", ERRORS, ids=[row[0] for row in ERRORS])
def test_layouts_that_would_share_a_gpu(name, environ, strategy, words):
    cluster = detect(environ)
    roles = build_roles(cluster, strategy, port=25000)
    with pytest.raises(ClusterError) as error:
        gpus.plan_for(cluster, roles, environ)
    for word in words:
        assert word in str(error.value)


def test_a_pinned_marker_for_another_rank_is_ignored():
    # A batch script that exported rank 0's choice: the tasks it starts must not all take it.
    environ = one_node(1, 2, CUDA_VISIBLE_DEVICES="0", TFDIST_GPUS="0:0")
    cluster = detect(environ)
    with pytest.raises(ClusterError, match="they see 1"):
        gpus.plan_for(cluster, build_roles(cluster, "horovod", port=25000), environ)


def test_explicit_task_gpus_overrides_the_strategy():
    environ = two_nodes(1, **SEED)  # a parameter server, which uses no GPU by default
    cluster = detect(environ)
    roles = build_roles(cluster, "parameter_server", port=25000)
    assert gpus.plan_for(cluster, roles, environ, "all").use == (0, 1)
    assert gpus.plan_for(cluster, roles, environ, "one").use == (1, )
    with pytest.raises(ClusterError, match="--task_gpus='two'"):
        gpus.plan_for(cluster, roles, environ, "two")


def test_idle_gpus_and_mig_limits_are_noted():
    environ = one_node(0, 2, CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_GPUS_ON_NODE=4)
    cluster = detect(environ)
    plan = gpus.plan_for(cluster, build_roles(cluster, "horovod", port=25000), environ)
    assert plan.use == (0, ) and "2 of the node's 4 GPUs stay idle" in plan.notes[0]
    environ = one_node(0, 1, CUDA_VISIBLE_DEVICES="MIG-a,MIG-b")
    cluster = detect(environ)
    plan = gpus.plan_for(cluster, build_roles(cluster, "mirrored"), environ)
    assert plan.use == (0, ) and "MIG" in plan.notes[0]
    assert plan.visible_value == "MIG-a" and plan.mechanism == "CUDA_VISIBLE_DEVICES"


def test_unknown_count_is_left_to_tensorflow():
    environ = one_node(1, 2)
    cluster = detect(environ)
    plan = gpus.plan_for(cluster, build_roles(cluster, "horovod", port=25000), environ)
    assert plan.use is None and plan.count is None
    assert "when TensorFlow lists them" in plan.summary()


@pytest.mark.parametrize("value,entries", [
    ("0,1", ("0", "1")),
    ("", ()),
    ("2,-1,3", ("2", )),
    ("NoDevFiles", ()),
    ("GPU-8f2a,GPU-77c1", ("GPU-8f2a", "GPU-77c1")),
    (" 0, 1 ", ("0", "1")),
])
def test_cuda_visible_devices_is_read_as_cuda_does(value, entries):
    assert gpus.parse_visible(value) == entries


@pytest.mark.parametrize("value,count", [("2", 2), ("a100:2", 2), ("a100:1,v100:3", 4)])
def test_slurm_gpu_counts(value, count):
    assert gpus.slurm_count(value) == count
