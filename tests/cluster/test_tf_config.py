import json

import pytest

from tfdist.cluster import ClusterError, build_roles, detect


def env(config):
    return {"TF_CONFIG": json.dumps(config) if not isinstance(config, str) else config}


PS_CONFIG = {
    "cluster": {
        "worker": ["h2:2000", "h3:2000"],
        "ps": ["h1:2001"],
        "chief": ["h1:2000"]
    },
    "task": {
        "type": "worker",
        "index": 1
    },
}


def test_valid_tf_config_is_read_and_passed_through():
    c = detect(env(PS_CONFIG))
    # Rank order: chief, workers, ps.
    assert c.environment == "tf_config"
    assert c.task_hosts == ("h1", "h2", "h3", "h1")
    assert (c.rank, c.world_size, c.node_rank) == (2, 4, 2)
    assert c.nodes == ("h1", "h2", "h3")
    roles = build_roles(c, "parameter_server")
    assert roles.tf_config == PS_CONFIG
    assert (roles.task_type, roles.task_index, roles.trains) == ("worker", 1, False)
    # Rank 0, which the engines take for the chief, is TF_CONFIG's chief.
    chief = detect(env(dict(PS_CONFIG, task={"type": "chief", "index": 0})))
    assert (chief.rank, build_roles(chief, "parameter_server").trains) == (0, True)


def test_auto_with_ps_in_tf_config_is_parameter_server():
    assert build_roles(detect(env(PS_CONFIG))).strategy == "parameter_server"


def test_index_defaults_to_zero():
    c = detect(env({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker"}}))
    # Without a chief, worker 0 is rank 0: the engines' chief.
    assert (c.rank, build_roles(c, "multi_worker").task_index) == (0, 0)


@pytest.mark.parametrize("raw,message", [
    ("{not json", r"TF_CONFIG is not valid JSON .*received '\{not json'.*unset TF_CONFIG"),
    (json.dumps({"task": {
        "type": "worker"
    }}), r"TF_CONFIG has no 'cluster' object"),
    (json.dumps({"cluster": {
        "worker": ["a:1"]
    }}), r"TF_CONFIG has no 'task' with a 'type'"),
    (json.dumps({
        "cluster": {
            "worker": ["a:1"]
        },
        "task": {
            "type": "chief",
            "index": 0
        }
    }), r"task type 'chief' is not in its cluster, which has \['worker'\]"),
    (json.dumps({
        "cluster": {
            "worker": ["a:1", "b:1"]
        },
        "task": {
            "type": "worker",
            "index": 2
        }
    }), r"task index 2 is out of range: cluster has 2 'worker' task\(s\), so expected 0\.\.1"),
    (json.dumps({
        "cluster": {
            "chief": ["a:1", "b:1"]
        },
        "task": {
            "type": "chief",
            "index": 0
        }
    }), r"TF_CONFIG names 2 chiefs"),
    (json.dumps({
        "cluster": {
            "worker": ["a"]
        },
        "task": {
            "type": "worker",
            "index": 0
        }
    }), r"cluster\['worker'\] holds 'a'; expected 'host:port'"),
    (json.dumps({
        "cluster": {
            "worker": []
        },
        "task": {
            "type": "worker",
            "index": 0
        }
    }), r"cluster\['worker'\] must be a non-empty list"),
])
def test_inconsistent_tf_config(raw, message):
    with pytest.raises(ClusterError, match=message):
        detect(env(raw))


def test_strategy_must_match_user_tf_config():
    with pytest.raises(ClusterError,
                       match=r"--strategy=multi_worker, but TF_CONFIG has 'ps' "
                       r"tasks"):
        build_roles(detect(env(PS_CONFIG)), "multi_worker")
    workers = {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}
    with pytest.raises(ClusterError,
                       match=r"--strategy=parameter_server, but TF_CONFIG has no "
                       r"'ps' tasks"):
        build_roles(detect(env(workers)), "parameter_server")


def test_detection_order_launcher_then_tf_config_then_slurm():
    slurm = {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n1", "SLURM_NTASKS": "1"}
    assert detect(slurm).environment == "slurm"
    assert detect(dict(slurm, **env(PS_CONFIG))).environment == "tf_config"
    launch = {"TFDIST_LAUNCH_RANK": "1", "TFDIST_LAUNCH_WORLD_SIZE": "2"}
    assert detect(dict(slurm, **env(PS_CONFIG), **launch)).environment == "local"
    assert detect({}).as_dict() == {
        "environment": "local",
        "rank": 0,
        "world_size": 1,
        "local_rank": 0,
        "local_world_size": 1,
        "node_rank": 0,
        "nodes": ["localhost"],
        "job_id": None
    }
