# tfdist — set-up, tests and demos. `make test` works on a fresh machine: it creates .venv,
# installs tfdist with its test extras and runs the lint and the whole test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tfdist-installed
# The default stack (TensorFlow 2.18) and the newest TensorFlow, each with its own Horovod build,
# each installed from its lock file (every package pinned; `make lock` writes them from *.in).
CONSTRAINTS := tools/constraints/default.txt
NEWEST := .venv-newest
NEWEST_STAMP := $(NEWEST)/.tfdist-installed
NEWEST_HOROVOD_STAMP := $(NEWEST)/.horovod-installed
HOROVOD_STAMP := $(VENV)/.horovod-installed
BENCH_STAMP := $(VENV)/.bench-installed
DOCS_STAMP := $(VENV)/.docs-installed
SRC    := tfdist pipelines tests examples bench jobs tools/docs tools/run_tests.py tools/slowest_tests.py \
          tools/keras3_sources.py tools/keras3_releases.py

.PHONY: help install install-newest test test-fast test-newest test-range lint format clean
.PHONY: slurm-up slurm-down
.PHONY: horovod demo
.PHONY: bench docs reference lock

help:
	@echo "make install    create .venv and install tfdist with its test extras"
	@echo "make demo       train digits with 2 local workers (multi_worker), print accuracy and speed"
	@echo "make test       lint + the docs + the whole test suite (what CI runs)"
	@echo "make test-fast  lint + tests not marked slow"
	@echo "make install-newest  create .venv-newest (the newest TensorFlow) with its Horovod build"
	@echo "make test-newest  the whole suite on the newest TensorFlow (.venv-newest), Horovod too"
	@echo "make test-range   TensorFlow 2.16, 2.17, 2.19, 2.20: kept by pip, 2 workers and 2 Horovod ranks train"
	@echo "make docs       build the docs site into site/ (warnings are errors); open site/index.html"
	@echo "make reference  rewrite docs/reference/api.md, cli.md and environment.md from the code"
	@echo "make lock       rewrite both stacks' lock files (tools/constraints/*.txt) from *.in"
	@echo "make format     reformat the sources in place (yapf)"
	@echo "make horovod    build Horovod 0.28.1 (gloo) once, cache the wheel, install it into .venv"
	@echo "make bench      benchmarks: tfdist vs hand-written TF/Horovod vs the machine (bench/results/)"
	@echo "make slurm-up   start the two-node test Slurm cluster (slurm-down stops it)"

# Re-install only when the package metadata changes, so a second `make test` starts at once.
$(STAMP): setup.cfg pyproject.toml $(CONSTRAINTS)
	@test -x $(BIN)/python || PYTHON=$(PYTHON) bash tools/check_prereqs.sh install
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e '.[test]'
	touch $@

