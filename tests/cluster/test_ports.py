import socket

import pytest

from tfdist.cluster import ClusterError, check_port_free
from tfdist.cluster.ports import port_base, task_port


def test_base_from_job_id_is_below_the_ephemeral_range_and_differs_between_jobs():
    bases = {port_base(str(job), environ={}) for job in range(100000, 100750)}
    assert len(bases) == 750
    assert min(bases) >= 20000 and max(bases) + 15 < 32768


def test_override_order_flag_env_launcher_job():
    assert port_base("5", override=25000, launcher_base=26000, environ={"TFDIST_PORT":
                                                                        "27000"}) == 25000
    assert port_base("5", launcher_base=26000, environ={"TFDIST_PORT": "27000"}) == 27000
    assert port_base("5", launcher_base=26000, environ={}) == 26000
    assert port_base(None, environ={}) == 20000


@pytest.mark.parametrize("kwargs,message", [
    ({
        "override": 80
    }, r"--port=80 is out of range: expected a port in 1024\.\.65535.*--port=P or "
     r"TFDIST_PORT=P"),
    ({
        "environ": {
            "TFDIST_PORT": "70000"
        }
    }, r"TFDIST_PORT=70000 is out of range"),
    ({
        "environ": {
            "TFDIST_PORT": "http"
        }
    }, r"TFDIST_PORT='http' is not a port number"),
])
def test_bad_ports(kwargs, message):
    kwargs.setdefault("environ", {})
    with pytest.raises(ClusterError, match=message):
        port_base("1", **kwargs)


def test_task_port_above_65535():
    with pytest.raises(ClusterError, match=r"Base port 65535 \+ local rank 1 = 65536"):
        task_port(65535, 1)


def test_port_in_use_names_host_port_rank_and_fix():
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ClusterError,
                           match=rf"Port {port} on host node7 \(rank 3\) is already "
                           r"in use.*--port=P or TFDIST_PORT=P"):
            check_port_free(port, "node7", 3)
    check_port_free(port, "node7", 3)  # free again once closed


def test_free_port_base_gives_n_bindable_ports():
    from tfdist.cluster.ports import free_port_base

    base = free_port_base(4)
    assert 20000 <= base and base + 3 < 32000
    for port in range(base, base + 4):
        check_port_free(port, "localhost", 0)
