"""Regressions found by running Taichi's own example programs on jitrt
(tools/taichi_examples/run.py): each test is the smallest program showing one of them."""
import numpy as np
import pytest

import jitrt as jr


@pytest.mark.parametrize("kind", ["pointer", "bitmasked", "dynamic"])
def test_sparse_levels_with_taichis_keywords_name_the_level(kind):
    # marching_squares.py: ti.root.dynamic(ti.i, 1024, chunk_size=32) was a TypeError about
    # an unexpected keyword, not the "not supported" error
    with pytest.raises(NotImplementedError, match=rf"sparse layouts \({kind}\) are not "
                                                  "supported: use dense"):
        getattr(jr.root, kind)(jr.i, 1024, chunk_size=32)
    with pytest.raises(NotImplementedError, match=rf"sparse layouts \({kind}\)"):
        getattr(jr.FieldsBuilder(), kind)(jr.i, 8, chunk_size=4)


def test_real_func_and_func_return_bool_as_taichi():
    # real_func/rendering/cornell_box.py: `-> (SDFObject, vec3, bool)` was refused
    @jr.real_func
    def hit(x: jr.f32) -> (jr.f32, bool):
        return x * 2.0, x > 1.0

    @jr.func
    def over(x: jr.f32) -> bool:
        return x > 1.5

    out = jr.field(jr.f32, shape=3)

    @jr.kernel
    def run():
        for i in range(3):
            y, h = hit(jr.f32(i))
            out[i] = y + 10.0 * h + 100.0 * over(jr.f32(i))

    run()
    assert out.to_numpy().tolist() == [0.0, 2.0, 114.0]


def test_func_with_scalar_annotation_returns_a_vector_cast_elementwise():
    # eulerfluid2d.py: `def vel(vf, i, j) -> ti.f32: ... return vf[i, j]` of a vector field;
    # Taichi casts each element to the annotation (here f32 to i32: truncated)
    v = jr.Vector.field(2, jr.f32, shape=2)
    out = jr.Vector.field(2, jr.f32, shape=2)

    @jr.func
    def get(i: int) -> jr.i32:
        return v[i]

    @jr.func
    def early(i: int) -> jr.f32:
        if i == 0:
            return v[i] * 2.0
        return v[i]

    @jr.kernel
    def run():
        for i in range(2):
            out[i] = get(i) + early(i)

    v.from_numpy(np.array([[1.5, -2.5], [3.25, 4.75]], np.float32))
    run()
    assert out.to_numpy().tolist() == [[4.0, -7.0], [6.25, 8.75]]


def test_taichis_core_module_is_named_as_internals():
    # diff_sph.py, mpm128_ggui.py: `ti.vulkan if ti._lib.core.with_vulkan() else ti.cuda`
    with pytest.raises(AttributeError, match=r"jitrt._lib is not in jitrt: Taichi's C\+\+ "
                                             r"core \(taichi._lib.core\) is Taichi's internals"):
        jr._lib.core.with_vulkan()


def test_real_func_struct_parameter_is_a_local_it_can_assign():
    # real_func/rendering/cornell_box.py: `ray.color = vec3(0)` / `ray.color *= albedo` on
    # its `ray: Ray` parameter was "cannot assign to Attribute"; the caller's copy is unchanged
    ray_t = jr.types.struct(origin=jr.math.vec3, color=jr.math.vec3)

    @jr.real_func
    def shade(ray: ray_t) -> ray_t:
        for _ in range(2):
            if ray.origin.x > 0.5:
                ray.color = jr.math.vec3(0)
                break
            ray.color *= 0.5
        return ray

    out = jr.Vector.field(3, jr.f32, shape=2)

    @jr.kernel
    def run():
        r = ray_t(origin=jr.math.vec3(0.0), color=jr.math.vec3(1.0))
        out[0] = shade(r).color
        r.origin.x = 1.0
        out[1] = shade(r).color + r.color

    run()
    assert out.to_numpy().tolist() == [[0.25] * 3, [1.0] * 3]


@pytest.mark.parametrize("path", ["linalg.SparseMatrixBuilder", "linalg.SparseMatrix",
                                  "linalg.SparseSolver", "types.sparse_matrix_builder"])
def test_sparse_matrices_are_named_not_supported(path):
    # implicit_mass_spring.py, implicit_fem.py, stable_fluid.py: ti.linalg.SparseMatrixBuilder
    # was a bare AttributeError, ti.types.sparse_matrix_builder blamed sparse SNodes
    module, name = path.split(".")
    with pytest.raises(AttributeError, match=rf"jitrt.{module}.{name} is not in jitrt: sparse "
                                             r"matrices \(ti.linalg.SparseMatrix"):
        getattr(getattr(jr, module), name)


def test_a_call_inside_a_math_function_runs_once():
    # nbody.py (`ti.sqrt(ti.random())`): the argument of a math function, abs, int/float or
    # a dtype cast was lowered twice (once to see whether it is a vector), so a func with a
    # side effect in it ran twice and the second call's value was used
    count = jr.field(jr.i32, shape=())
    out = jr.field(jr.f32, shape=6)

    @jr.func
    def bump() -> jr.f32:
        k = jr.atomic_add(count[None], 1)
        return jr.f32(k + 1)

    @jr.kernel
    def run():
        out[0] = jr.sqrt(bump())
        out[1] = jr.sin(bump())
        out[2] = abs(bump())
        out[3] = int(bump())
        out[4] = jr.f32(bump())
        out[5] = jr.abs(bump()) + jr.floor(bump())

    run()
    assert count[None] == 7
    np.testing.assert_allclose(out.to_numpy(), [1.0, np.sin(2.0), 3.0, 4.0, 5.0, 13.0],
                               rtol=1e-6)


def test_pythons_pow_in_a_kernel_is_the_power():
    # waterwave.py: `pow(height[i] - shade, 2)` was "calling builtin_function_or_method pow
    # is not supported in kernels with run-time arguments"
    x = jr.field(jr.f32, shape=3)

    @jr.kernel
    def run():
        for i in x:
            x[i] = pow(x[i] + 1.0, 2) + pow(2, 3)

    x.from_numpy(np.array([0.5, 1.0, -3.0], np.float32))
    run()
    assert x.to_numpy().tolist() == [10.25, 12.0, 12.0]


def test_pow_of_vectors_is_element_wise():
    # real_func/rendering/cornell_box.py: `pow(color, vec3(1.0 / 2.2))` (taichi.math's star
    # import) was "expected a number, got a vector/matrix"
    out = jr.Vector.field(3, jr.f32, shape=3)

    @jr.kernel
    def run():
        c = jr.math.vec3(4.0, 9.0, 16.0)
        out[0] = jr.pow(c, jr.math.vec3(0.5))
        out[1] = pow(c, 0.5)
        out[2] = jr.pow(2.0, jr.math.vec3(1.0, 2.0, 3.0))

    run()
    assert out.to_numpy().tolist() == [[2.0, 3.0, 4.0], [2.0, 3.0, 4.0], [2.0, 4.0, 8.0]]


def test_starred_arguments_inside_static():
    # mpm3d.py: `for offset in ti.static(ti.grouped(ti.ndrange(*neighbour)))` was
    # 'Unsupported node "Starred"'
    neighbour = (3,) * 2
    total = jr.field(jr.i32, shape=())

    @jr.kernel
    def run():
        for off in jr.static(jr.grouped(jr.ndrange(*neighbour))):
            total[None] += off[0] * 10 + off[1]
        for i, j in jr.ndrange(*neighbour):
            total[None] += 1000

    run()
    assert total[None] == 9099