# The newest TensorFlow and tf-keras that setup.cfg accepts, in a venv of its own.
$(NEWEST_STAMP): setup.cfg pyproject.toml tools/constraints/newest.txt
	@test -x $(NEWEST)/bin/python || PYTHON=$(PYTHON) bash tools/check_prereqs.sh install
	test -x $(NEWEST)/bin/python || $(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install --quiet --upgrade pip
	$(NEWEST)/bin/python -m pip install --quiet -c tools/constraints/newest.txt -e '.[test]'
	touch $@

install: $(STAMP)

# Horovod 0.28.1 with gloo, built against the venv's TensorFlow the first time (minutes) and cached
# outside the repo (~/.cache/tfdist/wheels); later installs, fresh clones included, take seconds.
$(HOROVOD_STAMP): $(STAMP) tools/build_horovod_wheel.sh $(wildcard tools/horovod-patches/*.patch)
	PYTHON=$(BIN)/python bash tools/build_horovod_wheel.sh --install
	touch $@

horovod: $(HOROVOD_STAMP)

# The same for the newest stack: its own wheel (the cache key holds the TensorFlow version).
$(NEWEST_HOROVOD_STAMP): $(NEWEST_STAMP) tools/build_horovod_wheel.sh $(wildcard tools/horovod-patches/*.patch)
	PYTHON=$(NEWEST)/bin/python bash tools/build_horovod_wheel.sh --install
	touch $@

# The newest stack's venv with its Horovod (what `make test-newest` needs first).
install-newest: $(NEWEST_HOROVOD_STAMP)

# The main job: 2 local workers under MultiWorkerMirroredStrategy on scikit-learn's digits.
# Run again, it reports the finished run; `make demo DEMO_ARGS=--restart` trains anew.
DEMO_DIR ?= runs/demo
DEMO_ARGS ?=
demo: $(STAMP)
	@echo "tfdist launch -n 2 -- tfdist train --strategy=multi_worker $(strip --model_dir=$(DEMO_DIR) $(DEMO_ARGS))"
	@PATH="$(CURDIR)/$(BIN):$$PATH" tfdist launch -n 2 -- \
	  tfdist train --strategy=multi_worker --model_dir=$(DEMO_DIR) $(DEMO_ARGS)
	@$(BIN)/python -c 'import json; m = json.load(open("$(DEMO_DIR)/metrics.json")); \
	  print("demo: {strategy} with {world_size} workers: test accuracy {acc:.4f}, " \
	        "{samples_per_sec:.0f} samples/s ($(DEMO_DIR)/metrics.json)" \
	        .format(acc=m["final"]["test_accuracy"], **m))'

lint: $(STAMP)
	$(BIN)/yapf --diff --recursive --parallel $(SRC)
	$(BIN)/flake8 $(SRC)

format: $(STAMP)
	$(BIN)/yapf --in-place --recursive --parallel $(SRC)

# tools/run_tests.py: the Slurm batch-job tests beside the others (they wait most of the time), then
# the tests marked `alone`; JUnit XML per part in build/test-reports/ (.ci/run prints the test time
# and the slowest tests from it). A single test or folder: `.venv/bin/python -m pytest PATH`.
test: lint docs $(HOROVOD_STAMP)
	$(BIN)/python tools/run_tests.py default

test-fast: lint
	$(BIN)/python -m pytest -m "not slow"

# The suite on the newest TensorFlow, Horovod included. VIRTUAL_ENV and PATH as after `activate`,
# so that `tfdist launch`, the field scripts and the Slurm jobs (jobs/common.sh) use this venv too.
# In CI it runs what a TensorFlow, Keras or Horovod release can break: every test not marked slow,
# and the slow ones marked newest (each engine learning on Keras 3, the Keras 3 corrections, the
# same math as one process, Horovod's build and Keras bindings, the two lines, users' scripts).
# Left to the default stack: the features tfdist builds on top (resume, preemption, the watchdog,
# checkpoints, the evaluator, profiling, ...), the Slurm batch-job tests and the tests marked
# default_stack, which keeps .ci/run within its budget (docs/contributing.md).
# `make test-newest NEWEST_TESTS=` runs them all there too.
NEWEST_TESTS ?= not slurm and not default_stack and (not slow or newest)
test-newest: $(NEWEST_HOROVOD_STAMP)
	VIRTUAL_ENV=$(CURDIR)/$(NEWEST) PATH="$(CURDIR)/$(NEWEST)/bin:$$PATH" \
	  $(NEWEST)/bin/python tools/run_tests.py newest "$(NEWEST_TESTS)"

# The other TensorFlow versions setup.cfg accepts: a venv each (.venv-range/), the check of
# tools/check_tf_range.sh (TensorFlow kept by `pip install -e .`, tf-keras selected, 2 workers
# train a user's Keras script, Horovod built for that TensorFlow and Horovod's Keras example trained
# on 2 ranks).
test-range:
	PYTHON=$(PYTHON) bash tools/check_tf_range.sh

# Benchmarks (bench/, not tests): JSON + PNG per benchmark in bench/results/, a summary table at
# the end, the tables of docs/benchmarks.md rewritten. Needs Horovod and the `bench` extra
# (matplotlib, scipy). Under 30 minutes: the comparisons longest since measured that fit in 22,
# the others kept on record; BENCH_ALL=1: every comparison (25-46 minutes). BENCH_QUICK=1: the
# equal-settings rows only (about 9 minutes, a cost told to +-5 %), the others kept on record.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e '.[bench]'
	touch $@

bench: $(HOROVOD_STAMP) $(BENCH_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/run_all.py

# The docs site (mkdocs.yml, docs/): reference pages generated from the code; --strict makes a
# broken link, reference or anchor an error. tests/test_docs.py checks what the site contains.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e '.[docs]'
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# Both stacks' lock files from their *.in: every package pip installs today, pinned.
lock:
	PYTHON=$(PYTHON) bash tools/lock_stack.sh default
	PYTHON=$(PYTHON) bash tools/lock_stack.sh newest

# docs/reference/api.md, cli.md and environment.md, rewritten from the code (committed: they read
# on GitHub too; `make docs` fails while they are out of date).
reference: $(STAMP)
	$(BIN)/python tools/docs/reference.py

# The two-node Slurm test cluster in network namespaces (tools/slurm/cluster.sh; root needed).
slurm-up:
	tools/slurm/cluster.sh up

slurm-down:
	tools/slurm/cluster.sh down

clean:
	rm -rf $(VENV) $(NEWEST) .venv-range build site *.egg-info .pytest_cache
