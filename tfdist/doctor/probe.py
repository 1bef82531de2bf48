"""What a training script would meet when it imports tfdist, TensorFlow and Horovod, learnt in a
child process: `python -m tfdist.doctor.probe` does the same imports as a training script, in the
same order, and prints one JSON line. A broken or slow install is so reported instead of hanging
or crashing the doctor itself, which never imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MARK = "TFDIST_DOCTOR_PROBE "


def start_probe(python: str = sys.executable) -> subprocess.Popen:
    """Start the child that imports tfdist, TensorFlow with tf-keras and Horovod's Keras API."""
    env = dict(os.environ)
    # The child imports the same tfdist as this process (also when it runs from a source tree).
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), here) if p)
    return subprocess.Popen([python, "-m", "tfdist.doctor.probe"],
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
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    last = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["no output"]
    return {
        "probe_error":
        f"python exited with status {probe.returncode} while importing "
        f"tfdist and TensorFlow ({last[0].strip()})"
    }


def _findings() -> dict[str, Any]:
    """Run in the child: tfdist is imported first, as in a training script."""
    import importlib.util

    out: dict[str, Any] = {}
    try:
        import tfdist  # noqa: F401
        import tensorflow as tf
        import tf_keras

        # Which Keras tf.keras is here (TF_USE_LEGACY_KERAS, the user's): its package's version.
        package = tf.keras.Model.__module__.split(".")[0]  # "tf_keras", or "keras" for Keras 3
        name = "tf-keras" if package == "tf_keras" else "Keras"
        found = tf.config.list_physical_devices("GPU")
        out.update(tensorflow=tf.__version__,
                   tf_keras=tf_keras.__version__,
                   tf_dot_keras=f"{name} {sys.modules[package].__version__}",
                   tf_gpus=len(found),
                   tf_gpu_cc=[
                       tf.config.experimental.get_device_details(g).get("compute_capability")
                       for g in found
                   ])
    except BaseException as e:
        out["tensorflow_error"] = f"{type(e).__name__}: {e}"
        return out
    out.update(_keras3())
    if importlib.util.find_spec("horovod") is None:
        out["horovod_missing"] = True
        return out
    try:
        from tfdist.distribute.horovod_setup import import_horovod_keras

        hvd = import_horovod_keras()
        import horovod

        out.update(horovod=horovod.__version__,
                   gloo=bool(hvd.gloo_built()),
                   mpi=bool(hvd.mpi_built()),
                   nccl=int(hvd.nccl_built()))
    except BaseException as e:
        out["horovod_error"] = f"{type(e).__name__}: {e}"
    return out


def _keras3() -> dict[str, Any]:
    """Keras 3 (`import keras`, beside tf-keras from TensorFlow 2.16 on): its version, the
    corrected functions whose code tfdist did not run, whether it averages several replicas,
    whether tf.train.Checkpoint can save its optimizers."""
    import importlib.util

    if importlib.util.find_spec("keras") is None:
        return {}
    try:
        import keras

        if not keras.__version__.startswith("3."):
            return {}
        from tfdist.keras_compat import known_sources, replica_loss

        import tensorflow as tf

        return dict(keras3=keras.__version__,
                    keras3_unknown=known_sources.unknown_here(),
                    keras3_sums_replicas=not replica_loss.scales_loss(),
                    keras3_checkpoints=isinstance(keras.optimizers.SGD(),
                                                  tf.__internal__.tracking.Trackable))
    except BaseException as e:
        return dict(keras3_error=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    print(MARK + json.dumps(_findings()), flush=True)
