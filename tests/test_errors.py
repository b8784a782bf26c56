"""Errors a user sees: where they point and what they say.

Compile errors must name this file, the exact line and column of the offending code and show
that line with a caret under it. The expected line is found independently of jitrt: each
offending line ends with a `# @tag` comment and `marker()` scans this file's text for it.
Argument errors must name the kernel and the parameter, on the first launch and on the fast path
of later launches. Runtime faults must name the array, the index and the line, skip the faulty
access (neighbouring memory intact) and leave the program usable.
"""
import os

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
THIS_FILE = os.path.abspath(__file__)
with open(THIS_FILE) as _f:
    FILE_LINES = _f.read().splitlines()

x = jr.field(jr.f32, shape=(16,), name="x")


def marker(tag: str) -> int:
    """The 1-based line of this file that ends with the comment `# @tag`."""
    hits = [k + 1 for k, text in enumerate(FILE_LINES) if text.rstrip().endswith("# @" + tag)]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


def compile_error(kernel, *args) -> jr.KernelCompileError:
    with pytest.raises(jr.KernelCompileError) as info:
        kernel(*args)
    return info.value


def assert_points_at(err: jr.KernelCompileError, tag: str, token: str, *words: str) -> None:
    """`err` names this file, the line marked `tag` and the column where `token` starts on it,
    shows that line (Taichi's layout: a blank line, `File "...", line N, in f:`, the line as
    written) with carets starting under `token`, then `file:line:col: reason`; its text
    contains every one of `words`."""
    line = marker(tag)
    col = FILE_LINES[line - 1].index(token)
    text = str(err)
    lines = text.split("\n")
    inner = max(k for k, ln in enumerate(lines) if ln.startswith('File "'))   # a func's
    frame, shown, caret = lines[inner:inner + 3]        # own place comes after its callers'
    assert lines[0] == "" and frame.startswith(f'File "{THIS_FILE}", line {line}, in '), text
    assert f"\n{THIS_FILE}:{line}:{col + 1}: " in text, text
    assert (err.filename, err.line, err.col) == (THIS_FILE, line, col)
    assert shown == FILE_LINES[line - 1]
    assert set(caret.strip()) == {"^"} and caret.index("^") == shown.index(token), text
    for w in words:
        assert w in text, (w, text)
    assert isinstance(err, jr.JitrtError)


# ---- compile errors -----------------------------------------------------------------------

def test_list_comprehension():
    @jr.kernel
    def k():
        for i in range(4):
            v = [j for j in range(i)]  # @listcomp
            x[i] = v[0]

    assert_points_at(compile_error(k), "listcomp", "range(i)", "comprehension",
                     "unrolled while compiling", "length known at compile time")


def test_print_call_with_an_unsupported_keyword():
    @jr.kernel
    def k():
        for i in range(4):
            print(i, file=None)  # @print

    assert_points_at(compile_error(k), "print", "None", "sep= and end=")


def test_try_statement():
    @jr.kernel
    def k():
        for i in range(4):
            try:  # @try
                x[i] = 1.0
            except Exception:  # noqa: BLE001, S110 - never runs: this cannot compile
                pass

    assert_points_at(compile_error(k), "try", "try:", "Try", "not supported")


def test_string_operation():
    @jr.kernel
    def k():
        for i in range(4):
            s = "ab" + "c"     # compile-time strings concatenate, as in Python
            x[i] = s  # @strop

    assert_points_at(compile_error(k), "strop", "x[i]", "expected a number", "str 'abc'")


def helper(v):
    return v + 1


def test_calling_a_plain_python_function():
    """A plain Python function is inlined like a @jr.func; an error inside it points there."""
    @jr.kernel
    def k():
        for i in range(4):
            x[i] = helper(i)

    k()
    assert x.to_numpy()[:4].tolist() == [1, 2, 3, 4]

    @jr.kernel
    def bad():
        for i in range(4):
            x[i] = broken_helper(i)
    assert_points_at(compile_error(bad), "brokenfn", "del", "not supported")


def broken_helper(v):
    del v  # @brokenfn
    return 1


def test_calling_numpy():
    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(4):
            x[i] = np.sum(a[i])  # @numpy

    assert_points_at(compile_error(k, np.ones(4, np.float32)), "numpy", "np.sum(", "sum",
                     "not supported")


def test_float_into_int_element_warns_at_the_store():
    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            b[i] = a[i] + 0.5  # @float2elem

    b = np.zeros(4, np.int32)
    with pytest.warns(jr.CastWarning, match="i32 <- f32") as caught:
        k(np.full(4, 2.75, np.float32), b)
    [w] = [w for w in caught if issubclass(w.category, jr.CastWarning)]
    assert (w.filename, w.lineno) == (THIS_FILE, marker("float2elem"))
    assert b.tolist() == [3, 3, 3, 3]


