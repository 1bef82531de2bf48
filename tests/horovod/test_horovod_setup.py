"""horovod_setup without TensorFlow: environment detection, rendezvous plan, check-in, aliasing."""

import os
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import clean_environ, free_port_base, requires_horovod
from tfdist.cluster import Cluster, build_roles
from tfdist.cluster.local import launch_environ
from tfdist.distribute import horovod_setup as hs


def cluster(rank, hosts):
    return Cluster("slurm", rank, len(hosts), tuple(hosts), job_id="7")


HOROVODRUN_GLOO = {
    "HOROVOD_RANK": "1",
    "HOROVOD_SIZE": "2",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1",
    "HOROVOD_GLOO_RENDEZVOUS_PORT": "4321",
}


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, False),
        (HOROVODRUN_GLOO, True),
        ({
            **HOROVODRUN_GLOO, "SLURM_JOB_ID": "7"
        }, True),  # horovodrun inside a Slurm allocation
        ({
            **HOROVODRUN_GLOO, hs.OWNED_VAR: "1"
        }, False),  # what init_horovod wrote itself
        ({
            **HOROVODRUN_GLOO,
            **launch_environ(1, 2, 20000)
        }, False),  # tfdist launch
        ({
            "HOROVOD_RANK": "0",
            "HOROVOD_SIZE": "2"
        }, False),  # stray variables, no rendezvous
        ({
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "2"
        }, False),  # mpirun: tfdist sets gloo up from its ranks, as under srun
    ])
def test_horovodrun_environment(environ, expected):
    assert hs.horovodrun_environment(environ) is expected


def test_stale_horovod_variables_in_an_srun_step_are_ignored():
    srun = {**HOROVODRUN_GLOO, "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    # Task 0 of 2 under srun, but HOROVOD_RANK=1 came from the batch script: stale.
    assert not hs.horovodrun_environment(srun, cluster(0, ["a", "b"]))
    # Rank and size agree with Slurm's: kept (horovodrun may have set them).
    assert hs.horovodrun_environment(srun, cluster(1, ["a", "b"]))
    # Outside an srun step a Slurm cluster has one task (the cluster layer refuses more), and
    # there horovodrun's variables win.
    assert hs.horovodrun_environment(srun, cluster(0, ["a"]))


def test_set_horovod_environ_writes_roles_marks_them_and_finds_the_interface():
    c = Cluster("local", 1, 2, ("localhost", ) * 2, port_base=23000)
    environ = {}
    written = hs.set_horovod_environ(build_roles(c, "horovod"), environ)
    assert environ == written
    assert environ["HOROVOD_RANK"] == "1" and environ["HOROVOD_SIZE"] == "2"
    assert environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "localhost"
    assert environ["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "23000"
    assert environ["HOROVOD_GLOO_IFACE"] == "lo"
    assert environ[hs.OWNED_VAR] == "1" and not hs.horovodrun_environment(environ)
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
    with pytest.raises(hs.HorovodSetupError, match="build_roles"):
        hs.set_horovod_environ(build_roles(c, "multi_worker"), {})


def test_optimizer_options_are_checked_first():
    with pytest.raises(ValueError, match="fp16"):
        hs.distributed_optimizer(object(), compression="bf16")
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        hs.distributed_optimizer(object(), backward_passes_per_step=0)
    with pytest.raises(hs.HorovodSetupError, match="init_horovod"):
        hs.horovod_callbacks()


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
            except hs.HorovodSetupError as err:
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
    with pytest.raises(hs.HorovodSetupError, match="Only rank 0"):
        hs.serve_rendezvous(cluster(1, ["a", "b"]), 20000)
    port = free_port_base(1)
    first = hs.serve_rendezvous(cluster(0, ["a", "b"]), port)
    try:
        with pytest.raises(hs.HorovodSetupError, match=f"port {port}.*--port"):
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
    with pytest.raises(hs.HorovodSetupError, match="cannot resolve its own host name 'no.such"):
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


@requires_horovod
@pytest.mark.horovod
def test_no_rendezvous_server_is_an_error_not_a_hang():
    port = free_port_base(1)
    start = time.monotonic()
    with pytest.raises(hs.HorovodSetupError, match=f"localhost:{port} did not answer within 1 s"):
        hs.check_in(cluster(1, ["localhost"] * 2), "localhost", port, timeout=1)
    assert time.monotonic() - start < 30  # timeout=1: ends, does not hang (loaded CI is slow)


ALIASING = r"""
import sys
import tfdist
case = sys.argv[1]
if case == "real":
    import keras  # Keras 3, the user's own
elif case == "fake":
    import types
    sys.modules["keras"] = types.ModuleType("keras")
before = {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")}

import numpy as np
import tf_keras
from tfdist.cluster import build_roles, detect
from tfdist.distribute import horovod_setup as hs

hvd = hs.import_horovod_keras()
after = {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")}
assert after.keys() == before.keys(), (sorted(after.keys() ^ before.keys())[:10])
assert all(after[n] is before[n] for n in before)
assert hs.import_horovod_keras() is hvd
# Horovod's Keras callbacks bound tf_keras at import and still use it.
from horovod.tensorflow.keras import callbacks as hvd_callbacks
assert hvd_callbacks.K is tf_keras.backend, hvd_callbacks.K
assert issubclass(hvd.callbacks.MetricAverageCallback, tf_keras.callbacks.Callback)

c = detect()
hvd = hs.init_horovod(c, build_roles(c, "horovod"))
assert (hvd.rank(), hvd.size()) == (0, 1)
tf_keras.utils.set_random_seed(0)
model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
model.compile(optimizer=hs.distributed_optimizer(tf_keras.optimizers.SGD(0.1), compression="fp16",
                                                 backward_passes_per_step=2),
              loss="mse", metrics=["mae"])
x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
hist = model.fit(x, x.sum(1), batch_size=8, epochs=2, verbose=0, callbacks=hs.horovod_callbacks())
assert hist.history["loss"][1] < hist.history["loss"][0], hist.history
hs.barrier()
hs.shutdown()
hs.shutdown()
assert {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")} == before
print("ALIASING OK", case, sys.modules.get("keras"))
"""


@requires_horovod
@pytest.mark.horovod
@pytest.mark.slow
@pytest.mark.parametrize("case", ["absent", "real", "fake"])
def test_keras_alias_is_undone_and_horovod_callbacks_work(case):
    r = subprocess.run([sys.executable, "-c", ALIASING, case],
                       env=clean_environ(),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert f"ALIASING OK {case}" in r.stdout
    if case == "absent":
        assert r.stdout.strip().endswith("None")
    elif case == "real":
        assert "site-packages/keras/__init__.py" in r.stdout.replace(os.sep, "/")
