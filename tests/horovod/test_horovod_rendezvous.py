"""The gloo rendezvous without horovodrun, without TensorFlow: the variables written, the
rendezvous plan, the check-in, the addresses. horovodrun's own variables: tests/cluster."""

import threading
import time

import pytest

from tests.helpers import free_port_base, requires_horovod
from tfdist.cluster import Cluster, build_roles, horovodrun
from tfdist.distribute import horovod_rendezvous as hs
from tfdist.distribute.horovod_setup import HorovodSetupError


def cluster(rank, hosts):
    return Cluster("slurm", rank, len(hosts), tuple(hosts), job_id="7")


def test_set_horovod_environ_writes_roles_marks_them_and_finds_the_interface():
    c = Cluster("local", 1, 2, ("localhost", ) * 2, port_base=23000)
    environ = {}
    written = hs.set_horovod_environ(build_roles(c, "horovod"), environ)
    assert environ == written
    assert environ["HOROVOD_RANK"] == "1" and environ["HOROVOD_SIZE"] == "2"
    assert environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "localhost"
    assert environ["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "23000"
    assert environ["HOROVOD_GLOO_IFACE"] == "lo"
    assert environ[hs.OWNED_VAR] == "1" and horovodrun.read(environ) is None
    # A user's interface is kept.
    environ = {"HOROVOD_GLOO_IFACE": "ib0"}
    hs.set_horovod_environ(build_roles(c, "horovod"), environ)
    assert environ["HOROVOD_GLOO_IFACE"] == "ib0"


def test_one_task_needs_no_rendezvous_server():
    c = Cluster("local", 0, 1, ("localhost", ))
    environ = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "stale"}
    hs.set_horovod_environ(build_roles(c, "horovod"), environ)
    assert "HOROVOD_GLOO_RENDEZVOUS_ADDR" not in environ
    assert environ["HOROVOD_SIZE"] == "1"


def test_roles_of_another_strategy_are_refused():
    c = Cluster("local", 0, 2, ("localhost", ) * 2)
    with pytest.raises(HorovodSetupError, match="build_roles"):
        hs.set_horovod_environ(build_roles(c, "multi_worker"), {})


@requires_horovod
@pytest.mark.horovod
def test_host_alloc_plan_matches_the_rings_of_each_rank():
    # 2 nodes, 3 tasks: a has ranks 0, 1; b has rank 2.
    hosts = ["a", "a", "b"]
    plan = hs.host_alloc_plan(cluster(0, hosts))
    assert [(s.hostname, s.rank, s.local_rank, s.cross_rank) for s in plan] == [("a", 0, 0, 0),
                                                                                ("a", 1, 1, 0),
                                                                                ("b", 2, 0, 1)]
    assert [(s.size, s.local_size, s.cross_size) for s in plan] == [(3, 2, 2), (3, 2, 1), (3, 1, 2)]


# Its bound of 30 s on a 1-5 s timeout is a pace: the alone part (tools/run_tests.py).
@pytest.mark.alone
@requires_horovod
@pytest.mark.horovod
def test_rendezvous_check_in_and_a_missing_rank():
    port = free_port_base(1)
    hosts = ["localhost"] * 3
    server = hs.serve_rendezvous(cluster(0, hosts), port)
    try:
        errors = {}

        def rank(r, world):
            try:
                hs.check_in(cluster(r, hosts[:world]), "localhost", port, timeout=5)
            except HorovodSetupError as err:
                errors[r] = str(err)

        # Ranks 0 and 1 of 3 check in; rank 2 never does.
        start = time.monotonic()
        threads = [threading.Thread(target=rank, args=(r, 3)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert time.monotonic() - start < 30  # timeout=5: ends, does not hang (loaded CI is slow)
        assert sorted(errors) == [0, 1]
        assert "rank(s) 2 of 3 (host(s) localhost) did not reach" in errors[0]
    finally:
        server.stop()
    assert not server._thread.is_alive()


@requires_horovod
@pytest.mark.horovod
def test_only_rank_0_serves_and_a_busy_port_is_named():
    with pytest.raises(HorovodSetupError, match="Only rank 0"):
        hs.serve_rendezvous(cluster(1, ["a", "b"]), 20000)
    port = free_port_base(1)
    first = hs.serve_rendezvous(cluster(0, ["a", "b"]), port)
    try:
        with pytest.raises(HorovodSetupError, match=f"port {port}.*--port"):
            hs.serve_rendezvous(cluster(0, ["a", "b"]), port)
    finally:
        first.stop()


def ipv4_listeners(port):
    """The IPv4 addresses a TCP socket listens on at `port` here (/proc/net/tcp)."""
    found = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_rendezvous_address_is_the_one_the_ranks_use():
    assert hs.rendezvous_bind_address(cluster(0, ["localhost"] * 2), "localhost") == "127.0.0.1"
    with pytest.raises(HorovodSetupError, match="cannot resolve its own host name 'no.such"):
        hs.rendezvous_bind_address(cluster(0, ["no.such.host.invalid"] * 2), "no.such.host.invalid")


@requires_horovod
@pytest.mark.horovod
def test_the_rendezvous_listens_on_one_address_only():
    port = free_port_base(1)
    server = hs.serve_rendezvous(cluster(0, ["localhost"] * 2), port, host="127.0.0.1")
    try:
        assert ipv4_listeners(port) == {"127.0.0.1"}  # not 0.0.0.0: every interface
    finally:
        server.stop()
    assert ipv4_listeners(port) == set()


# Its bound of 30 s on a 1-5 s timeout is a pace: the alone part (tools/run_tests.py).
@pytest.mark.alone
@requires_horovod
@pytest.mark.horovod
def test_no_rendezvous_server_is_an_error_not_a_hang():
    port = free_port_base(1)
    start = time.monotonic()
    with pytest.raises(HorovodSetupError, match=f"localhost:{port} did not answer within 1 s"):
        hs.check_in(cluster(1, ["localhost"] * 2), "localhost", port, timeout=1)
    assert time.monotonic() - start < 30  # timeout=1: ends, does not hang (loaded CI is slow)
