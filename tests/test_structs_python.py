"""Struct values at Python scope (Taichi's `ti.Struct`): calling a struct type or a
`@jr.dataclass` outside kernels, `jr.Struct(...)`, their members, methods and conversions, and
those values used by kernels (read as constants, stored into struct fields, `jr.Struct(...)`
in a kernel), a dataclass method's `self` as a struct field's element, `x[i].member.fill(v)`."""

import numpy as np
import pytest

import jitrt as jr

vec3f = jr.types.vector(3, float)
line3f = jr.types.struct(linedir=vec3f, length=float)
mystruct = jr.types.struct(line=line3f, idx=int)


def test_a_struct_type_called_at_python_scope_converts_its_members():
    structi = jr.types.struct(a=int, b=jr.types.vector(2, int))
    s = structi(2.5, (2.5, -2.5))
    assert s.a == 2 and isinstance(s.a, int)
    assert s.b.tolist() == [2, -2]
    structf = jr.types.struct(a=float, b=jr.types.vector(2, float))
    f = structf(b=(2, 3))                   # a member not given is 0
    assert f.a == 0.0 and isinstance(f.a, float) and f.b.tolist() == [2.0, 3.0]
    assert f.to_dict() == {"a": 0.0, "b": [2.0, 3.0]}
    with pytest.raises(TypeError, match="has no member 'c'"):
        structf(c=1)
    with pytest.raises(TypeError, match="given twice"):
        structf(1, a=2)


def test_one_value_makes_the_first_member_and_nested_structs_of_it():
    s = mystruct(3)
    assert s.line.linedir.tolist() == [3.0, 3.0, 3.0]
    assert s.line.length == 0.0 and s.idx == 0
    s.idx = 7.9                              # an integer member converts what it is given
    s.line.linedir = [1, 2, 3]               # a vector member is written in place
    assert s.idx == 7 and s.line.linedir.tolist() == [1.0, 2.0, 3.0]
    assert s.keys == ["line", "idx"] and len(s) == 2
    assert isinstance(s, mystruct) and isinstance(s.line, line3f)
    assert not isinstance(s, line3f) and not isinstance(3, mystruct)


def test_dataclass_values_have_methods_and_nest():
    @jr.dataclass
    class A:
        i: int
        j: float

        def total(self):
            return self.i + self.j

    @jr.dataclass
    class B:
        a1: A
        a2: A

    b = B(A(1, 2.0))
    assert b.a1.i == 1 and b.a1.j == 2.0 and b.a2.i == 0
    assert b.a1.total() == 3.0


def test_dataclass_of_methods_only_and_a_member_named_like_a_method():
    @jr.dataclass
    class Foo:
        zoo: jr.f32
        keys: int                            # a member's name wins over the class's

    @jr.dataclass
    class Bar:
        @jr.func
        def zoo(self):
            return 5

    assert Foo(1.5, 2).zoo == 1.5 and Foo(1.5, 2).keys == 2
    assert Bar().zoo() == 5 and len(Bar()) == 0


def test_dataclass_default_values_are_refused():
    with pytest.raises(jr.TaichiSyntaxError, match="Default value in @dataclass is not "
                       "supported"):
        @jr.dataclass
        class Foo:
            a: int
            b: float = 3.14


def test_bool_member_is_an_i32_holding_0_or_1():
    @jr.dataclass
    class S:
        a: jr.i16
        b: bool

    sf = S.field(shape=(2,))
    sf[0].a, sf[0].b = -1, True
    assert sf[0].a == -1 and sf[0].b == 1 and sf[1].b == 0
    assert S(1, True).b == 1


def test_python_struct_values_written_into_struct_fields():
    x = mystruct.field(shape=(3,))
    x[0] = mystruct(3)
    x[1] = jr.Struct({"line": {"linedir": vec3f(1), "length": 1.5}, "idx": 4})
    assert x[0].line.linedir.to_numpy().tolist() == [3.0, 3.0, 3.0]
    assert x[1].line.length == 1.5 and x[1].idx == 4


def test_kernels_read_python_structs_and_build_untyped_ones():
    a = jr.Struct({"a": 2, "b": 3.5})
    xs = jr.Struct.field({"a": jr.i32, "b": jr.f32}, shape=(4,))

    @jr.kernel
    def k() -> jr.f32:
        b = a
        b.a = 5                                # a copy: `a` is unchanged
        c = jr.Struct({"a": 1, "b": 0.5})
        for i in xs:
            xs[i] = jr.Struct(a=2 * i, b=1.5 * i)     # members converted as they are stored
        return b.a * 100 + a.a * 10 + c.b + b.b

    assert k() == pytest.approx(520 + 0.5 + 3.5)
    assert xs[3].a == 6 and xs[3].b == pytest.approx(4.5)


