# Two entry points, both from a fresh machine with only python3:
#   make demo   - create .venv, install jitrt alone (llvmlite, numpy, xxhash), run the demo on
#                 the CPU
#   make test   - the same .venv, plus the test and dev extras, then ruff, mypy, the docs build
#                 (warnings as errors) and the default test suite (under 10 minutes on a 2-core
#                 CI machine: tests marked `slow` are left out)
#   make test-all - the whole suite: the `slow` tests too, and every kernel's AMDGPU build for
#                 both gfx targets (benchmarks/gpu/run.sh runs the slow tests on the GPU machine)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# each install runs once, and again only when pyproject.toml changes; pip's output goes to a
# log, shown only if the install fails. Two stamps: the demo's install does not stand for the
# test extras, so `make test` after `make demo` still installs them.
STAMP      := $(VENV)/.jitrt-installed
TEST_STAMP := $(VENV)/.jitrt-test-installed

.PHONY: demo test test-all test-min test-slow bench docs venv clean

$(BIN)/python:
	@echo "creating the virtual environment $(VENV) ($(PYTHON) -m venv)"
	@$(PYTHON) -m venv $(VENV)
	@# an editable install of a pyproject-only package needs pip 21.3 (Python 3.10.0 has 21.2)
	@$(BIN)/python -c "import pip, sys; sys.exit(tuple(map(int, pip.__version__.split('.')[:2]))\
		< (21, 3))" || { echo "upgrading pip"; $(BIN)/python -m pip install -q --upgrade pip; }

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing jitrt and its dependencies (llvmlite, numpy, xxhash) into $(VENV)" \
		"(log: $(VENV)/install.log)"
	@# --no-compile: Python writes the bytecode of what is imported when it is first imported
	@# (4 of the install's 18 s of CPU went to compiling every file of numpy)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --no-compile -e . \
		> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	@echo "installing jitrt with the test and dev extras (pytest, GPU assemblers, ruff, mypy," \
		"sphinx) into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,dev]' \
		> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP) $@

venv: $(STAMP)

demo: $(STAMP)
	@echo "running the demo: $(BIN)/python -m jitrt demo"
	@$(BIN)/python -m jitrt demo

test: $(TEST_STAMP)
	$(BIN)/python -m ruff check jitrt tests benchmarks cache_fixtures tools
	$(BIN)/python -m mypy
	$(BIN)/python -m mypy --strict --follow-imports=silent jitrt/backends jitrt/runtime jitrt/native jitrt/launch_plan.py
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	$(BIN)/python -m pytest -q

# the HTML site (guides + API reference from the docstrings) in build/docs, warnings as errors
docs: $(TEST_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	@echo "open build/docs/index.html"

test-slow: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -m slow

# what `make test` checks, with the slow tests (-m '' lifts pyproject's -m 'not slow') and the
# AMDGPU build of every kernel for both gfx targets instead of one in turn
test-all: $(TEST_STAMP)
	$(BIN)/python -m ruff check jitrt tests benchmarks cache_fixtures tools
	$(BIN)/python -m mypy
	$(BIN)/python -m mypy --strict --follow-imports=silent jitrt/backends jitrt/runtime jitrt/launch_plan.py
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	JITRT_TEST_AMDGPU=all $(BIN)/python -m pytest -q -m ''

bench: $(STAMP)
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
