# The two commands: `make demo` (the main job end to end) and `make test` (the whole suite).
# Both create .venv from the pinned requirements when it is missing or the requirements changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_output
CORPUS ?=
VOCAB_SIZE ?= 8000
DEMO_STEPS ?= 600
MINILM_STEPS ?= 100
PYTEST_ARGS ?=

.PHONY: demo test bench clean

$(STAMP): requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m demo --demo_dir '$(DEMO_DIR)' --vocab_size $(VOCAB_SIZE) --demo_steps $(DEMO_STEPS) --minilm_steps $(MINILM_STEPS) $(if $(CORPUS),--corpus '$(CORPUS)')

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks.tokenization
	$(PY) -m benchmarks.vocab_learning
	$(PY) -m benchmarks.pretraining_data
	$(PY) -m benchmarks.training
	$(PY) -m benchmarks.model_quality

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
