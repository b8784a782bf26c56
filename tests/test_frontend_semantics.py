"""Frontend semantics that used to give silently wrong values (issues 29 and 30): `int`/`float`
follow default_ip/default_fp, Taichi's integer promotion, chained comparisons evaluate each
operand once, decorators under `@jr.kernel`, narrowing accumulations warn, `and`/`or` give an
operand, func parameters and returns convert to their annotations, reads before writes in
self-assignments, kernel parameter defaults, funcs with several returns."""
import functools
import warnings

import numpy as np
import pytest

import jitrt as jr


def reinit(arch, **options):
    return jr.init(arch=arch, offline_cache=False, enable_fallback=False, **options)


# ---- int and float follow default_ip / default_fp -------------------------------------------

def test_float_and_int_return_annotations_follow_the_defaults(arch):
    reinit(arch, default_fp=jr.f64, default_ip=jr.i64)

    @jr.kernel
    def third() -> float:
        return 1 / 3

    @jr.kernel
    def past_i32(a: int) -> int:
        return a + 1

    @jr.kernel
    def both(x: float) -> tuple[float, int]:
        return x * 2, 2**31

    @jr.func
    def wide(n: int) -> float:
        return n * 1.0 + 1 / 3

    @jr.kernel
    def through_func(a: jr.i64) -> jr.f64:
        return wide(a) + jr.cast(0.1, float)

    assert third() == 1 / 3                      # was 0.3333333432674408 (an f32)
    assert through_func(2**40) == 2**40 + 1 / 3 + 0.1
    assert past_i32(2**31 - 1) == 2**31          # was -2147483648 (an i32)
    assert both(1 / 3) == (2 / 3, 2**31)


def test_int_vectors_follow_default_ip(arch):
    reinit(arch, default_ip=jr.i64)

    @jr.kernel
    def wide() -> jr.i64:
        v = jr.math.ivec2(2**31 - 1, 0)
        return v[0] + 1

    @jr.kernel
    def unsigned() -> jr.u64:
        u = jr.math.uvec3(0, 1, 2)
        return u[0] - 1

    @jr.kernel
    def param(p: jr.math.ivec2) -> jr.i64:
        return p[0] * p[1]

    assert wide() == 2**31                       # was -2147483648: ivec2 was always i32
    assert unsigned() == 2**64 - 1               # uvec3 is u64 when default_ip is 64 bits
    assert param((2**20, 2**20)) == 2**40
    assert jr.math.ivec2.field(shape=2).dtype == jr.i64
    reinit(arch)
    assert jr.math.ivec2.field(shape=2).dtype == jr.i32
    assert jr.math.uvec2.field(shape=2).dtype == jr.u32


# ---- integer promotion: Taichi's rule, the same for arithmetic and comparisons --------------

def test_mixed_signedness_promotes_to_the_unsigned_type_of_one_width():
    @jr.kernel
    def cmp64(u: jr.u64, s: jr.i64) -> jr.i32:
        return u > s

    @jr.kernel
    def add64(u: jr.u64, s: jr.i64) -> jr.u64:
        return u + s

    @jr.kernel
    def cmp32(u: jr.u32, s: jr.i32) -> jr.i32:
        return u < s

    @jr.kernel
    def add32(u: jr.u32, s: jr.i32) -> jr.u32:
        return u + s

    @jr.kernel
    def narrow(u: jr.u8, s: jr.i32) -> jr.i32:
        return u < s

    # u64 with i64 computes in u64, so -1 is 2**64 - 1 on both paths
    assert cmp64(2**63, -1) == 0
    assert add64(2**63, -1) == 2**63 - 1
    assert cmp32(5, -1) == 1                    # was 0 (both widened to i64)
    assert add32(5, -7) == 2**32 - 2
    assert narrow(200, -1) == 0                 # the wider signed type wins


def test_promotion_table():
    from jitrt.dtypes import promote
    assert promote(jr.i32, jr.u32) is jr.u32
    assert promote(jr.u64, jr.i64) is jr.u64
    assert promote(jr.u8, jr.i32) is jr.i32
    assert promote(jr.i64, jr.u32) is jr.i64
    assert promote(jr.f32, jr.i64) is jr.f32
    assert promote(jr.f32, jr.f64) is jr.f64


# ---- chained comparisons evaluate each operand once; and/or give an operand ----------------

