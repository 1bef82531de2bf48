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
            f"{gpus} GPU(s) this task has: it would train on the CPU. Load your site's "
            "TensorFlow or CUDA module, or install TensorFlow's CUDA libraries with tfdist's gpu "
            "extra (pip install -e '/path/to/tfdist[gpu]' in your clone, which is pip install "
            f"'tensorflow[and-cuda]~={minor}.0' for this TensorFlow; docs/get-started.md).")
    return Result("tensorflow", OK, f"{versions}, {probe.get('tf_gpus', 0)} GPU(s) in TensorFlow")


def check_keras3(probe: Mapping[str, Any]) -> Result:
    """Keras 3 (`import keras`): whether tfdist trains its models under every strategy. A warning
    where it would stop some (keras_compat: replica_loss, known_sources) while tf.keras is Keras
    3, information where tf.keras is tf-keras (the user's TF_USE_LEGACY_KERAS=1)."""
    if "probe_error" in probe or "tensorflow_error" in probe:
        return Result("keras", SKIP, "not checked: TensorFlow did not load (see above)")
    if "keras3_error" in probe:
        return Result(
            "keras", WARN, f"Keras 3 does not import: {probe['keras3_error']}. Models "
            "of tf-keras (`export TF_USE_LEGACY_KERAS=1`) are not affected.")
    version = probe.get("keras3")
    if not version:
        return Result("keras", INFO, "Keras 3 is not installed: tf.keras is tf-keras")
    from tfdist.keras_compat.known_sources import MODULES, RUN, releases_run  # TF-free

    stops = []
    if probe.get("keras3_sums_replicas"):
        stops.append("it adds up the gradients of several replicas instead of averaging them "
                     "(Keras averages from 3.8 on), so tfdist stops model.fit under several "
                     "replicas (`mirrored` on several devices, `multi_worker`)")
    if probe.get("keras3_checkpoints") is False:
        stops.append("tf.train.Checkpoint cannot save its optimizers (it can from Keras 3.1 on), "
                     "so tfdist's checkpoints (a model_dir) stop")
    unknown = probe.get("keras3_unknown", [])
    if unknown:
        names = ", ".join(f"`{MODULES[n]}.{n}`" for n in unknown)
        stops.append(f"tfdist's corrections were not run on its {names}, so a Keras 3 model "
                     "stops with KerasCorrectionUnknown where they would act")
    if not stops:
        return Result(
            "keras", OK, f"Keras {version}: tfdist's corrections were run on its code; "
            "Keras 3 models train under every strategy")
    newest = releases_run(*RUN)[-1]
    install = f"pip install 'keras=={newest}' (measured: docs/compatibility.md#keras-3-releases)"
    if probe.get("tf_dot_keras", "").startswith("tf-keras"):
        return Result(
            "keras", INFO, f"Keras {version}: " + "; ".join(stops) + ". tf.keras is tf-keras "
            f"here (TF_USE_LEGACY_KERAS=1), whose models are not affected; for Keras 3 models: "
            f"{install}.")
    return Result(
        "keras", WARN, f"Keras {version}: " + "; ".join(stops) + f". Fix: {install}, or build "
        "the model with tf-keras (`export TF_USE_LEGACY_KERAS=1`).")


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
