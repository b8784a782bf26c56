"""Regressions found by running Taichi's own example programs on jitrt
(tools/taichi_examples/run.py): each test is the smallest program showing one of them."""
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
