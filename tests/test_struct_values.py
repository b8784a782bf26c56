"""Struct values in kernels (Taichi's `ti.types.struct(...)(...)` and `@ti.dataclass`):
construction by position, keyword, one scalar for every member and from members of other
types (converted), nested structs, struct locals with member stores, whole elements of struct
fields, funcs and real functions taking and returning structs."""

import numpy as np
import pytest

import jitrt as jr

vec3f = jr.types.vector(3, float)
line3f = jr.types.struct(linedir=vec3f, length=float)
mystruct = jr.types.struct(line=line3f, idx=int)


def test_construction_converts_members_as_taichi_does():
    structi = jr.types.struct(a=int, b=jr.types.vector(2, int))
    structf = jr.types.struct(a=float, b=jr.types.vector(2, float))

    @jr.kernel
    def f2i() -> int:
        s = structi(2.5, (2.5, -2.5))
        return s.a + s.b[0] * 10 + s.b[1] * 100

    @jr.kernel
    def i2f() -> float:
        s = structf(b=(2, 3), a=1)
        return s.a + s.b[0] + s.b[1]

    assert f2i() == 2 + 20 - 200
    assert i2f() == 6.0


def test_nested_struct_locals_take_member_stores():
    @jr.kernel
    def k() -> jr.math.vec4:
        y = line3f(0)
        x = mystruct(1)      # Taichi's rule: the first member made of 1 (line.linedir
        #                      [1, 1, 1], line.length 0), the others 0
        first = x.line.length
        x.idx = 7
        x.line = y
        x.line.length = 2.5
        x.line.linedir[1] += 1.5
        return jr.Vector([first, x.idx, x.line.length, x.line.linedir[1]])

    np.testing.assert_array_equal(k(), [0.0, 7.0, 2.5, 1.5])


def test_missing_keyword_members_are_zero_and_unknown_ones_are_errors():
    @jr.dataclass
    class Foo:
        pos: vec3f
        vel: vec3f
        mass: float

    @jr.kernel
    def k() -> jr.math.vec4:
        a = Foo((1, 2, 3), mass=2)
        return jr.Vector([a.pos[2], a.vel[0], a.vel[2], a.mass])

    @jr.kernel
    def bad() -> float:
        a = Foo(mass=2, charge=1)
        return a.mass

    np.testing.assert_array_equal(k(), [3.0, 0.0, 0.0, 2.0])
    with pytest.raises(jr.KernelCompileError, match="has no member 'charge'"):
        bad()


def test_whole_elements_of_a_struct_field():
    x = line3f.field(shape=(4,))

    @jr.kernel
    def fill():
        for i in x:
            x[i] = line3f(linedir=vec3f(1), length=i + 0.5)

    @jr.kernel
    def read(i: jr.i32) -> float:
        t = x[i]
        return t.length + t.linedir[0]

    fill()
    np.testing.assert_array_equal(x.length.to_numpy(), [0.5, 1.5, 2.5, 3.5])
    np.testing.assert_array_equal(x.linedir.to_numpy(), np.ones((4, 3)))
    assert read(2) == 3.5


def test_funcs_and_real_functions_take_and_return_structs():
    s0 = jr.types.struct(a=jr.math.vec3, b=jr.i16)
    s1 = jr.types.struct(a=jr.f32, b=s0)

    @jr.dataclass
    class C:
        i: int

    @jr.func
    def get_i(c: C):
        return c.i

    @jr.real_func
    def make() -> s1:
        return s1(a=1, b=s0(a=jr.Vector([100, 0.25, 3], dt=jr.f32), b=65537))   # b wraps to 1

    @jr.real_func
    def total(v: s1) -> jr.f32:
        return v.a + v.b.a[0] + v.b.a[1] + v.b.a[2] + v.b.b

    @jr.kernel
    def k() -> jr.math.vec3:
        s = make()
        return jr.Vector([s.b.a[1], total(s), get_i(C(i=2))])

    np.testing.assert_array_equal(k(), [0.25, 105.25, 2.0])


def test_dataclass_methods_are_called_on_struct_values_in_kernels():
    @jr.dataclass
    class Foo:
        a: int

        @jr.func
        def get(self):
            return self.a

    @jr.dataclass
    class Sphere:
        f: Foo
        radius: jr.f32

        @jr.func
        def area(self):
            return 4.0 * self.radius * self.radius + self.f.get()

        def grown(self, by):                  # a plain function is a method too
            return Sphere(self.f, self.radius + by)

    spheres = Sphere.field(shape=4)

    @jr.kernel
    def k() -> jr.math.vec2:
        s = Sphere(Foo(42), 1.0)
        spheres[3] = s.grown(1.0)
        return jr.Vector([s.area(), spheres[3].area()])

    np.testing.assert_allclose(k(), [46.0, 58.0])


def test_fields_of_nested_structs():
    x = mystruct.field(shape=4)
    y = line3f.field(shape=4)

    @jr.kernel
    def k():
        for i in y:
            y[i] = line3f(linedir=vec3f(1), length=i + 0.5)
        for i in x:
            x[i].idx = i
            x[i].line = y[i]
            x[i].line.length += 1.0

    @jr.kernel
    def read(i: jr.i32) -> float:
        return x[i].line.length + x[i].line.linedir[2] + x[i].idx

    k()
    assert read(2) == 3.5 + 1.0 + 2
