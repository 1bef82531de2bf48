#!/usr/bin/env bash
# Build Horovod (gloo only, TensorFlow only) from the PyPI sdist, with tfdist's patches
# (tools/horovod-patches), against the TensorFlow of a given Python, ONCE, and keep the wheel in a
# cache outside the repository; install it from there.
#
#   tools/build_horovod_wheel.sh [--install] [--force]
#
#   PYTHON                the interpreter whose TensorFlow Horovod is built against (.venv/bin/python)
#   HOROVOD_VERSION       0.28.1
#   TFDIST_WHEEL_CACHE    ${XDG_CACHE_HOME:-~/.cache}/tfdist/wheels
#
# The wheel links against TensorFlow's C++ ABI, so the cache key holds the Horovod, TensorFlow and
# Python versions: a different TensorFlow gets its own build. A second run (or a fresh clone on the
# same machine) finds the wheel and takes seconds. A working Horovod of the same version that tfdist
# did not build (e.g. a site build with MPI/NCCL) is left alone; an older tfdist build is replaced.
set -euo pipefail

PYTHON=${PYTHON:-.venv/bin/python}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
CACHE_ROOT=${TFDIST_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfdist/wheels}
INSTALL=0
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --install) INSTALL=1 ;;
        --force) FORCE=1 ;;
        -h | --help)
            sed -n '2,15p' "$0"
            exit 0
            ;;
        *)
            echo "build_horovod_wheel.sh: unknown argument '$arg' (use --install, --force)" >&2
            exit 2
            ;;
    esac
done

log() { echo "[horovod] $*" >&2; }