def test_break_in_outermost_loop():
    @jr.kernel
    def k():
        for i in range(4):
            if i > 2:
                break  # @break

    assert_points_at(compile_error(k), "break", "break", "outermost", "break")


def test_break_in_outermost_loop_that_also_continues():
    @jr.kernel
    def k():
        for i in x:
            if i > 2:
                continue              # ends the iteration (as in Taichi)
            if i == 1:
                break  # @continue
            x[i] = 1.0

    assert_points_at(compile_error(k), "continue", "break", "Cannot break in the outermost loop")


def test_range_with_a_zero_step():
    @jr.kernel
    def k():
        for i in range(0, 16, 0):  # @step
            x[i] = 1.0

    assert_points_at(compile_error(k), "step", "0)", "step must not be zero")


def test_wrong_index_count_on_field():
    @jr.kernel
    def k():
        for i in range(4):
            x[i, 0] = 1.0  # @nindex

    assert_points_at(compile_error(k), "nindex", "x[i, 0]", "'x' has 1 dimension(s)", "2 ")


def test_wrong_index_count_on_zero_dim_field():
    s = jr.field(jr.f32, shape=(), name="s")

    @jr.kernel
    def k():
        s[0] = 1.0  # @zerodim

    assert_points_at(compile_error(k), "zerodim", "s[0]", "0 dimension", "x[None]")


def test_float_index():
    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(4):
            x[i] = a[i * 0.5]  # @floatindex

    assert_points_at(compile_error(k, np.ones(4, np.float32)), "floatindex", "i * 0.5",
                     "index must be an integer")


def test_undefined_name():
    @jr.kernel
    def k():
        for i in range(4):
            x[i] = undefined_thing  # noqa: F821 # @undef

    assert_points_at(compile_error(k), "undef", "undefined_thing", "not defined")


def test_return_without_annotation():
    @jr.kernel
    def k():
        x[0] = 1.0
        return 3  # @noann

    assert_points_at(compile_error(k), "noann", "return 3", "return annotation")


def test_calling_a_kernel_from_a_kernel():
    @jr.kernel
    def inner():
        x[0] = 1.0

    @jr.kernel
    def outer():
        inner()  # @kernelcall

    assert_points_at(compile_error(outer), "kernelcall", "inner()", "@jr.func")


@jr.func
def bad_func(v):
    w = v
    w = "text"  # @infunc
    return w


def test_error_inside_a_func_points_into_the_func():
    @jr.kernel
    def k():
        for i in range(4):
            x[i] = bad_func(i)

    assert_points_at(compile_error(k), "infunc", "w = ", "str")


def test_compile_error_repeats_on_every_launch():
    @jr.kernel
    def k():
        for i in range(4):
            del i  # @again

    first, second = compile_error(k), compile_error(k)
    assert str(first) == str(second)
    assert jr.debug.stats()["compiles"] == 0


def test_static_needs_a_compile_time_value():
    @jr.kernel
    def k(n: jr.i32):
        for i in jr.static(range(n)):  # @staticrt
            x[i] = 1.0

    assert_points_at(compile_error(k, 3), "staticrt", "range(n)", "jr.static()", "compile time")


# ---- argument errors ------------------------------------------------------------------------

@jr.kernel
def saxpy(a: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.f32, ndim=1), k: jr.f32, n: jr.i32,
          small: jr.i8, u: jr.u32, big: jr.i64):
    for i in range(n):
        out[i] = a[i] * k + small + u + big


def good_args():
    a = np.arange(8, dtype=np.float32) + 0.5
    return [a, np.zeros(8, np.float32), 2.0, 8, -3, 4, 1]


def check_saxpy_works() -> None:
    args = good_args()
    saxpy(*args)
    np.testing.assert_allclose(args[1], args[0] * 2 - 3 + 4 + 1)


