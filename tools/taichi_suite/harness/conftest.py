"""jitrt's replacement for Taichi's `tests/python/conftest.py`, copied beside Taichi's test
files by the runner: it initialises jitrt before each `@test_utils.test` test, as Taichi's
does (`ti.init(arch=ti.cpu, enable_fallback=False, **options)`; `ti.reset()` after), and
records every test's outcome, one JSON line each, in the file `$TAICHI_SUITE_OUT`:
{"test", "when", "outcome", "exc_type", "exc_mro", "message", "in_test_file", "raised_at",
"raised_line" (the source text of the statement that raised), "skip_reason"}.
"""
import json
import os
import traceback

import pytest

import taichi as ti


@pytest.fixture(autouse=True)
def wanted_arch(request, req_arch, req_options):
    if req_arch is not None:
        ti.init(arch=req_arch, enable_fallback=False, **req_options)
    yield
    if req_arch is not None:
        ti.reset()


def pytest_generate_tests(metafunc):
    if not getattr(metafunc.function, "__ti_test__", False):
        metafunc.parametrize("req_arch,req_options", [(None, None)], ids=["none"])


def _record(row):
    path = os.environ.get("TAICHI_SUITE_OUT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def _exception_row(excinfo, test_file):
    exc = excinfo.value
    frames = traceback.extract_tb(excinfo.tb)
    last = frames[-1] if frames else None
    return {"exc_type": type(exc).__name__,
            "exc_mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:2000],
            "in_test_file": bool(last and os.path.basename(last.filename) == test_file),
            "raised_at": f"{os.path.basename(last.filename)}:{last.lineno}" if last else "",
            "raised_line": (last.line or "") if last else ""}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" and report.outcome == "passed":
        return
    if report.when == "teardown" and report.outcome != "failed":
        return
    row = {"test": item.nodeid, "when": report.when, "outcome": report.outcome}
    if report.skipped:
        row["skip_reason"] = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) \
            else str(report.longrepr)
    elif report.failed and call.excinfo is not None:
        row.update(_exception_row(call.excinfo, os.path.basename(str(item.fspath))))
    _record(row)


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr)
        lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
        _record({"test": report.nodeid, "when": "collect", "outcome": "failed",
                 "message": "\n".join(ln[2:].strip() for ln in lines)[:2000] or text[-2000:]})
