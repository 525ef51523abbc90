# The few things a person does here. `make report` and `make test` are all a newcomer needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PARAMS ?= params/default.yaml
# The [jax] and [torch] extras are Keras' other backends (CPU builds here); [compilers]: IREE, ONNX Runtime, OpenVINO.
EXTRAS ?= dev,jax,torch,compilers
# Pins for a CPU host (torch's CPU build). Empty on a CUDA host, after `pip install "jax[cuda12]"`:
# make report EXTRAS=dev,gpu,jax,torch CONSTRAINTS= (TensorFlow with CUDA replaces the CPU build; PyPI's torch
# is a CUDA build).
CONSTRAINTS ?= constraints-cpu.txt
STAMP := $(VENV)/.installed-$(EXTRAS)
PYTEST_ARGS ?=
# The suite runs in two parts. First on TEST_WORKERS pytest-xdist workers, while the quick run goes on in the
# background (tests/conftest.py starts it before the workers start and collect, RESNET_LAB_QUICK_RUN_EARLY; the tests
# that read it come last): it is mostly one-core work (imports, tracing, compiling), so it overlaps with the rest.
# Then, alone, the tests marked serial: they time a slowdown, load every core or bind ports (the quick run's local
# cluster picks ports too).
# TEST_WORKERS=0: the first part in one process. The second part reads the first part's quick run (the folder it
# notes in QUICK_RUN_RECORD) instead of making another: a serial test may read it too.
TEST_WORKERS ?= 2
QUICK_RUN_RECORD := $(CURDIR)/.pytest_cache/resnet-lab-quick-run
# The test modules that hold a serial test, noted by the first part (tests/conftest.py): the second collects those.
SERIAL_RECORD := $(CURDIR)/.pytest_cache/resnet-lab-serial-modules

.PHONY: setup report quick test lint lab bench clean-venv clean-cache help

help:
	@echo "make report   run every notebook with $(PARAMS) into outputs/runs/<timestamp>-<name>/"
	@echo "make test     ruff, the import layers (lint-imports) and the test suite (runs params/quick.yaml)"
	@echo "make quick    the report with params/quick.yaml (tiny sizes, a few minutes)"
	@echo "make lab      JupyterLab on notebooks/ with the project's environment"
	@echo "make bench    speed targets (tests/benchmarks, minutes, wants a quiet machine)"
	@echo "make clean-cache  remove the exported models' cache (outputs/cache; resnet-lab cache --help prunes by age)"

# Creates .venv at the repo root if missing and installs the checkout into it (editable). Byte-compiled by
# compileall on every core after pip (--no-compile): pip compiles one file after another (60 of the install's
# 90 s on 2 cores; compileall -j 0: 9 s). Not left to the first import: where PYTHONDONTWRITEBYTECODE is set,
# every process would compile TensorFlow again (its import went from 4 to 15 s). A file that does not compile
# (torch ships one for Python 3.12) is left as pip leaves it. The package and the tests' helpers too: every
# worker, kernel and test process reads them (pytest's collection: 18 s -> 13 s); an edited file is compiled
# again in memory, as without the cache.
# Re-runs when pyproject.toml or the constraints change. EXTRAS=dev,gpu,jax,torch CONSTRAINTS= on a CUDA host.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check --no-compile $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[$(EXTRAS)]"
	@$(PY) -m compileall -q -j 0 $(VENV)/lib src tests >/dev/null 2>&1 || true
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)

report: $(STAMP)
	$(VENV)/bin/resnet-lab run $(PARAMS)

quick: $(STAMP)
	$(VENV)/bin/resnet-lab run params/quick.yaml

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	@rm -f $(QUICK_RUN_RECORD) $(SERIAL_RECORD)
	RESNET_LAB_QUICK_RUN_EARLY=1 RESNET_LAB_QUICK_RUN_RECORD=$(QUICK_RUN_RECORD) \
	  RESNET_LAB_SERIAL_RECORD=$(SERIAL_RECORD) \
	  $(PY) -m pytest -n $(TEST_WORKERS) -m "not benchmark and not serial" $(PYTEST_ARGS) || [ $$? = 5 ]
	RESNET_LAB_QUICK_RUN=$$(cat $(QUICK_RUN_RECORD) 2>/dev/null) \
	  $(PY) -m pytest -m "serial and not benchmark" $(PYTEST_ARGS) $$(cat $(SERIAL_RECORD) 2>/dev/null) || [ $$? = 5 ]

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

bench: $(STAMP)
	$(PY) -m pytest tests/benchmarks -m benchmark -s $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)

# The exported models (outputs/cache/export/<model>-<size>px-seed0-<key>/, ~400 MB for ResNet-50) are shared by
# every run of one commit and environment; `resnet-lab cache --keep N` or `--older-than DAYS` prunes part of it.
clean-cache:
	rm -rf outputs/cache
