# Two entry points, both from a fresh machine with only python3:
#   make demo   - create .venv, install jitrt, run the demo on the CPU
#   make test   - create .venv, install jitrt with test and dev extras, run ruff, mypy, the
#                 docs build (warnings as errors) and the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# installed once; again only when pyproject.toml changes (pip's output goes to a log, shown
# only if the install fails)
STAMP  := $(VENV)/.jitrt-installed

.PHONY: demo test test-min test-slow bench docs venv clean

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
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	$(BIN)/python -m pytest -q

# the HTML site (guides + API reference from the docstrings) in build/docs, warnings as errors
docs: venv
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	@echo "open build/docs/index.html"

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

bench: venv
	$(BIN)/python benchmarks/launch_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info

# the suite on the declared lower bounds (read from pyproject.toml), in a venv of their own, so
# that a false lower bound cannot come back
MIN_VENV ?= .venv-min
test-min:
	$(PYTHON) -m venv $(MIN_VENV)
	@$(MIN_VENV)/bin/python -m pip install -q --upgrade pip > /dev/null 2>&1 || true
	@pins=$$($(PYTHON) tools/lower_bounds.py); \
	echo "installing the lower bounds: $$pins"; \
	$(MIN_VENV)/bin/python -m pip install -q $$pins pytest > $(MIN_VENV)/install.log 2>&1 && \
	$(MIN_VENV)/bin/python -m pip install -q --no-deps -e . >> $(MIN_VENV)/install.log 2>&1 || \
		{ cat $(MIN_VENV)/install.log; exit 1; }
	$(MIN_VENV)/bin/python -m pip list 2>/dev/null | grep -iE '^(llvmlite|numpy|xxhash) '
	$(MIN_VENV)/bin/python -m pytest -q
