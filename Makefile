# Two entry points, both from a fresh machine with only python3:
#   make demo   - create .venv, install jitrt, run the demo on the CPU
#   make test   - create .venv, install jitrt with test extras, run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-slow bench venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

demo: venv
	$(BIN)/python -m jitrt demo

test: venv
	$(BIN)/python -m pytest -q

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

bench: venv
	$(BIN)/python benchmarks/launch_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
