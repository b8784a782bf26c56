"""Stores through component names on vector locals, as Taichi allows: `u.y -= s`, `u.x = s`,
`c.b *= s`, `u.zx = w`, `u.xy += w` (letters xyzw or rgba, each at most once), against numpy
and the same statements on element indices; gradients through them against finite
differences; the errors of a bad name or value, at the statement."""
import re

import numpy as np
import pytest

import jitrt as jr


def test_swizzle_stores_match_numpy(rng):
    a = rng.normal(size=(5, 3))
    got = jr.Vector.field(3, jr.f64, shape=5)
    pair = jr.Vector.field(2, jr.f64, shape=5)

    @jr.kernel
    def k(src: jr.types.ndarray(dtype=jr.math.vec3, ndim=1)):
        for i in range(5):
            u = src[i]
            u.y -= 1.5
            u.x = u.x * 2.0
            u.zx = jr.Vector([u.x, u.z])          # reads the old x and z first
            u.xy += jr.Vector([10.0, 20.0])
            c = u
            c.b *= -1.0
            c.rg = c.gr                             # a swap
            got[i] = c
            w = jr.Vector([src[i].x, 0.0])
            w.y = float(i)
            w.yx /= 2.0
            pair[i] = w

    k(a)
    u = a.copy()
    u[:, 1] -= 1.5
    u[:, 0] *= 2.0
    u[:, 2], u[:, 0] = u[:, 0].copy(), u[:, 2].copy()
    u[:, :2] += [10.0, 20.0]
    u[:, 2] *= -1.0
    u[:, [0, 1]] = u[:, [1, 0]]
    np.testing.assert_array_equal(got.to_numpy(), u)
    np.testing.assert_array_equal(pair.to_numpy(), np.stack([a[:, 0] / 2, np.arange(5) / 2], 1))


def test_swizzle_stores_on_integer_vectors():
    out = jr.Vector.field(2, jr.i32, shape=3)

    @jr.kernel
    def k():
        for i in range(3):
            v = jr.Vector([i, 2 * i])
            v.x += 7
            v.y = v.x * v.y
            out[i] = v

    k()
    assert out.to_numpy().tolist() == [[7, 0], [8, 16], [9, 36]]


def test_gradient_through_swizzle_stores(rng):
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def f():
        for i in range(4):
            u = jr.Vector([x[i], 1.0])
            u.y *= jr.sin(x[i])
            u.yx = jr.Vector([u.x * u.y, u.y + x[i] ** 2])
            u.x -= 0.5 * u.y
            loss[None] += u.x * u.y

    def numpy_loss(v):
        u0, u1 = v, np.sin(v)
        u1, u0 = u0 * u1, u1 + v ** 2
        u0 = u0 - 0.5 * u1
        return (u0 * u1).sum()

    v = rng.normal(size=4)
    x.from_numpy(v)
    with jr.ad.Tape(loss=loss):
        f()
    np.testing.assert_allclose(loss[None], numpy_loss(v), rtol=1e-13)
    eps = 1e-6
    fd = [(numpy_loss(v + eps * e) - numpy_loss(v - eps * e)) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(x.grad.to_numpy(), fd, rtol=1e-7, atol=1e-9)


def _no_such_component():
    for _ in range(1):
        u = jr.Vector([1.0, 2.0])
        u.z = 3.0


def _named_twice():
    for _ in range(1):
        u = jr.Vector([1.0, 2.0])
        u.xx = jr.Vector([3.0, 4.0])


def _scalar_into_two():
    for _ in range(1):
        u = jr.Vector([1.0, 2.0])
        u.xy = 3.0


def _vector_into_one():
    for _ in range(1):
        u = jr.Vector([1.0, 2.0])
        u.x += jr.Vector([3.0, 4.0])


MISUSE = [(_no_such_component, "a 2-component vector has no 'z'"),
          (_named_twice, "cannot assign to 'xx': a component named twice"),
          (_scalar_into_two, r"cannot assign a scalar to 'xy' \(2 component"),
          (_vector_into_one, r"cannot assign \(2,\) to 'x' \(1 component")]


@pytest.mark.parametrize("fn,words", MISUSE, ids=[m[0].__name__ for m in MISUSE])
def test_bad_swizzle_store_is_a_located_compile_error(fn, words):
    with pytest.raises(jr.KernelCompileError, match=words) as info:
        jr.kernel(fn)()
    assert info.value.line == fn.__code__.co_firstlineno + 3


def test_float_into_an_integer_component_truncates_with_a_warning():
    @jr.kernel
    def k() -> jr.math.ivec2:
        u = jr.Vector([1, 2])
        u.y = -0.5 * 5
        return u

    with pytest.warns(jr.CastWarning, match="i32 <- f32"):
        np.testing.assert_array_equal(k(), [1, -2])


def test_a_swizzle_past_the_vector_is_taichis_syntax_error_in_its_words():
    @jr.kernel
    def store():
        b = jr.math.vec2(1, 2)
        b.xyz = [1, 2, 3]

    @jr.kernel
    def load() -> jr.f32:
        c = jr.math.vec2(1, 2)
        return c.rgb[0]

    with pytest.raises(jr.TaichiSyntaxError, match=re.escape(
            "vec2 only has attributes=('x', 'y'), got=('x', 'y', 'z')")):
        store()
    with pytest.raises(jr.TaichiSyntaxError, match=re.escape(
            "vec2 only has attributes=('r', 'g'), got=('r', 'g', 'b')")):
        load()
