# Two targets a user needs: `make demo` and `make test`. Both create .venv, install the CPU build of
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
	$(PY) -m pip install --quiet -e '.[dev,docs,flower,fast,tensorboard,mlflow,xgboost,lightgbm,parquet]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/cosmosfl run --config configs/default.yaml --out runs/demo --force

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