def test_struct_member_fill_in_a_kernel():
    x = jr.Struct.field({"a": jr.f32, "b": jr.types.vector(3, jr.i32)}, shape=(4,))

    @jr.kernel
    def fill():
        for i in x:
            x[i].b.fill(i * 2)
            x[i].b[2] += 1                   # one component of a vector member

    fill()
    assert x[3].b.to_numpy().tolist() == [6, 6, 7]


def test_dataclass_method_self_is_a_copy_as_in_taichi():
    @jr.dataclass
    class P:
        p1: jr.math.vec3
        p2: jr.math.vec3

        @jr.func
        def pulled(self, other, extra):
            self.p1 = (self.p1 + mean(other)) / 2 + extra.p1    # the copy changes...
            return self.p1

    offset = P(p1=[0, 2, 4], p2=[0, 0, 0])

    @jr.func
    def mean(s) -> jr.math.vec3:
        return (s.p1 + s.p2) / 2

    @jr.func
    def bump(s: jr.template()):          # a template parameter is the element itself
        s.p2[0] += 100

    @jr.kernel
    def run(f1: jr.template(), f2: jr.template(), out: jr.template()):
        for i in f1:
            out[i] = f1[i].pulled(f2[i], offset)
            bump(f2[i])

    f1, f2 = P.field(shape=(3,)), P.field(shape=(3,))
    out = jr.Vector.field(3, jr.f32, shape=3)
    for i in range(3):
        f1[i] = P(p1=[1, 2, 3], p2=[4, 5, 6])
        f2[i] = P(p1=[4, 5, 6], p2=[1, 2, 3 + i])
    run(f1, f2, out)
    assert np.allclose(out.to_numpy()[0], [1.75, 4.75, 7.75])
    assert np.allclose(out.to_numpy()[2], [1.75, 4.75, 8.25])
    assert np.allclose(f1[0].p1.to_numpy(), [1, 2, 3])       # ...not the field's element
    assert np.allclose(f2[2].p2.to_numpy(), [101, 2, 5])


def test_dataclass_string_annotations_see_the_locals_where_it_is_defined():
    vec = jr.types.vector(2, float)      # a local, as under `from __future__ import annotations`

    @jr.dataclass
    class P:
        pos: "vec"                       # noqa: F821 - evaluated by jr.dataclass
        m: "jr.f32"

    assert P(1, 2).to_dict() == {"pos": [1.0, 1.0], "m": 2.0}


def test_struct_field_takes_taichi_argument_order_methods_and_layout():
    def double(self):
        return self.a * 2

    s = jr.Struct.field({"a": jr.f32}, {"double": double}, shape=3, layout=jr.Layout.SOA)

    @jr.kernel
    def k() -> jr.f32:
        s[1].a = 4
        return s[1].double()

    assert s.shape == (3,) and k() == 8.0


def test_a_0d_struct_field_element_to_a_template_parameter():
    s = jr.Struct.field({"a": jr.i32, "v": jr.math.vec2}, shape=())

    @jr.func
    def set_all(e: jr.template(), k):
        e.a = k
        e.v[1] = k * 2

    @jr.kernel
    def k():
        set_all(s[None], 3)

    k()
    assert s[None].a == 3 and s[None].v.to_numpy().tolist() == [0, 6]


def test_a_struct_local_to_a_template_parameter_is_passed_by_reference():
    S = jr.types.struct(a=jr.i32, v=jr.math.ivec2, inner=jr.types.struct(c=jr.f32))

    @jr.func
    def grow(s: jr.template(), t):
        s.a += 1
        s.v[0] = 5
        s.inner.c = 0.5
        t.a = 100                        # a copy: the caller's is unchanged

    @jr.kernel
    def k() -> jr.f32:
        s = S(1, [0, 7])
        t = S(2)
        grow(s, t)
        return s.a * 10 + s.v[0] + s.v[1] * 100 + s.inner.c + t.a * 1000

    assert k() == pytest.approx(20 + 5 + 700 + 0.5 + 2000)


def test_struct_field_to_torch_is_a_dict_of_member_tensors():
    """`s.to_torch()` (Taichi's, Quadrants'; Genesis's path planner reads its tree so): one
    tensor per member, a copy; `from_torch` takes such a dict back."""
    torch = pytest.importorskip("torch")
    node = jr.types.struct(parent=jr.i32, q=jr.math.vec2)
    s = node.field(shape=(3, 2))
    s.parent.fill(-1)
    s[1, 0].q = (1.5, 2.5)
    got = s.to_torch(device="cpu")
    assert sorted(got) == ["parent", "q"]
    assert got["parent"].tolist() == [[-1, -1]] * 3 and got["q"].shape == (3, 2, 2)
    assert got["q"][1, 0].tolist() == [1.5, 2.5]
    got["parent"][2, 1] = 7              # a copy: the field is unchanged
    assert s.parent[2, 1] == -1
    s.from_torch({"parent": torch.full((3, 2), 4, dtype=torch.int32)})
    assert s.parent.to_numpy().tolist() == [[4, 4]] * 3
