"""`@jr.data_oriented` classes: kernels and funcs as methods, `self` a compile-time argument."""
import numpy as np
import pytest

import jitrt as jr


@jr.data_oriented
class Springs:
    def __init__(self, n, stiffness):
        self.n, self.stiffness = n, stiffness
        self.x = jr.field(jr.f64, shape=n, needs_grad=True)
        self.energy = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.func
    def term(self, i):
        return 0.5 * self.stiffness * self.x[i] ** 2

    def plain_term(self, i):                     # a plain method: inlined as well
        return self.term(i)

    @jr.kernel
    def compute(self, scale: jr.f64):
        for i in range(self.n):
            self.energy[None] += scale * self.plain_term(i)

    @jr.ad.grad_replaced
    def twice(self, scale):
        self.compute(scale)
        self.compute(scale)

    @jr.ad.grad_for(twice)
    def twice_backward(self, scale):
        self.compute.grad(scale)
        self.compute.grad(scale)


def test_each_object_compiles_its_own_attributes_in():
    a, b = Springs(4, 2.0), Springs(3, 10.0)
    a.x.from_numpy(np.arange(4.0))
    b.x.from_numpy(np.ones(3))
    a.compute(1.0)
    b.compute(2.0)
    Springs.compute(b, 1.0)                       # called through the class
    assert a.energy[None] == pytest.approx(0.5 * 2.0 * np.sum(np.arange(4.0) ** 2))
    assert b.energy[None] == pytest.approx(3 * 0.5 * 10.0 * 3)
    assert len(Springs.compute.handles) == 2      # one specialization per object


def test_tape_grad_and_grad_replaced_methods():
    a = Springs(4, 2.0)
    a.x.from_numpy(np.arange(4.0))
    with jr.ad.Tape(loss=a.energy):
        a.compute(3.0)
    np.testing.assert_allclose(a.x.grad.to_numpy(), 3.0 * 2.0 * np.arange(4.0))
    with jr.ad.Tape(loss=a.energy):
        a.twice(1.0)
    np.testing.assert_allclose(a.x.grad.to_numpy(), 2 * 2.0 * np.arange(4.0))
    a.energy.grad.fill(1.0)
    a.x.grad.fill(0.0)
    a.compute.grad(0.5)
    np.testing.assert_allclose(a.x.grad.to_numpy(), 0.5 * 2.0 * np.arange(4.0))


def test_bound_kernels_bind_and_outside_kernels_funcs_are_python():
    a = Springs(2, 4.0)
    a.x.from_numpy(np.array([1.0, 2.0]))
    launch = a.compute.bind(1.0)
    launch()
    launch()
    assert a.energy[None] == pytest.approx(2 * 0.5 * 4.0 * 5.0)
    assert a.term(1) == pytest.approx(0.5 * 4.0 * 4.0)
    assert "bound to Springs" in repr(a.compute)


def test_an_object_of_a_plain_class_is_refused_with_the_fix():
    class Plain:
        n = 3

    @jr.kernel
    def k(s: jr.template()) -> jr.i32:
        return s.n

    with pytest.raises(jr.KernelArgError, match="@jr.data_oriented object"):
        k(Plain())
    with pytest.raises(TypeError, match="goes on a class"):
        jr.data_oriented(lambda: None)


def test_a_kernel_method_of_an_undecorated_class_is_taichis_syntax_error():
    class Undecorated:
        n = 3

        @jr.kernel
        def total(self) -> jr.i32:
            return self.n

    with pytest.raises(jr.TaichiSyntaxError, match="Please decorate class Undecorated with "
                       "@jr.data_oriented") as info:
        Undecorated().total()
    assert isinstance(info.value, jr.KernelArgError)


@jr.data_oriented
class Big:
    """A throw-away object with a large attribute, the kernel's compile-time `self`."""
    def __init__(self, k):
        self.k = k
        self.payload = [0] * 5_000_000

    @jr.kernel
    def value(self) -> jr.i32:
        return self.k


def _live_handles():
    from jitrt.runtime import program
    return [h for h in program.current().handles if h.kernel is Big.value]


def test_objects_launched_once_each_are_freed_with_their_specializations():
    import gc
    import weakref
    before = jr.debug.stats()["launches"]
    for k in range(12):                                   # each object: a specialization
        obj = Big(k)
        assert obj.value() == k and obj.value() == k     # the second launch: the fast path
        dead = weakref.ref(obj)
        del obj
        gc.collect()
        assert dead() is None, "the launch handle kept its template object alive"
    assert Big.value.handles == {} and _live_handles() == []
    assert jr.debug.stats()["launches"] - before == 24    # retired handles' launches counted


def test_a_new_object_at_a_dead_objects_address_gets_its_own_specialization(monkeypatch):
    """A specialization is keyed by its template object's id: a new object at a dead one's
    address must not get the dead one's specialization. CPython reuses a freed address for
    the next object of its size in most runs; where another allocation took it first (seen
    in full runs of the suite), the new object is given the dead one's id as jitrt sees it
    (`id` in the modules that key specializations), the same collision."""
    import gc
    import weakref

    from jitrt.runtime import arguments, weak_templates
    keep = Big(-1)                       # a live second specialization: the router path
    assert keep.value() == -1
    first = Big(1)
    assert first.value() == 1 and first.value() == 1
    jr.sync()                            # (the optimiser thread allocates too)
    address, dead = id(first), weakref.ref(first)
    del first
    gc.collect()
    assert dead() is None                # nothing of jitrt's keeps the object alive
    spare: list[Big] = []
    while len(spare) < 200_000 and (not spare or id(spare[-1]) != address):
        spare.append(Big.__new__(Big))      # allocate until the address comes back
    again = spare[-1]
    if id(again) != address:             # taken by another allocation: the same id anyway
        def same_id(obj: object, real=id) -> int:
            return address if obj is again else real(obj)
        monkeypatch.setattr(arguments, "id", same_id, raising=False)
        monkeypatch.setattr(weak_templates, "id", same_id, raising=False)
    again.__init__(2)
    assert again.value() == 2 and again.value() == 2 and keep.value() == -1
    assert len(_live_handles()) == 2


def test_a_template_object_without_weak_references_is_held_by_its_handle():
    import dataclasses
    import gc
    import weakref

    @dataclasses.dataclass(slots=True)
    class Scale:
        k: int

    @jr.kernel
    def times(s: jr.template(), x: jr.i32) -> jr.i32:
        return s.k * x

    s = Scale(3)
    with pytest.raises(TypeError):
        weakref.ref(s)
    assert times(s, 2) == 6 and times(s, 2) == 6 and times(Scale(5), 2) == 10
    gc.collect()
    assert len(times.handles) == 2       # both kept: their ids can never be reused