def test_chained_comparison_evaluates_the_middle_operand_once():
    c = jr.field(jr.i32, shape=2)

    @jr.kernel
    def count():
        for i in range(10):
            if 0 <= jr.atomic_add(c[0], 1) < 100:
                c[1] += 1

    count()
    assert (c[0], c[1]) == (10, 10)              # c[0] was 20: the atomic ran twice


def test_chained_comparison_stops_at_the_first_false_part():
    c = jr.field(jr.i32, shape=2)

    @jr.func
    def bump() -> jr.i32:
        c[1] += 1
        return 100

    @jr.kernel
    def count():
        for i in range(10):
            if 5 < i < jr.atomic_add(c[0], 1) + bump():
                pass

    count()
    # only i = 6..9 reach the last operand (the func's body ran for every i: c[1] was 10)
    assert (c[0], c[1]) == (4, 4)


def test_and_or_give_an_operand_as_python_does():
    @jr.kernel
    def both(a: jr.i32, b: jr.i32) -> jr.i32:
        return a and b

    @jr.kernel
    def either(a: jr.i32, b: jr.i32) -> jr.i32:
        return a or b

    @jr.kernel
    def either_float(a: jr.f32, b: jr.f32) -> jr.f32:
        return a or b

    @jr.kernel
    def static_or() -> jr.i32:
        return jr.static(0 or 3)

    assert [both(2, 3), both(0, 3), both(2, 0)] == [3, 0, 0]      # was 1 for 2 and 3
    assert [either(2, 3), either(0, 3), either(0, 0)] == [2, 3, 0]
    assert either_float(0.0, 2.5) == 2.5
    assert static_or() == 3                                        # was 1


def test_or_does_not_run_its_right_side_when_the_left_decides():
    c = jr.field(jr.i32, shape=1)

    @jr.func
    def bump() -> jr.i32:
        c[0] += 1
        return 5

    @jr.kernel
    def pick(a: jr.i32) -> jr.i32:
        return a or bump()

    assert pick(7) == 7 and c[0] == 0
    assert pick(0) == 5 and c[0] == 1


# ---- kernel parameter defaults ----------------------------------------------------------------

def test_kernel_parameter_defaults_and_keywords():
    @jr.kernel
    def scaled(a: jr.i32, s: jr.f32 = 2.0, negate: jr.template() = False) -> jr.f32:
        r = a * s
        if jr.static(negate):
            r = -r
        return r

    for _ in range(2):             # the first call compiles, the second takes the fast path
        assert scaled(1) == 2.0    # was KernelArgError "missing argument 's'"
        assert scaled(1, 3.0) == 3.0
        assert scaled(a=2) == 4.0
        assert scaled(1, negate=True) == -2.0
        assert scaled(2, s=0.5) == 1.0


def test_a_bad_default_is_reported_as_its_argument():
    @jr.kernel
    def bad(s: jr.i32 = 1.5) -> jr.i32:
        return s

    with pytest.raises(jr.KernelArgError, match=r"argument 's'.*float 1.5"):
        bad()


# ---- a decorator between @jr.kernel and the def -----------------------------------------------

