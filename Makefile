# The few commands anyone needs. `make demo` and `make test` each set up (or update) their
# own virtual environment in .venv, so both work on a fresh clone and are safe to repeat.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OFFLINK := $(VENV)/bin/offlink
STAMP := $(VENV)/.offlink-installed
PYTEST_ARGS ?=

.PHONY: all venv test demo lint bench clean

all: test

$(STAMP): pyproject.toml setup.py $(wildcard offlink/runtime/*.c offlink/runtime/*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

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
