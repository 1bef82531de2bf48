#!/usr/bin/env bash
# The TensorFlow versions setup.cfg accepts beyond the two the suites test (2.18: `make test`,
# 2.21: `make test-newest`): for each, a venv that already holds that TensorFlow and its tf-keras,
# then `pip install -e .` into it, then the checks:
#   1. pip kept that TensorFlow (tfdist never up- or downgrades a cluster's TensorFlow);
#   2. `import tfdist` gives tf.keras = tf-keras of the same minor;
#   3. a user's plain Keras script (examples/tf_keras_backup_and_restore.py) trains with 2 workers
#      under `tfdist launch` (MultiWorkerMirroredStrategy) to >= 0.95 test accuracy;
#   4. Horovod builds against that TensorFlow (tools/build_horovod_wheel.sh: once, then cached) and
#      Horovod's Keras example (examples/horovod_keras.py) trains on 2 ranks to >= 0.95.
#
#   tools/check_tf_range.sh [VERSION...]        default: 2.16 2.17 2.19 2.20
#   TFDIST_RANGE_DIR   where the venvs live (default: .venv-range/), kept for the next run
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON=${PYTHON:-python3}
ROOT=${TFDIST_RANGE_DIR:-$REPO/.venv-range}
VERSIONS=("$@")
[[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(2.16 2.17 2.19 2.20)
mkdir -p "$ROOT"
failed=()
for v in "${VERSIONS[@]}"; do
    venv=$ROOT/tf$v
    echo "== TensorFlow $v ($venv)"
    start=$(date +%s)
    if [[ ! -x $venv/bin/python ]]; then
        "$PYTHON" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
    fi
    # The cluster's TensorFlow first, as a site module or an earlier pip install would leave it.
    "$venv/bin/python" -m pip install --quiet "tensorflow==$v.*" "tf-keras==$v.*"
    before=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("tensorflow"))')
    "$venv/bin/python" -m pip install --quiet -e "$REPO"
    after=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("tensorflow"))')
    if [[ $before != "$after" ]]; then
        echo "FAIL $v: pip install -e . changed TensorFlow $before -> $after"
        failed+=("$v")
        continue
    fi
    out=$(mktemp -d)
    if ! TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" - "$v" <<'PY'
import sys
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # the user's switch: tfdist keeps it
import tfdist
import tensorflow as tf
import tf_keras
assert tf.keras.Model.__module__.startswith("tf_keras."), tf.keras.Model.__module__
assert tf.__version__.startswith(sys.argv[1] + "."), tf.__version__
assert tf_keras.__version__.startswith(sys.argv[1] + "."), tf_keras.__version__
print(f"tensorflow {tf.__version__}, tf-keras {tf_keras.__version__}: tf.keras is tf-keras")
PY
    then
        echo "FAIL $v: tf.keras was not tf-keras $v under TF_USE_LEGACY_KERAS=1"
        failed+=("$v")
        continue
    fi
    if (TF_USE_LEGACY_KERAS=1 PATH="$venv/bin:$PATH" TF_CPP_MIN_LOG_LEVEL=3 \
        timeout 600 "$venv/bin/tfdist" launch -n 2 -- python examples/tf_keras_backup_and_restore.py \
        "$out" 6 >"$out/log" 2>&1) && "$venv/bin/python" - "$out" <<'PY'
import glob, json, sys
r = json.load(open(sorted(glob.glob(sys.argv[1] + "/result-*.json"))[0]))  # examples/results.py
assert r["replicas"] == 2 and r["test_accuracy"] >= 0.95, r
print(f"plain Keras script, 2 workers: test accuracy {r['test_accuracy']:.4f}")
PY
    then
        echo "ok $v: TensorFlow $after kept, trained in $(($(date +%s) - start)) s"
    else
        tail -20 "$out/log"
        echo "FAIL $v: the 2-worker training failed (log above)"
        failed+=("$v")
        rm -rf "$out"
        continue
    fi
    # Horovod for this TensorFlow (built once, then cached), and Horovod's Keras example on 2 ranks.
    start=$(date +%s)
    if ! PYTHON=$venv/bin/python bash tools/build_horovod_wheel.sh --install >"$out/build" 2>&1; then
        tail -40 "$out/build"
        echo "FAIL $v: Horovod did not build or install (log above)"
        failed+=("$v")
        rm -rf "$out"
        continue
    fi
    grep -E '^\[horovod\] (built|cached)' "$out/build" || true
    rm -f "$out"/result-*.json  # the plain script's
    if (TF_USE_LEGACY_KERAS=1 PATH="$venv/bin:$PATH" TF_CPP_MIN_LOG_LEVEL=3 \
        timeout 600 "$venv/bin/tfdist" launch -n 2 -- python examples/horovod_keras.py "$out" \
        >"$out/log" 2>&1) && "$venv/bin/python" - "$out" <<'PY'
import glob, json, sys
r = json.load(open(sorted(glob.glob(sys.argv[1] + "/result-*.json"))[0]))  # examples/results.py
assert r["size"] == 2 and r["test_accuracy"] >= 0.95, r
print(f"Horovod's Keras example, 2 ranks: test accuracy {r['test_accuracy']:.4f}")
PY
    then
        echo "ok $v: Horovod built or found and trained in $(($(date +%s) - start)) s"
    else
        tail -20 "$out/log"
        echo "FAIL $v: the 2-rank Horovod training failed (log above)"
        failed+=("$v")
    fi
    rm -rf "$out"
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "check_tf_range: failed for TensorFlow ${failed[*]}"
    exit 1
fi
echo "check_tf_range: ${#VERSIONS[@]} passed, 0 failed"