def twice(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return 2 * fn(*args)
    return wrapper


def test_a_wrapping_decorator_under_the_kernel_is_refused_by_name():
    with pytest.raises(jr.KernelCompileError, match=r"wrapped by @twice .*silently dropped"):
        @jr.kernel
        @twice
        def one() -> jr.i32:        # used to compile and return 1, not 2
            return 1

    with pytest.raises(jr.KernelCompileError, match=r"@jr.func on .*half: .*@twice"):
        @jr.func
        @twice
        def half(x):
            return x / 2


# ---- self-assignment reads everything before writing ----------------------------------------

def test_a_matrix_element_assigned_from_itself_reads_it_first():
    m = jr.Matrix.field(2, 2, jr.f32, shape=1)
    v = jr.Vector.field(2, jr.f32, shape=1)

    @jr.kernel
    def square():
        for i in range(1):
            m[i] = m[i] @ m[i]
            v[i] = v[i].yx

    m[0] = [[1.0, 2.0], [3.0, 4.0]]
    v[0] = [1.0, 2.0]
    square()
    np.testing.assert_array_equal(m.to_numpy()[0], [[7, 10], [15, 22]])  # was 7 22 33 742
    np.testing.assert_array_equal(v.to_numpy()[0], [2, 1])               # was 2 2


def test_an_ndarray_element_assigned_from_itself_reads_it_first():
    a = jr.Matrix.ndarray(2, 2, jr.f32, shape=1)
    a[0] = [[1.0, 2.0], [3.0, 4.0]]

    @jr.kernel
    def transpose(a: jr.types.ndarray()):
        for i in range(1):
            a[i] = a[i].transpose()

    transpose(a)
    np.testing.assert_array_equal(a.to_numpy()[0], [[1, 3], [2, 4]])     # was 1 3 3 4


def test_a_template_func_swaps_the_callers_vector():
    @jr.func
    def swap(v: jr.template()):
        v[0], v[1] = v[1], v[0]

    @jr.kernel
    def k() -> jr.f32:
        v = jr.Vector([1.0, 2.0])
        swap(v)
        return v[0] * 10 + v[1]

    assert k() == 21.0                       # was 12: the vector was passed by value


# ---- func parameters and returns convert to their annotations ---------------------------------

def test_func_annotations_convert_as_taichi_casts():
    @jr.func
    def whole(a: jr.i32):
        return a * 1.0

    @jr.func
    def truncated(x) -> jr.i32:
        return x * 1.5

    @jr.func
    def as_float(x: float) -> jr.math.vec2:
        return jr.Vector([x, 1])

    @jr.kernel
    def k() -> jr.f32:
        return whole(1.5) * 100 + truncated(3) * 10 + as_float(1)[0] / 4

    assert k() == 100 + 40 + 0.25            # was 150 + 45 + 0.25: annotations ignored


# ---- funcs with several returns ----------------------------------------------------------------

@jr.func
def sign(x):
    if x > 0:
        return 1
    elif x < 0:
        return -1
    return 0


@jr.func
def first_positive(v: jr.template()):
    for k in jr.static(range(3)):
        if v[k] > 0:
            return k
    return -1


@jr.func
def picked(flag: jr.template()):
    if jr.static(flag):
        return 2.5
    return 1


@jr.func
def fill_below(x: jr.template(), i):
    if i > 2:
        return
    x[i] = 1.0


def test_funcs_with_several_returns():
    x = jr.field(jr.f32, shape=5)

    @jr.kernel
    def k(a: jr.f32, b: jr.f32, c: jr.f32) -> jr.math.vec4:
        for i in range(5):
            fill_below(x, i)
        return jr.Vector([sign(a), first_positive(jr.Vector([a, b, c])), picked(True),
                          picked(False)])

    np.testing.assert_array_equal(k(-1.0, 2.0, 3.0), [-1, 1, 2.5, 1])
    np.testing.assert_array_equal(k(1.0, -2.0, 0.0), [1, 0, 2.5, 1])
    np.testing.assert_array_equal(k(0.0, 0.0, 0.0), [0, -1, 2.5, 1])
    np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1, 0, 0])


def test_vector_returns_on_several_paths_take_the_declared_type():
    @jr.func
    def pick(x) -> jr.math.ivec2:
        if x > 0:
            return jr.Vector([x, 1.7])
        return jr.Vector([0, x])

    @jr.kernel
    def k(x: jr.f32) -> jr.math.ivec2:
        return pick(x)

    np.testing.assert_array_equal(k(2.5), [2, 1])
    np.testing.assert_array_equal(k(-3.5), [0, -3])


