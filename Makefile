# The two commands: `make demo` (the main job end to end) and `make test` (the whole suite).
# Both create .venv from the pinned requirements when it is missing or the requirements changed: the demo
# installs requirements.txt (what the product runs on), the tests add requirements-test.txt (pytest, and the
# peers the tests compare with: torch, transformers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_output
CORPUS ?=
VOCAB_SIZE ?= 8000
DEMO_STEPS ?= 600
# DEMO_PROFILE=long: the biLM trained seven times longer, for word senses (demo/training_steps.py PROFILES).
DEMO_PROFILE ?= default
MINILM_STEPS ?= 100
PYTEST_ARGS ?=
# Test files run two at a time, each file in one worker (pytest-xdist `--dist loadfile`: a module's fixtures are
# built once); much of the suite waits on subprocesses and imports, so two workers overlap on two cores.
# `make test PYTEST_WORKERS=0` runs everything in one process.
PYTEST_WORKERS ?= 2
# `make test-under-load`: the same suite beside HOGS busy processes (a shared CI machine, or a laptop doing
# other work); the tests wait on conditions, not on fixed sleeps, so it should pass all the same, only slower.
# Each test's budget (tests/conftest.py) counts its own CPU-seconds, not wall time, so the budgets hold as they
# are: the hogs take wall time from the tests, not work.
HOGS ?= 2

.PHONY: demo test test-under-load bench clean

$(RUNTIME_STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $(STAMP)

demo: $(RUNTIME_STAMP)
	$(PY) -m demo --demo_dir '$(DEMO_DIR)' --vocab_size $(VOCAB_SIZE) --demo_steps $(DEMO_STEPS) --profile $(DEMO_PROFILE) --minilm_steps $(MINILM_STEPS) $(if $(CORPUS),--corpus '$(CORPUS)')

test: $(STAMP)
	$(PY) -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

test-under-load: $(STAMP)
	@hogs=""; for i in $$(seq $(HOGS)); do sh -c 'while :; do :; done' & hogs="$$hogs $$!"; done; \
	echo "test-under-load: $(HOGS) busy processes:$$hogs"; \
	trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	$(MAKE) --no-print-directory test

bench: $(STAMP)
	$(PY) -m benchmarks.data.tokenization
	$(PY) -m benchmarks.data.vocab_learning
	$(PY) -m benchmarks.data.pretraining_data
	$(PY) -m benchmarks.training.training
	$(PY) -m benchmarks.training.model_quality

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
