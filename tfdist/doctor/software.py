"""Checks of the software a training script loads, from what the probe child found
(tfdist.doctor.probe): TensorFlow with tf-keras, and Horovod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfdist.doctor.result import INFO, OK, PROBLEM, SKIP, WARN, Result

# setup.cfg's TensorFlow range: each minor tested (make test, make test-newest, make test-range).
SUPPORTED_TF = ("2.16", "2.17", "2.18", "2.19", "2.20", "2.21")


def check_tensorflow(probe: Mapping[str, Any], gpus: int = 0) -> Result:
    """TensorFlow loads, with the tf-keras of its minor beside it; sees the node's GPUs."""
    if "probe_error" in probe:
        todo = ("Raise --tf_timeout if the file system is slow, else run "
                "`python -c 'import tfdist, tensorflow'` to see where it hangs."
                if probe.get("timeout") else
                "Run `python -c 'import tfdist, tensorflow'` in the job's environment to see why.")
        return Result("tensorflow", PROBLEM, f"{probe['probe_error']}. {todo}")
    if "tensorflow_error" in probe:
        error = probe["tensorflow_error"]
        todo = ("tfdist needs TensorFlow 2.16-2.21 with the tf-keras of the same minor: "
                "pip install 'tensorflow~=2.18.0' 'tf-keras~=2.18.0' (tfdist's default), or "
                "pip install tfdist beside your TensorFlow.")
        return Result("tensorflow", PROBLEM, f"TensorFlow with tf-keras does not load: {error}. "
                      f"{todo}")
    tf_version, keras_version = probe["tensorflow"], probe["tf_keras"]
    tf_dot_keras = probe.get("tf_dot_keras", f"tf-keras {keras_version}")
    versions = f"TensorFlow {tf_version}, tf.keras is {tf_dot_keras}" + (
        "" if tf_dot_keras.startswith("tf-keras") else f" (tf-keras {keras_version} beside it)")
    minor = ".".join(tf_version.split(".")[:2])
    if tf_version.split(".")[:2] != keras_version.split(".")[:2]:
        return Result(
            "tensorflow", WARN, f"{versions}: their versions differ; install the tf-keras "
            f"made for this TensorFlow: pip install 'tf-keras~={minor}.0'.")
    if minor not in SUPPORTED_TF:
        return Result(
            "tensorflow", WARN, f"{versions}: tfdist is tested with TensorFlow "
            f"{SUPPORTED_TF[0]}-{SUPPORTED_TF[-1]}; use one of those (pip install tfdist keeps "
            "a TensorFlow in that range).")
    if gpus and probe.get("tf_gpus", 0) < gpus:
        return Result(
            "tensorflow", WARN, f"{versions}, but TensorFlow sees {probe['tf_gpus']} of the "
            f"{gpus} GPU(s) this task has: it would train on the CPU. Install a TensorFlow "
            f"built for CUDA (pip install 'tensorflow[and-cuda]~={minor}.0') or load the CUDA "
            "modules your site needs.")
    return Result("tensorflow", OK, f"{versions}, {probe.get('tf_gpus', 0)} GPU(s) in TensorFlow")


def check_horovod(probe: Mapping[str, Any], strategy: str) -> Result:
    """horovod.tensorflow.keras imports: a problem under --strategy=horovod, else information."""
    needed = strategy == "horovod"
    if "probe_error" in probe or "tensorflow_error" in probe:
        return Result("horovod", SKIP, "not checked: TensorFlow did not load (see above)")
    from tfdist.distribute.horovod_setup import INSTALL_HINT  # TF-free

    if probe.get("horovod_missing"):
        if needed:
            return Result(
                "horovod", PROBLEM,
                f"Horovod is not installed, but --strategy=horovod needs it. {INSTALL_HINT}")
        return Result("horovod", INFO, "not installed (only --strategy=horovod needs it)")
    if "horovod_error" in probe:
        error = probe["horovod_error"]
        if not needed:
            return Result(
                "horovod", INFO, "horovod.tensorflow.keras does not import (only "
                f"--strategy=horovod needs it): {error}")
        # tfdist's import_horovod_keras says what to do; anything else gets the same advice.
        prefix = "HorovodSetupError: "
        message = (error[len(prefix):] if error.startswith(prefix) else
                   f"Cannot import horovod.tensorflow.keras ({error}). {INSTALL_HINT}")
        return Result("horovod", PROBLEM, message)
    built = ", ".join(f"{name} {'yes' if probe.get(key) else 'no'}"
                      for name, key in (("gloo", "gloo"), ("MPI", "mpi"), ("NCCL", "nccl")))
    if needed and not probe["gloo"]:
        return Result(
            "horovod", WARN, f"Horovod {probe['horovod']} ({built}): built without gloo, so it "
            "runs only under mpirun/horovodrun with MPI, not under a plain srun; rebuild with "
            "HOROVOD_WITH_GLOO=1 (make horovod).")
    return Result("horovod", OK, f"Horovod {probe['horovod']} imports ({built})")