@pytest.mark.parametrize("body, words", [
    ("for i in range(n):\n        if i > 3:\n            return i\n    return 0",
     ["return inside a run-time loop", "'bad'", "jr.static"]),
    ("if n > 3:\n        return 1", ["'bad' returns a value on some paths", "end"]),
    ("if n > 3:\n        return 1\n    return", ["some returns and none in others"]),
])
def test_bad_early_returns_are_compile_errors(tmp_path, body, words):
    import importlib.util
    path = tmp_path / "early_returns.py"
    path.write_text("import jitrt as jr\n\n\n@jr.func\ndef bad(n):\n    " + body + "\n\n\n"
                    "@jr.kernel\ndef k(n: jr.i32) -> jr.i32:\n    return bad(n) + 0\n")
    spec = importlib.util.spec_from_file_location("early_returns", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(jr.KernelCompileError) as info:
        module.k(5)
    for word in words:
        assert word in str(info.value)
    assert "early_returns.py" in str(info.value)


# ---- narrowing stores warn, once per site -------------------------------------------------------

def test_an_f32_local_fed_f64_values_warns_once_at_its_line():
    x = jr.field(jr.f64, shape=4)
    x.fill(0.1)

    @jr.kernel
    def total() -> jr.f64:
        s = 0.0
        for j in range(4):
            s += x[j]                                           # narrowing-site
        return s

    @jr.kernel
    def declared() -> jr.f64:
        s: jr.f64 = 0.0
        for j in range(4):
            s += x[j]
        return s

    with pytest.warns(jr.CastWarning, match=r"may lose precision: f32 <- f64") as caught:
        assert total() == pytest.approx(0.4, rel=1e-6)
    here = [w for w in caught if issubclass(w.category, jr.CastWarning)]
    assert len(here) == 1 and here[0].filename == __file__
    line = next(k + 1 for k, text in enumerate(open(__file__).read().splitlines())
                if text.endswith("# narrowing-site"))
    assert here[0].lineno == line and f":{line}:" in str(here[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jr.CastWarning)
        assert declared() == pytest.approx(0.4, rel=1e-15)      # no warning: declared f64


def test_narrowing_integer_stores_warn_and_explicit_casts_do_not():
    big = jr.field(jr.i64, shape=2)
    small = jr.field(jr.i32, shape=2)

    @jr.kernel
    def narrow():
        for i in range(2):
            small[i] = big[i]

    @jr.kernel
    def explicit():
        for i in range(2):
            small[i] = jr.i32(big[i])

    with pytest.warns(jr.CastWarning, match=r"i32 <- i64"):
        narrow()
    with warnings.catch_warnings():
        warnings.simplefilter("error", jr.CastWarning)
        explicit()


def test_truth_values_store_into_narrow_integers_without_a_warning():
    # Quadrants' u1 fields (Genesis's `is_col[i] = distance[i] < 0.0`) are u8 here: a
    # comparison, `not`, and/or of comparisons are 0 or 1 and lose nothing; an i32 still warns
    d = jr.field(jr.f32, shape=3)
    flag = jr.field(jr.u8, shape=3)
    d.from_numpy(np.array([-1.0, 0.5, -2.0], np.float32))

    @jr.kernel
    def flags():
        for i in range(3):
            flag[i] = d[i] < 0.0
            if i == 1:
                flag[i] = not (d[i] > 1.0 or d[i] < 0.0)

    @jr.kernel
    def count():
        for i in range(3):
            flag[i] = i + 300

    with warnings.catch_warnings():
        warnings.simplefilter("error", jr.CastWarning)
        flags()
    np.testing.assert_array_equal(flag.to_numpy(), [1, 1, 1])
    with pytest.warns(jr.CastWarning, match=r"u8 <- i32"):
        count()


def test_gradients_flow_through_early_returns_and_or():
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.func
    def f(v):
        if v > 0:
            return v * v
        return 3 * v

    @jr.kernel
    def k():
        for i in x:
            loss[None] += f(x[i]) + (x[i] or 2.0)

    x.from_numpy(np.array([1.0, -2.0, 3.0, 0.0], np.float32))
    with jr.ad.Tape(loss):
        k()
    assert loss[None] == 8.0
    np.testing.assert_array_equal(x.grad.to_numpy(), [3, 4, 7, 3])


def test_a_numpy_array_made_in_a_kernel_is_a_constant_vector():
    """docs/porting.md: where Taichi refuses a non-0-d numpy array in a kernel, jitrt takes a
    small one as a constant vector, and a 0-d one as its number."""
    @jr.kernel
    def k() -> jr.i32:
        a = np.array([1, 20])
        b = np.array(300)
        return a[0] + a[1] + b
    assert k() == 321


@pytest.mark.parametrize("source, early", [
    ("x = 1\nreturn x", False),
    ("if a:\n    return 1\nreturn 2", True),
    ("for i in r:\n    while c:\n        try:\n            pass\n        except E:\n"
     "            return 3\nreturn 2", True),
    ("def g():\n    return 1\nreturn g", False),                 # a nested function's own
    ("y = lambda: 1\nreturn y", False),
    ("match x:\n    case 1:\n        return 5\nreturn 0", True),
    ("with m:\n    return 1\nx = 2", True),
    ("try:\n    pass\nfinally:\n    return 1\nx = 1", True),
    ("if a:\n    pass\nelse:\n    return 2\nreturn 3", True),
])
def test_early_returns_are_found_among_the_statements(source, early):
    # lower_return.has_early_return walks statements only (a return is never an expression)
    import ast
    import textwrap

    from jitrt.frontend.lower_return import has_early_return
    body = ast.parse("def f():\n" + textwrap.indent(source, "    ")).body[0].body
    assert has_early_return(body) is early
