"""Struct and argument-pack kernel parameters and struct returns (Taichi's `def k(a: S)`,
`-> S`, `ti.types.argpack`): nested structs and matrix members, a real function taking the
struct, a struct returned alone, with a matrix member or inside a tuple, a struct argument or
return of the wrong type refused, `.grad` and `.bind` of such kernels, argument packs of
scalars, bools, vectors, structs, ndarrays and packs."""

import numpy as np
import pytest

import jitrt as jr

mat = jr.types.matrix(3, 2, jr.f32)
s0 = jr.types.struct(a=mat, b=jr.f32)
s1 = jr.types.struct(a=jr.i32, b=s0)


def test_nested_struct_parameter_with_an_integer_member_wrapping_as_taichi():
    small = jr.types.struct(a=jr.i16, b=jr.f32)
    outer = jr.types.struct(a=jr.f32, b=small)

    @jr.kernel
    def k(a: outer) -> jr.f32:
        return a.a + a.b.a * 10 + a.b.b

    assert k(outer(a=1, b=small(a=65537, b=123))) == pytest.approx(1 + 10 + 123)
    assert k(a=outer(a=2, b=small(a=-3, b=0.5))) == pytest.approx(2 - 30 + 0.5)


def expected_sum(a):
    total = a.a + a.b.b
    for i in range(3):
        for j in range(2):
            total += a.b.a[i, j] * (i + 1) * (j + 2)
    return total


def test_struct_parameter_with_a_matrix_member_and_a_real_function_taking_it():
    @jr.real_func
    def weigh(a: s1) -> jr.i32:
        ret = a.a + a.b.b
        for i in range(3):
            for j in range(2):
                ret += a.b.a[i, j] * (i + 1) * (j + 2)
        return ret

    @jr.kernel
    def direct(a: s1) -> jr.i32:
        ret = a.a + a.b.b
        for i in range(3):
            for j in range(2):
                ret += a.b.a[i, j] * (i + 1) * (j + 2)
        return ret

    @jr.kernel
    def through(a: s1) -> jr.i32:
        return weigh(a)

    arg = s1(a=1, b=s0(a=mat(1, 2, 3, 4, 5, 6), b=123))
    assert direct(arg) == through(arg) == expected_sum(arg) == 1 + 123 + 128


def test_struct_returns_alone_with_a_matrix_member_and_in_a_tuple():
    r0 = jr.types.struct(a=jr.math.vec3, b=jr.i16)
    r1 = jr.types.struct(a=jr.f32, b=r0)

    @jr.kernel
    def one() -> r1:
        return r1(a=1, b=r0(a=jr.math.vec3([100, 0.2, 3]), b=65537))

    @jr.real_func
    def pair_func() -> (jr.f32, r0):
        return 1.5, r0(a=jr.math.vec3([7, 8, 9]), b=-2)

    @jr.kernel
    def pair() -> tuple[jr.f32, r0]:
        return pair_func()

    r = one()
    assert r.kind == r1 and r.a == 1.0 and r.b.b == 1          # i16: 65537 wraps to 1
    assert one.bind()().to_dict() == r.to_dict()
    assert np.allclose(r.b.a, [100, 0.2, 3]) and isinstance(r.b.a, jr.Vector)
    x, y = pair()
    assert x == 1.5 and y.a.tolist() == [7, 8, 9] and y.b == -2


def test_dataclass_parameter_and_return_keep_the_methods():
    @jr.dataclass
    class Foo:
        x: jr.f32
        y: jr.f32

        @jr.func
        def add(self, other: jr.template()):
            return Foo(self.x + other.x, self.y + other.y)

        def add_python(self, other):
            return Foo(self.x + other.x, self.y + other.y)

    @jr.kernel
    def double(x: Foo) -> Foo:
        return x.add(x)

    b = double(Foo(1, 2))
    assert (b.x, b.y) == (2, 4)
    c = b.add_python(b)
    assert (c.x, c.y) == (4, 8)


def test_a_struct_field_element_returned_through_a_func():
    tp = jr.types.struct(a=jr.i32, b=jr.f32)
    f = tp.field(shape=2)
    f[1] = tp(a=3, b=0.5)

    @jr.func
    def get(i) -> tp:
        return f[i]

    @jr.kernel
    def k() -> tp:
        return get(1)

    assert k().to_dict() == {"a": 3, "b": 0.5}


def test_a_struct_of_another_type_is_refused_as_argument_and_return():
    sphere = jr.types.struct(center=jr.math.vec3, radius=float)
    circle = jr.types.struct(center=jr.math.vec2, radius=float)
    sphere_int = jr.types.struct(center=jr.math.vec3, radius=int)

    @jr.kernel
    def takes(s: sphere) -> jr.f32:
        return s.radius

    with pytest.raises(jr.TaichiRuntimeTypeError, match=r"argument 's': Argument .* cannot be "
                       r"converted into required type jr.types.struct\(center=jr.types.vector"
                       r"\(3, None\)"):
        takes(circle(center=jr.math.vec2([1, 2]), radius=2.33))
    with pytest.raises(jr.KernelArgError, match="expected a struct of type"):
        takes(2.33)
    assert takes(jr.Struct(center=[1, 2, 3], radius=2)) == 2.0   # untyped: converted
    spheres = sphere.field(shape=2)
    spheres[1].radius = 4.5
    assert isinstance(spheres[1], sphere) and not isinstance(spheres[1], circle)
    assert takes(spheres[1]) == 4.5                      # a field's element: its values
    line = jr.types.struct(d=jr.math.vec2, l=jr.f32)
    nested = jr.types.struct(line=line, i=jr.i32)
    x = nested.field(shape=2)
    x[1] = nested(line=line(d=[1, 2], l=3), i=4)

    @jr.kernel
    def deep(s: nested) -> jr.f32:
        return s.line.d[1] + s.line.l + s.i

    assert deep(x[1]) == 9.0

    @jr.kernel
    def gives() -> sphere:
        return sphere_int(center=jr.math.vec3([1, 2, 3]), radius=2)

    with pytest.raises(jr.TaichiCompilationError, match="annotated to return jr.types.struct"
                       r"\(center=jr.types.vector\(3, None\), radius=<class 'float'>\), got"):
        gives()


