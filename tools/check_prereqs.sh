#!/usr/bin/env bash
# What tfdist's set-up needs from the system, checked before anything is installed: says what is
# missing and prints the one apt-get line that adds it (exit 1), else prints nothing (exit 0).
#
#   tools/check_prereqs.sh install    $PYTHON (default python3) can make a venv  (make install)
#   tools/check_prereqs.sh horovod    cmake, g++, make and $PYTHON's headers      (a Horovod build)
set -uo pipefail

PYTHON=${PYTHON:-python3}
target=${1:-install}
packages=()
reasons=()
need() { # need PACKAGE REASON
    packages+=("$1")
    reasons+=("$2")
}

case $target in
    install)
        if ! command -v "$PYTHON" >/dev/null; then
            need python3 "no '$PYTHON' on PATH"
            need python3-venv "(and its venv module)"
        elif ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
            # Debian splits venv's pip bootstrap out of python3: `python3 -m venv` then fails.
            need python3-venv "$PYTHON cannot create a virtualenv (no ensurepip)"
        fi
        ;;
    horovod)
        for tool in cmake g++ make; do
            command -v "$tool" >/dev/null || need "$tool" "no '$tool' on PATH"
        done
        if ! "$PYTHON" -c 'import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
            2>/dev/null; then
            need python3-dev "no Python.h for $PYTHON (C extensions cannot build)"
        fi
        ;;
    *)
        echo "check_prereqs.sh: unknown target '$target' (install or horovod)" >&2
        exit 2
        ;;
esac

if [[ ${#packages[@]} -gt 0 ]]; then
    what="make install"
    [[ $target == horovod ]] && what="building Horovod (make horovod, make test)"
    {
        echo "tfdist: $what needs what this machine lacks:"
        printf '  - %s\n' "${reasons[@]}"
        echo "Install it (as root), then run make again:"
        echo "  apt-get install -y ${packages[*]}"
    } >&2
    exit 1
fi