# Versions from the package metadata: importing TensorFlow takes seconds.
if ! read -r TF_VERSION PY_TAG < <("$PYTHON" -c '
import sys
from importlib.metadata import version
print(version("tensorflow"), "cp%d%d" % sys.version_info[:2])' 2>/dev/null); then
    log "TensorFlow is not installed for $PYTHON: install tfdist first (make install)."
    exit 1
fi
# The TensorFlow versions tfdist builds Horovod 0.28.1 against (with tools/horovod-patches): those
# setup.cfg accepts, each built and trained on 2 ranks (make test, test-newest, test-range).
HOROVOD_TF_BUILT="2.16 2.17 2.18 2.19 2.20 2.21"
TF_MINOR=$(echo "$TF_VERSION" | cut -d. -f1,2)
if [[ $HOROVOD_VERSION == 0.28.1 && " $HOROVOD_TF_BUILT " != *" $TF_MINOR "* && ${TFDIST_HOROVOD_ANY_TF:-0} != 1 ]]; then
    log "Horovod $HOROVOD_VERSION is built and tested by tfdist against TensorFlow ${HOROVOD_TF_BUILT// /, };"
    log "this Python has TensorFlow $TF_VERSION ($PYTHON). Install one of those (\`make install\`:"
    log "tools/constraints/default.in), or use --strategy=multi_worker, which needs no Horovod."
    log "(TFDIST_HOROVOD_ANY_TF=1 tries the build anyway.)"
    exit 1
fi
# tfdist's fixes to Horovod (tools/horovod-patches/*.patch, applied in name order); their hash is in
# the cache key, so a changed patch gets a new build.
PATCH_DIR="$(cd "$(dirname "$0")" && pwd)/horovod-patches"
PATCHES=()
if [[ $HOROVOD_VERSION == 0.28.1 ]]; then
    PATCHES=("$PATCH_DIR"/*.patch)
fi
PATCH_ID=$(cat "${PATCHES[@]}" /dev/null | sha256sum | cut -c1-8)
CACHE_DIR="$CACHE_ROOT/horovod-$HOROVOD_VERSION-p$PATCH_ID-tf$TF_VERSION-$PY_TAG"

installed_from() {
    # Where pip installed Horovod from (its direct_url.json), "" when unknown; fails without one.
    "$PYTHON" - <<'EOF' 2>/dev/null
from importlib.metadata import distribution
print(distribution("horovod").read_text("direct_url.json") or "")
EOF
}

installed_ok() {
    # An installed Horovod of this version whose TensorFlow ops load (imports TensorFlow).
    TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" - "$HOROVOD_VERSION" <<'EOF' 2>/dev/null
import sys
import horovod
assert horovod.__version__ == sys.argv[1], horovod.__version__
import horovod.tensorflow as hvd
assert hvd.gloo_built(), "Horovod without gloo"
EOF
}

find_wheel() { ls "$CACHE_DIR"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n 1; }

# One build at a time per wheel (two `make test` in two clones on the same machine); wheels for
# other TensorFlow versions build meanwhile.
mkdir -p "$CACHE_ROOT"
if command -v flock >/dev/null; then
    exec 9>"$CACHE_ROOT/.lock-$(basename "$CACHE_DIR")"
    flock 9
fi

WHEEL=$(find_wheel || true)
if [[ -n "$WHEEL" && $FORCE == 0 ]]; then
    log "cached wheel: $WHEEL"
else
    # Everything the build needs, said at once with the apt-get line that adds it.
    PYTHON=$PYTHON bash "$(dirname "$0")/check_prereqs.sh" horovod || exit 1
    # --no-build-isolation builds with this interpreter's setuptools (Python >= 3.12 venvs have none).
    if ! "$PYTHON" -c 'import setuptools, wheel' 2>/dev/null; then
        "$PYTHON" -m pip install --quiet setuptools wheel
    fi
    log "building Horovod $HOROVOD_VERSION (gloo, TensorFlow $TF_VERSION, $PY_TAG); 2 cores: ~1.5 min idle, 10-20 min loaded"
    mkdir -p "$CACHE_DIR"
    BUILD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tfdist-horovod-build.XXXXXX")
    trap 'rm -rf "$BUILD_DIR"' EXIT
    start=$(date +%s)
    # --no-build-isolation: build against the TensorFlow installed in this interpreter.
    # MAKEFLAGS: Horovod's setup.py runs make -j8 unless MAKEFLAGS is set.
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
        --dest "$BUILD_DIR" "horovod==$HOROVOD_VERSION"
    tar -xzf "$BUILD_DIR/horovod-$HOROVOD_VERSION.tar.gz" -C "$BUILD_DIR"
    SRC_DIR="$BUILD_DIR/horovod-$HOROVOD_VERSION"
    for p in "${PATCHES[@]}"; do
        log "applying $(basename "$p")"
        if command -v patch >/dev/null; then
            patch -d "$SRC_DIR" -p1 --forward --quiet <"$p"
        else
            git -C "$SRC_DIR" apply -p1 "$p"
        fi
    done
    # ccache, when installed, makes a rebuild (another TensorFlow, a changed patch) take a fraction
    # of the time: paths relative to the throw-away build directory so that they hit.
    if command -v ccache >/dev/null && [[ ${TFDIST_NO_CCACHE:-0} != 1 ]]; then
        export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
        export CCACHE_BASEDIR=$BUILD_DIR CCACHE_NOHASHDIR=1
        log "using ccache ($(ccache --get-config cache_dir))"
    fi
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        MAKEFLAGS=${MAKEFLAGS:--j$(nproc)} TF_CPP_MIN_LOG_LEVEL=3 \
        "$PYTHON" -m pip wheel --no-build-isolation --no-deps --no-cache-dir \
        --wheel-dir "$BUILD_DIR" "$SRC_DIR"
    built=$(ls "$BUILD_DIR"/horovod-"$HOROVOD_VERSION"-*.whl)
    mv -f "$built" "$CACHE_DIR/"
    WHEEL=$(find_wheel)
    log "built $WHEEL in $(($(date +%s) - start)) s"
fi

if [[ $INSTALL == 1 ]]; then
    origin=$(installed_from || echo none)
    if [[ $FORCE == 0 && $origin == *"$CACHE_DIR/"* ]]; then
        log "Horovod $HOROVOD_VERSION from $CACHE_DIR already installed; kept."
    elif [[ $FORCE == 0 && $origin != none && $origin != *"$CACHE_ROOT/"* ]] && installed_ok; then
        # Not one of ours (a site build, say): a working Horovod of this version is the user's.
        log "Horovod $HOROVOD_VERSION (not built by tfdist) installed and working; kept."
    else
        start=$(date +%s)
        # Dependencies (cloudpickle, psutil, pyyaml, packaging) come from the index; Horovod itself
        # only from the cached wheel.
        "$PYTHON" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
        "$PYTHON" -m pip install --quiet cloudpickle psutil pyyaml packaging  # its dependencies
        if ! installed_ok; then
            log "installed $WHEEL but 'import horovod.tensorflow' fails; rebuild with --force."
            exit 1
        fi
        log "installed $WHEEL in $(($(date +%s) - start)) s"
    fi
fi
