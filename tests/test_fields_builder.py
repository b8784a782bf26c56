"""Taichi's `ti.FieldsBuilder` on jitrt (a layout tree of its own, then `finalize()` and
`destroy()`), one extent for several axes in `dense`, struct fields declared without a shape
and placed later."""
import pytest

import jitrt as jr


def test_builders_place_fields_kernels_use():
    fb1 = jr.FieldsBuilder()
    x = jr.field(jr.f32)
    fb1.dense(jr.i, 5).place(x)
    tree = fb1.finalize()
    fb2 = jr.FieldsBuilder()
    y, z = jr.field(jr.i32), jr.field(jr.f32, needs_grad=True)
    fb2.dense(jr.i, 5).place(y)
    fb2.dense(jr.i, 5).place(z, z.grad)
    s = jr.field(jr.f32)
    fb2.place(s)
    fb2.finalize()

    @jr.kernel
    def fill():
        for i in range(5):
            x[i] = i * 3
            y[i] = i + 5
            z[i] = i + 10
            s[None] += i

    fill()
    assert x.to_numpy().tolist() == [0, 3, 6, 9, 12]
    assert y.to_numpy().tolist() == [5, 6, 7, 8, 9] and z[4] == 14 and s[None] == 10
    assert z.grad.shape == (5,) and tree.fields == (x,)


def test_finalize_closes_the_builder_and_destroy_happens_once():
    fb = jr.FieldsBuilder()
    a = jr.field(jr.f32)
    node = fb.dense(jr.i, 3)
    node.place(a)
    tree = fb.finalize()
    with pytest.raises(RuntimeError, match="this FieldsBuilder is finalized: place fields "
                                           "through a new jr.FieldsBuilder"):
        node.place(jr.field(jr.f32))
    with pytest.raises(RuntimeError, match="finalized already"):
        fb.finalize()
    tree.destroy()
    with pytest.raises(jr.TaichiRuntimeError, match="destroyed already"):
        tree.destroy()
    with pytest.raises(NotImplementedError, match="sparse layouts"):
        jr.FieldsBuilder().pointer(jr.i, 4)


def test_one_extent_serves_every_axis_of_a_level():
    v = jr.field(jr.f32)
    jr.root.dense(jr.ij, (4,)).place(v)
    assert v.shape == (4, 4)
    with pytest.raises(ValueError, match=r"one extent per axis \(3 axes, 2 extents\)"):
        jr.root.dense(jr.ijk, (4, 2))


def test_a_struct_field_without_a_shape_is_placed_later():
    s = jr.Struct.field({"a": jr.i32, "v": jr.types.vector(3, jr.f32)})
    with pytest.raises(RuntimeError, match="has no shape yet"):
        s.shape  # noqa: B018
    jr.root.dense(jr.i, 8).place(s)
    assert s.shape == (8,) and s.a.shape == (8,) and s.v.to_numpy().shape == (8, 3)
    s[7].a = 3
    assert s.a[7] == 3
    t = jr.types.struct(p=jr.f32).field(shape=4, offset=-2)
    assert t.shape == (4,) and t.offset == (-2,)


# ---- materialization checks (Taichi's): before a kernel compiles -----------------------------
def _noop():
    @jr.kernel
    def noop():
        pass
    return noop


def test_an_unplaced_field_stops_the_next_compile_naming_its_line():
    a = jr.field(jr.i32, name="pos")     # noqa: F841  (alive: declared, never placed)
    with pytest.raises(RuntimeError, match=r"These field\(s\) are not placed: 'pos' declared "
                                           r"at .*test_fields_builder.py:\d+"):
        _noop()()
    jr.root.dense(jr.i, 2).place(a)
    _noop()()                            # placed: compiles


@pytest.mark.parametrize("kind", ["grad", "dual"])
def test_a_companion_asked_for_must_be_placed(kind):
    make = {"grad": dict(needs_grad=True), "dual": dict(needs_dual=True)}[kind]
    v = jr.Vector.field(3, jr.f32, **make)
    jr.root.dense(jr.i, 1).place(v)
    with pytest.raises(RuntimeError, match=rf"require `needs_{kind}=True`, however their "
                                           rf"{kind} field\(s\) are not placed") as info:
        _noop()()
    assert f"These field(s) requrie `needs_{kind}=True`" in str(info.value)   # Taichi's text
    getattr(jr.root, f"lazy_{kind}")()
    _noop()()
    m = jr.Matrix.field(2, 2, jr.f64, **make)
    jr.root.dense(jr.i, 3).place(m, getattr(m, kind))
    _noop()()                             # placed explicitly: compiles


def test_a_new_program_forgets_the_old_programs_fields():
    a = jr.field(jr.f32)                 # noqa: F841
    jr.init(offline_cache=False)
    _noop()()


def test_destroy_makes_kernels_read_a_data_oriented_objects_new_fields():
    @jr.data_oriented
    class Holder:
        def init(self):
            self.x = jr.field(int)
            fb = jr.FieldsBuilder()
            fb.dense(jr.i, 50).place(self.x)
            self.tree = fb.finalize()

        @jr.kernel
        def k(self, m: int):
            for i in range(50):
                self.x[i] = m * i

    h = Holder()
    h.init()
    h.k(1)
    first = h.x
    h.tree.destroy()
    h.init()                     # new fields under the same object
    h.k(2)
    assert h.x[34] == 68 and first[34] == 34
    h.k(3)                       # the recompiled kernel keeps working (fast path)
    assert h.x[34] == 102
