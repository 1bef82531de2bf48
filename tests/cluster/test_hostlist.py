import pytest

from tfdist.cluster.errors import ClusterError
from tfdist.cluster.hostlist import expand_hosts, expand_tasks_per_node


@pytest.mark.parametrize("nodelist,expected", [
    ("node1", ["node1"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("n[0001-0003],m5,o[009-011]", ["n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"]),
    ("o[009-011]", ["o009", "o010", "o011"]),
    ("gpu[07,09-10]", ["gpu07", "gpu09", "gpu10"]),
    ("a,b,c", ["a", "b", "c"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("tnode[1-2]", ["tnode1", "tnode2"]),
    ("x-1.cluster,x-2.cluster", ["x-1.cluster", "x-2.cluster"]),
])
def test_expand_hosts(nodelist, expected):
    assert expand_hosts(nodelist) == expected


@pytest.mark.parametrize("bad", ["n[1-", "n[3-1]", "n[a-b]", ""])
def test_expand_hosts_rejects_malformed(bad):
    with pytest.raises(ClusterError, match="Cannot parse SLURM_STEP_NODELIST|is empty"):
        expand_hosts(bad, source="SLURM_STEP_NODELIST")


@pytest.mark.parametrize("spec,expected", [
    ("1", [1]),
    ("2(x2)", [2, 2]),
    ("2(x2),1", [2, 2, 1]),
    ("2,1", [2, 1]),
    ("3(x2),2,11(x4)", [3, 3, 2, 11, 11, 11, 11]),
    ("4(x1)", [4]),
])
def test_expand_tasks_per_node(spec, expected):
    assert expand_tasks_per_node(spec) == expected


@pytest.mark.parametrize("bad", ["3(x", "x2", "2(x2", "2,,1", "0", "-1"])
def test_expand_tasks_per_node_rejects_malformed(bad):
    with pytest.raises(ClusterError, match=r"Cannot parse SLURM_TASKS_PER_NODE '"):
        expand_tasks_per_node(bad, source="SLURM_TASKS_PER_NODE")
