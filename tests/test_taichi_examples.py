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