def test_grad_and_bind_of_a_kernel_with_a_struct_parameter():
    w = jr.types.struct(scale=jr.f32, shift=jr.f32)
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(4, dtype=np.float32))

    @jr.kernel
    def k(p: w):
        for i in x:
            loss[None] += x[i] * p.scale + p.shift

    with jr.ad.Tape(loss=loss):
        k(w(scale=3, shift=1))
    assert loss[None] == pytest.approx(3 * 6 + 4)
    assert np.allclose(x.grad.to_numpy(), 3)
    launch = k.bind(w(scale=1, shift=0))
    loss[None] = 0
    launch()
    assert loss[None] == pytest.approx(6)


def test_argpacks_of_scalars_bools_vectors_and_structs():
    pack_t = jr.types.argpack(a=jr.i32, b=bool, c=jr.f32, v=jr.types.vector(3, jr.f32),
                              s=jr.types.struct(m=jr.i32, n=jr.f32))

    @jr.kernel
    def k(p: pack_t) -> jr.f32:
        out = 0.0
        if p.b:
            out = p.a + p.c
        else:
            out = p.a * p.c
        return out + p.v[1] + p.s.m * p.s.n

    s = jr.types.struct(m=jr.i32, n=jr.f32)(m=2, n=0.25)
    assert k(pack_t(a=2, b=False, c=1.5, v=[0, 10, 0], s=s)) == pytest.approx(3 + 10 + 0.5)
    assert k(pack_t(a=2, b=True, c=1.5, v=[0, 10, 0], s=s)) == pytest.approx(3.5 + 10 + 0.5)


def test_argpacks_of_ndarrays_and_nested_packs():
    arr = jr.ndarray(dtype=jr.math.vec3, shape=(4, 4))
    arr.fill([1.0, 2.0, 3.0])
    inner_t = jr.types.argpack(a=jr.i32, b=jr.i32)
    pack_t = jr.types.argpack(a=jr.types.ndarray(dtype=jr.math.vec3, ndim=2), b=jr.i32,
                              c=inner_t)
    pack = pack_t(a=arr, b=233, c=inner_t(a=123, b=456))

    @jr.kernel
    def element(x: pack_t) -> jr.math.vec3:
        return x.a[2, 3]

    @jr.kernel
    def total(x: pack_t, extra: jr.i32) -> int:
        return x.c.a + x.c.b + x.b + extra

    @jr.kernel
    def write(x: pack_t):
        for i, j in jr.ndrange(4, 4):
            x.a[i, j][0] = i * 4 + j

    assert element(pack).tolist() == [1.0, 2.0, 3.0]
    assert total(pack, 1) == 123 + 456 + 233 + 1
    write(pack)
    assert arr.to_numpy()[3, 2, 0] == 14


def test_argpack_is_only_a_parameter():
    pack_t = jr.types.argpack(a=jr.i32, b=bool)
    with pytest.raises(jr.TaichiSyntaxError, match="an argument pack cannot be returned"):
        @jr.kernel
        def k(p: pack_t) -> pack_t:
            return p
    with pytest.raises(ValueError, match="member 'element': invalid data type "
                       r"jr.types.argpack\(a=jr.i32, b=jr.i32\)"):
        jr.types.struct(element=pack_t)


@pytest.fixture
def fakegpu(fakegpu_program):
    """The driver of a program on the fake GPU vendor (conftest.py): the shared GPU launch
    path (argument packing, residency, returns) over a recording binding; kernels never run."""
    return fakegpu_program[1].device.driver


@pytest.mark.cpu_only
def test_struct_arguments_and_results_take_the_gpu_launch_path(fakegpu):
    pack_t = jr.types.argpack(s=s1, out=jr.types.ndarray(dtype=jr.f32, ndim=1))

    @jr.kernel
    def k(p: pack_t, extra: jr.f32) -> s0:
        for i in range(p.out.shape[0]):
            p.out[i] = p.s.b.b + extra
        return p.s.b

    out = jr.ndarray(jr.f32, shape=4)
    arg = pack_t(s=s1(a=1, b=s0(a=mat(1, 2, 3, 4, 5, 6), b=123)), out=out)
    before = len(fakegpu.calls)
    r = k(arg, 0.5)             # (the fake device runs nothing: the result is its zeros)
    assert any(c[0] == "launch" for c in fakegpu.calls[before:])
    assert r.kind == s0 and r.a.shape == (3, 2) and r.b == 0.0
