#!/usr/bin/env bash
# Writes the lock file of a test stack, tools/constraints/STACK.txt: every package that
# `pip install -c tools/constraints/STACK.in -e '.[test,docs,bench]'` installs today, pinned
# (`pip freeze`), so that a release published later changes nothing in `make test` or CI until the
# lock is written again. STACK.in holds the stack's own choices (TensorFlow, tf-keras, Keras);
# Horovod is built for the stack by `make horovod` and is not in the lock.
#
#     bash tools/lock_stack.sh default|newest      (`make lock` writes both)
set -euo pipefail
cd "$(dirname "$0")/.."
stack=${1:?usage: tools/lock_stack.sh default|newest}
in=tools/constraints/$stack.in
[ -f "$in" ] || { echo "lock_stack: no $in" >&2; exit 2; }
venv=$(mktemp -d "${TMPDIR:-/tmp}/tfdist-lock-$stack.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -c "$in" -e '.[test,docs,bench]'
{
    echo "# The $stack stack's lock: written by \`bash tools/lock_stack.sh $stack\` (\`make lock\`)"
    echo "# from $in on $(date -u +%Y-%m-%d) with $("$venv/bin/python" --version). Do not edit: edit"
    echo "# $in and write the lock again."
    "$venv/bin/python" -m pip freeze --exclude-editable | grep -v -i '^horovod'
} > "tools/constraints/$stack.txt"
echo "lock_stack: tools/constraints/$stack.txt: $(grep -vc '^#' "tools/constraints/$stack.txt") packages"
