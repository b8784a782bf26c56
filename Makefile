# Two entry points, both from a fresh machine with only python3:
#   make demo   - create .venv, install jitrt, run the demo on the CPU
#   make test   - create .venv, install jitrt with test and dev extras, run ruff, mypy and the
#                 test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# installed once; again only when pyproject.toml changes (pip's output goes to a log, shown
# only if the install fails)
STAMP  := $(VENV)/.jitrt-installed

.PHONY: demo test test-slow bench venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip > /dev/null 2>&1 || true

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing jitrt into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install -q -e '.[test,dev]' > $(VENV)/install.log 2>&1 || \
		{ cat $(VENV)/install.log; exit 1; }
	@touch $@

venv: $(STAMP)

demo: venv
	$(BIN)/python -m jitrt demo

test: venv
	$(BIN)/python -m ruff check jitrt tests benchmarks cache_fixtures tools
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

bench: venv
	$(BIN)/python benchmarks/launch_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