BAD_ARGS = {
    # name: (index to replace, value, words the message must contain)
    "float_for_int": (3, 1.5, ["'n'", "integer", "i32", "float 1.5"]),
    "int_too_large": (3, 2**32, ["'n'", "i32", str(2**32)]),
    # an integer argument takes the bit patterns of its width (-128..255 for an i8)
    "i8_out_of_range": (4, 256, ["'small'", "[-128, 255]", "256"]),
    "u32_negative": (5, -2**31 - 1, ["'u'", "u32", str(-2**31 - 1)]),
    "i64_out_of_range": (6, 2**64, ["'big'", "i64", str(2**64)]),
    "string_for_float": (2, "2.0", ["'k'", "f32", "str"]),
    "huge_int_for_float": (2, 10**400, ["'k'", "f32"]),
    "wrong_dtype": (0, np.zeros(8, np.float64), ["'a'", "f32", "float64"]),
    "wrong_ndim": (0, np.zeros((2, 4), np.float32), ["'a'", "ndim=1", "ndim=2"]),
    "non_contiguous": (0, np.zeros(16, np.float32)[::2], ["'a'", "C-contiguous"]),
    "list_for_array": (0, [1.0, 2.0], ["'a'", "ndarray", "list"]),
    "field_for_array": (0, x, ["'a'", "ndarray", "Field"]),
    "ndarray_wrong_dtype": (1, jr.ndarray(jr.i32, 8), ["'out'", "f32", "i32"]),
}


@pytest.mark.parametrize("warm", [False, True], ids=["first_launch", "fast_path"])
@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_bad_argument(case, warm):
    if warm:
        check_saxpy_works()                      # installs the fast launcher
    index, value, words = BAD_ARGS[case]
    args = good_args()
    args[index] = value
    with pytest.raises(jr.KernelArgError) as info:
        saxpy(*args)
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, jr.JitrtError)
    text = str(err)
    assert "test_errors.saxpy" in text
    for w in words:
        assert w in text, (w, text)
    check_saxpy_works()                          # nothing was left half-done


@pytest.mark.parametrize("warm", [False, True], ids=["first_launch", "fast_path"])
def test_wrong_argument_count(warm):
    if warm:
        check_saxpy_works()
    with pytest.raises(jr.KernelArgError, match=r"saxpy: Too many arguments: it takes 7 \(.*\), "
                                                r"got 8"):
        saxpy(*good_args(), 5)
    with pytest.raises(jr.KernelArgError, match=r"saxpy: Parameter `big : .*` missing"):
        saxpy(*good_args()[:6])
    with pytest.raises(jr.KernelArgError, match=r"saxpy: Unexpected argument 'scale'"):
        saxpy(*good_args()[:6], scale=2)
    with pytest.raises(jr.KernelArgError, match=r"saxpy: Multiple values for argument 'k'"):
        saxpy(*good_args(), k=2.0)
    check_saxpy_works()


def test_keyword_arguments_are_accepted():
    args = good_args()
    a, out = args[0], args[1]
    saxpy(a, out, n=8, k=3.0, small=0, u=0, big=0)
    np.testing.assert_allclose(out, a * 3)


def test_bad_template_argument():
    @jr.kernel
    def k(flag: jr.template()):
        x[0] = 1.0 if jr.static(flag) else 2.0

    with pytest.raises(jr.KernelArgError, match=r"k: argument 'flag': expected a field, a "
                                                r"Python constant, .* or a @jr.data_oriented"):
        k([1, 2])


# ---- runtime faults ---------------------------------------------------------------------------

@jr.kernel
def shifted_copy(a: nd(dtype=jr.f64, ndim=1), out: nd(dtype=jr.f64, ndim=1), off: jr.i32):
    for i in range(a.shape[0]):
        out[i + off] = a[i] * 2  # @oobwrite


def test_out_of_bounds_write_is_skipped_and_reported(rng):
    n = 5000
    a = rng.standard_normal(n)
    backing = rng.standard_normal(n + 16)     # guard zones of 8 on each side of `out`
    before = backing.copy()
    out = backing[8:8 + n]
    assert out.flags.c_contiguous
    with pytest.raises(jr.KernelRuntimeError) as info:
        shifted_copy(a, out, 1)
    text = str(info.value)
    line = marker("oobwrite")
    assert f"index {n} out of bounds on axis 0 of 'out'" in text
    assert f"{THIS_FILE}:{line}:" in text
    assert "out[i + off] = a[i] * 2" in text and "^" in text
    np.testing.assert_array_equal(backing[:9], before[:9])          # guard + out[0] untouched
    np.testing.assert_array_equal(backing[8 + n:], before[8 + n:])  # the guard after `out`
    np.testing.assert_array_equal(out[1:], a[:-1] * 2)               # the valid writes happened
    shifted_copy(a, out, 0)                                           # the program still works
    np.testing.assert_array_equal(out, a * 2)
    np.testing.assert_array_equal(backing[8 + n:], before[8 + n:])


