"""tools/taichi_suite: how a recorded test outcome is sorted (no Taichi needed)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools" / "taichi_suite"))
import classify  # noqa: E402


def row(exc_type, message, mro=(), in_test_file=False, when="call"):
    return {"outcome": "failed", "when": when, "exc_type": exc_type, "message": message,
            "exc_mro": [exc_type, *mro], "in_test_file": in_test_file}


def test_categories():
    assert classify.classify({"outcome": "passed", "when": "call"}) == ("passed", "")
    assert classify.classify(row("AssertionError", "assert 1 == 2", in_test_file=True)) == \
        ("wrong", "assertion on values")
    cat, reason = classify.classify(row("NotInJitrt", "jitrt.atomic_mul is not in jitrt: ...",
                                        ["AttributeError"]))
    assert cat == "missing" and reason.startswith("NotInJitrt: jitrt.atomic_mul")
    assert classify.classify(row("KernelTypeError", "/a.py:3:5: dtype mismatch\n    x\n    ^"))\
        == ("error", "KernelTypeError: dtype mismatch")
    framed = ('\nFile "/a.py", line 3, in f:\n    x\n    ^\n/a.py:3:5: dtype mismatch')
    assert classify.classify(row("KernelTypeError", framed)) == \
        ("error", "KernelTypeError: dtype mismatch")
    assert classify.classify(row("Failed", "DID NOT RAISE <class 'SyntaxError'>"))[0] == "error"
    assert classify.classify(row("AssertionError", "Regex pattern did not match. not supported"
                                 ))[1].startswith("an error of the right kind")


def test_an_element_comparison_taichi_always_finds_true_is_not_a_wrong_value():
    failed = row("AssertionError", "assert array([100., 100.], dtype=float32) == [20, 20]",
                 in_test_file=True)
    failed["raised_line"] = "assert arr[0] == [20, 20, 20]"
    assert classify.classify(failed) == ("n/a", classify.VACUOUS)
    for line in ("assert arr.to_numpy()[0] == [20, 20]", "assert a.grad[i][j] == 2",
                 "assert x == [20, 20]"):
        failed["raised_line"] = line        # not a field/ndarray element: a real check
        assert classify.classify(failed) == ("wrong", "assertion on values"), line
    failed.update(raised_line="assert arr[0] == 3", message="assert 2.0 == 3")
    assert classify.classify(failed) == ("wrong", "assertion on values")   # a scalar


def test_out_of_scope_reasons():
    assert classify.classify(row("NotInJitrt", "jitrt.lang is not in jitrt: ..."))[0] == "n/a"
    assert classify.classify(row("AttributeError", "taichi.lang.impl.get_runtime is Taichi's "
                                 "internals, not part of jitrt")) == \
        ("n/a", "ti.lang / C++ binding internals")
    assert classify.classify(row("AttributeError", "'Node' object has no attribute "
                                 "'pointer'"))[1].startswith("sparse SNodes")
    collect = {"outcome": "failed", "when": "collect",
               "message": "ModuleNotFoundError: No module named 'torch'"}
    assert classify.classify(collect)[0] == "n/a"
    collect["message"] = "AttributeError: module 'jitrt' has no attribute 'foo'"
    assert classify.classify(collect) == (
        "missing", "import: AttributeError: module 'jitrt' has no attribute 'foo'")
    assert "test_ggui.py" in classify.NA_FILES and "test_ad_basics.py" not in classify.NA_FILES
