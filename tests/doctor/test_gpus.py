"""tfdist doctor's verdicts on the GPU plan of tfdist.cluster.gpus (the layouts of
tests/cluster/test_gpus.py) and its notes from the TensorFlow/Horovod probe; pure functions."""

import pytest

from tests.cluster.test_gpus import ERRORS, one_node
from tfdist.cluster import ClusterError, build_roles, detect, gpus
from tfdist.doctor import PROBLEM, Result, check_placement, gpu_notes


@pytest.mark.parametrize("name,environ,strategy,words", ERRORS, ids=[row[0] for row in ERRORS])
def test_layouts_that_would_share_a_gpu_are_a_problem(name, environ, strategy, words):
    cluster = detect(environ)
    roles = build_roles(cluster, strategy, port=25000)
    with pytest.raises(ClusterError) as error:
        gpus.plan_for(cluster, roles, environ)
    assert check_placement(cluster, roles, environ) == Result("gpus", PROBLEM, str(error.value))


def test_idle_gpus_are_a_warning():
    environ = one_node(0, 2, CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_GPUS_ON_NODE=4)
    cluster = detect(environ)
    assert check_placement(cluster, build_roles(cluster, "horovod", port=25000),
                           environ).status == "warn"


def test_doctor_notes_from_the_probe():
    notes = gpu_notes({"tf_gpu_cc": [[8, 0]], "horovod": "0.28.1", "nccl": 0}, "horovod")
    assert notes[0].status == "info" and "--mixed_precision=mixed_bfloat16" in notes[0].message
    assert notes[1].status == "warn" and "without NCCL" in notes[1].message
    notes = gpu_notes({"tf_gpu_cc": [[6, 1]], "horovod": "0.28.1", "nccl": 21602}, "horovod")
    assert "below 7.0" in notes[0].message and notes[1] == Result(
        "gpus", "ok", "Horovod has NCCL: GPU tensors are all-reduced with NCCL.")
    assert gpu_notes({"tf_gpu_cc": [], "horovod": "0.28.1", "nccl": 0}, "horovod") == []