def test_negative_index_on_a_field_is_out_of_bounds():
    grid = jr.field(jr.i32, shape=(4, 6), name="grid")
    out = jr.field(jr.i32, shape=(4,), name="out")

    @jr.kernel
    def left(shift: jr.i32):
        for i in range(4):
            out[i] = grid[i, i - shift]  # @negative

    grid.from_numpy(np.arange(24, dtype=np.int32).reshape(4, 6))
    with pytest.raises(jr.KernelRuntimeError) as info:
        left(1)
        jr.sync()                    # GPUs report a fault at the next synchronisation
    text = str(info.value)
    assert "index -1 out of bounds on axis 1 of 'grid' (read)" in text
    assert f"{THIS_FILE}:{marker('negative')}:" in text
    assert isinstance(info.value, jr.JitrtError)
    np.testing.assert_array_equal(out.to_numpy()[1:], [6, 13, 20])   # the other threads ran
    left(0)
    np.testing.assert_array_equal(out.to_numpy(), [0, 7, 14, 21])


def test_out_of_bounds_atomic_in_serial_code():
    s = jr.field(jr.i32, shape=(3,), name="counts")

    @jr.kernel
    def bump(k: jr.i32):
        jr.atomic_add(s[k], 1)  # @atomicoob

    s.fill(5)
    with pytest.raises(jr.KernelRuntimeError) as info:
        bump(3)
        jr.sync()
    assert "index 3 out of bounds on axis 0 of 'counts' (atomic_add)" in str(info.value)
    assert f":{marker('atomicoob')}:" in str(info.value)
    assert s.to_numpy().tolist() == [5, 5, 5]
    bump(2)
    assert s.to_numpy().tolist() == [5, 5, 6]


def test_fault_through_a_bound_launch():
    @jr.kernel
    def poke(a: nd(dtype=jr.i32, ndim=1), at: jr.i32):
        a[at] = 7

    a = np.zeros(4, np.int32)
    launch = poke.bind(a, 9)
    with pytest.raises(jr.KernelRuntimeError, match="index 9 out of bounds"):
        launch()
    launch.set_arg("at", 2)
    launch()
    assert a.tolist() == [0, 0, 7, 0]


@jr.func
def undefined_inside():
    return 1 + not_defined_anywhere(2)  # noqa: F821 # @undefinner


@jr.func
def calls_undefined(k):
    return undefined_inside() * k  # @callundef


def test_an_error_in_a_func_shows_the_calls_that_reach_it_as_taichi_does():
    @jr.kernel
    def k():
        for i in range(4):
            x[i] = calls_undefined(i)  # @callsite

    err = compile_error(k)
    assert isinstance(err, NameError)
    assert_points_at(err, "undefinner", "not_defined_anywhere", 'Name "not_defined_anywhere"')
    site, mid, inner = (marker(t) for t in ("callsite", "callundef", "undefinner"))
    cols = [FILE_LINES[ln - 1].index(tok) for ln, tok in (
        (site, "calls_undefined"), (mid, "undefined_inside"), (inner, "not_defined"))]
    *frames, place = str(err).split("\n")
    assert frames == [
        "",
        f'File "{THIS_FILE}", line {site}, in k:', FILE_LINES[site - 1],
        " " * cols[0] + "^" * len("calls_undefined(i)"),
        f'File "{THIS_FILE}", line {mid}, in calls_undefined:', FILE_LINES[mid - 1],
        " " * cols[1] + "^" * len("undefined_inside()"),
        f'File "{THIS_FILE}", line {inner}, in undefined_inside:', FILE_LINES[inner - 1],
        " " * cols[2] + "^" * len("not_defined_anywhere")]
    assert place.startswith(f'{THIS_FILE}:{inner}:{cols[2] + 1}: Name "not_defined_anywhere" '
                            "is not defined")


def test_an_excerpt_expands_tabs_cuts_long_lines_and_spans_statement_headers():
    from jitrt.errors import TO_LINE_END, source_excerpt
    assert source_excerpt(["\ta(1,\t2)\n"], 1, 1, 1, 2) == "    a(1,    2)\n    ^\n"
    long = "    " + "a" * 100 + "(1)"
    assert source_excerpt([long], 1, 4, 1, 104) == (
        long[:80] + "\n" + "    " + "^" * 76 + "\n" + long[80:] + "\n" + "^" * 24 + "\n")
    header = ["    for i in range(3,\n", "                   4):\n", "        pass\n"]
    assert source_excerpt(header, 1, 4, 2, TO_LINE_END) == (
        header[0][:-1] + "\n    " + "^" * 17 + "\n" + header[1][:-1] + "\n" + " " * 19 +
        "^" * 3 + "\n")
    assert source_excerpt(["x = 1"], 1, 4) == "x = 1\n    ^\n"     # no end: one caret
    assert source_excerpt(["x = 1"], 2, 0) == ""                    # no such line
