# Every install step lives here: `make test` and `make run` work on a fresh machine with only python3.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

# Extra prerequisites of `make test`, added by the fragments in mk/ (the control plane, for one).
TEST_PREREQS :=

.PHONY: help venv lint typecheck test test-unit run clean

help:
	@echo "make run        control plane + reference platform + operator, examples/k8s/ applied until Ready"
	@echo "make test       everything: ruff, mypy --strict, the whole pytest suite"
	@echo "make test-unit  the fast pure-layer tests only"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check operator tests bench scripts
	$(BIN)/ruff format --check operator tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy operator/bundle_operator

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

-include mk/*.mk

test: $(STAMP) lint typecheck $(TEST_PREREQS)
	$(BIN)/pytest $(PYTEST_ARGS)

# The main job on the embedded defaults: a local control plane (or the cluster of $KUBECONFIG), the
# reference platform and the operator; examples/k8s/ applied and watched until Ready, then all of it
# runs until Ctrl-C (RUN_ONCE=1 stops once Ready). envtest builds the control plane the first time.
run: $(STAMP) envtest
	$(BIN)/python scripts/local_run.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
