"""Which tf.distribute strategies train a Keras 3 model with `model.fit` on this TensorFlow, by
Keras alone and with `import tfdist` (its corrections, tfdist.keras_compat).

    .venv/bin/python tools/keras3_matrix.py             # the default stack
    .venv-newest/bin/python tools/keras3_matrix.py      # the newest TensorFlow

Each case runs in fresh processes (2 workers on loopback for multi_worker, chief + ps + worker for
parameter_server, 2 logical CPUs for mirrored) with TF_USE_LEGACY_KERAS unset, and trains a small
dense Keras 3 (`import keras`) model on random data for 2 epochs x 5 steps, under the script's own
strategy: on a plain `tf.data.Dataset`, and on `strategy.distribute_datasets_from_function` (what
`rt.dataset` gives); once as Keras ships, once with `import tfdist` first. It prints one table row
per case; docs/compatibility.md's matrix is its output.
"""

import json
import os
import socket
import subprocess
import sys

CASE = r"""
import json, os, sys
os.environ.pop("TF_USE_LEGACY_KERAS", None)
if sys.argv[3] == "tfdist":
    import tfdist
import numpy as np
import tensorflow as tf
import keras
strategy_name, data = sys.argv[1], sys.argv[2]
if strategy_name == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
elif strategy_name == "central_storage":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
elif strategy_name == "multi_worker":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
elif strategy_name == "parameter_server":
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                      task_index=resolver.task_id, protocol="grpc", start=True)
        server.join()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32")
y = (x.sum(1) > 0).astype("int64")

def fn(ctx=None):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
    return ds

with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
if data == "plain":
    dataset = fn()
elif data == "dataset_creator":
    dataset = keras.utils.experimental.DatasetCreator(fn)
else:
    dataset = strategy.distribute_datasets_from_function(fn)
hist = model.fit(dataset, epochs=2, steps_per_epoch=5, verbose=0)
print("RESULT", json.dumps(hist.history["loss"]))
"""


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_case(strategy, data, tfdist):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    if strategy in ("mirrored", "central_storage"):
        roles = [None]
    elif strategy == "multi_worker":
        roles = [("worker", 0), ("worker", 1)]
    else:
        roles = [("chief", 0), ("ps", 0), ("worker", 0)]
    ports = free_ports(len(roles))
    cluster = {}
    for (kind, _), port in zip([r for r in roles if r], ports):
        cluster.setdefault(kind, []).append(f"127.0.0.1:{port}")
    procs = []
    for role in roles:
        e = dict(env)
        if role:
            e["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role[0],
                                                                      "index": role[1]}})
        procs.append(subprocess.Popen([sys.executable, "-c", CASE, strategy, data, tfdist], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    first = procs[0]
    try:
        out, err = first.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        first.kill()
        out, err = "", "timed out after 240 s"
    for p in procs[1:]:
        try:
            p.communicate(timeout=60 if strategy == "multi_worker" else 1)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
    if first.returncode == 0 and "RESULT" in out:
        return "works", out.split("RESULT", 1)[1].strip()
    lines = [line for line in err.strip().splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else "?")
    return "fails", error[:160]


def main():
    import tensorflow as tf

    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    import keras

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}")
    print("| strategy | data | Keras alone | with `import tfdist` |")
    print("|---|---|---|---|")
    cases = [("mirrored", "plain"), ("mirrored", "distributed"), ("central_storage", "plain"),
             ("central_storage", "distributed"), ("multi_worker", "plain"),
             ("multi_worker", "distributed"), ("parameter_server", "plain"),
             ("parameter_server", "dataset_creator")]
    if len(sys.argv) > 1:  # e.g. `multi_worker`: only that strategy's cases
        cases = [case for case in cases if case[0] in sys.argv[1:]]
    for strategy, data in cases:
        cells = []
        for tfdist in ("keras", "tfdist"):
            verdict, detail = run_case(strategy, data, tfdist)
            cells.append(verdict if verdict == "works" else f"{verdict}: {detail}")
        print(f"| {strategy} | {data} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
