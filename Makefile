# Two targets a user needs: `make demo` (a comparison on digits) and `make test`. Both create .venv, install the CPU build of
# torch 2.13.0 first (a bare `torch` requirement would pull a multi-GB CUDA build), then cosmosfl.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
STAMP := $(VENV)/.cosmosfl-installed

.PHONY: demo test lint venv clean presets

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==$(TORCH_VERSION)
	$(PY) -m pip install --quiet -e '.[dev,docs,flower,fast,tensorboard,mlflow,xgboost,lightgbm,parquet,privacy]'
	touch $(STAMP)

venv: $(STAMP)

# COSMOS, COMET and `local` on identical digits splits, two seeds (configs/demo.yaml says why it
# is set so); ends with the table, each algorithm's per-client gain over `local`, the files
# written and where to read on. Run again, it skips the finished runs and reprints the report.
demo: $(STAMP)
	$(VENV)/bin/cosmosfl compare --config configs/demo.yaml --algorithms cosmos,comet,local --seeds 1,2 --out runs/demo --force
	@echo "Where COSMOS wins and where it does not, by data set, client kind and server model: docs/ablations.md (Findings at a glance)."

test: $(STAMP)
	$(PY) -m ruff check src tests
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check src tests
	$(PY) -m ruff format --check src tests

# The presets shipped in the package are copies of configs/ (a test fails when they differ).
presets:
	rm -f src/cosmosfl/presets/*.yaml
	cp configs/*.yaml src/cosmosfl/presets/

clean:
	rm -rf $(VENV) runs build *.egg-info src/*.egg-info
