# The few commands anyone needs. `make demo` and the `make test` family each set up (or update)
# their own virtual environment in .venv, so all work on a fresh clone and are safe to repeat.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OFFLINK := $(VENV)/bin/offlink
STAMP := $(VENV)/.offlink-installed
PYTEST_ARGS ?=

.PHONY: all venv test test-fast demo lint bench clean

all: test

# The editable install in compat mode puts the checkout's folder on sys.path (a .pth line),
# as PYTHONPATH would. The default mode installs an import hook that every offlink process
# loads (with pathlib and importlib.util): 5-15 ms of start-up that an installed offlink does
# not pay, in every link a test or benchmark runs. setuptools calls compat "transitional" and
# says so on each install. The bytecode is compiled here too: where PYTHONDONTWRITEBYTECODE is
# set, an offlink process would otherwise compile its ~50 modules from source every time
# (0.1-0.2 s of every link; a module edited later is compiled again in memory only). The
# Makefile is a prerequisite: a venv made with another recipe
# is installed again.
$(STAMP): Makefile pyproject.toml setup.py $(wildcard offlink/runtime/*.c offlink/runtime/*.h \
		 offlink/runtime/config/*.in)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(PY) -m compileall -q offlink
	touch $@

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The tests in tiers (tests/README.md). test-fast: the unit tests alone, with every toolchain on
# PATH shadowed by a stand-in that fails them. test-MARKER: the tests of one marker, as
# `make test-clang22` or `make test-host` (test-% is not .PHONY: make skips pattern rules there).
test-fast: $(STAMP)
	$(PY) -m pytest -m unit --no-toolchains $(PYTEST_ARGS)

test-%: $(STAMP)
	$(PY) -m pytest -m $* $(PYTEST_ARGS)

demo: $(STAMP)
	$(MAKE) -C samples/multi_cu OFFLINK=$(abspath $(OFFLINK)) clean run
	@echo "--- samples/multi_cu/build/multi_cu prints:"
	@cat samples/multi_cu/build/output.txt
	@echo "--- offlink inspect samples/multi_cu/build/multi_cu:"
	$(OFFLINK) inspect samples/multi_cu/build/multi_cu

lint: $(STAMP)
	$(PY) -m pip install -q ruff mypy
	$(VENV)/bin/ruff check offlink tests
	$(VENV)/bin/mypy offlink

bench: $(STAMP)
	$(PY) benchmarks/link_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info offlink/*.so
