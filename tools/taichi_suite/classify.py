"""How the runner sorts Taichi's tests: files out of scope, and one category per test outcome.

Stage: tools (no jitrt import). In: the JSON rows harness/conftest.py writes per test. Out: a
category and a short, normalised reason per failing test, so that equal causes count together.

Categories: `passed`, `skipped` (the harness skipped it: an arch or extension jitrt lacks),
`n/a` (it failed on something out of jitrt's scope: the reason names it), `missing` (a missing
feature: AttributeError, NotImplementedError, ImportError, or a jitrt error saying "not
supported"), `wrong` (an assertion on values in the test file, except one Taichi's own
Python-scope Matrix makes always true: `vacuous_assertion`), `error` (any other exception,
a `pytest.raises` that got no error, an assertion inside jitrt), `crash` (the file's process
died or ran past its timeout: counted once per file).
"""
from __future__ import annotations

import re

# whole files whose subject jitrt does not have (by design or not yet in scope)
NA_FILES: dict[str, str] = {
    **{f: "GUI/GGUI" for f in ("test_ggui.py", "test_gui.py", "test_image_io.py")},
    **{f: "sparse SNodes (pointer/bitmasked/dynamic)" for f in (
        "test_bitmasked.py", "test_dynamic.py", "test_dynamic_append_length.py",
        "test_sparse_activate.py", "test_sparse_basics.py", "test_sparse_deactivate.py",
        "test_sparse_multi_tree.py", "test_sparse_parallel.py", "test_sparse_grid.py",
        "test_struct_for_dynamic.py", "test_no_activate.py", "test_mpm_particle_list.py",
        "test_new_allocator.py", "test_gc.py", "test_listgen.py", "test_rescale.py")},
    **{f: "sparse matrices and solvers (ti.linalg.SparseMatrix)" for f in (
        "test_sparse_matrix.py", "test_sparse_linear_solver.py", "test_sparse_cg.py",
        "test_spmv.py")},
    **{f: "quantized and half types" for f in (
        "test_quant_array.py", "test_quant_array_vectorization.py", "test_quant_atomics.py",
        "test_quant_fixed.py", "test_quant_float.py", "test_quant_float_shared_exp.py",
        "test_quant_int.py", "test_quant_time_integration.py", "test_bitpacked_fields.py",
        "test_f16.py")},
    "test_aot.py": "AOT modules",
    "test_api.py": "Taichi's own API listing (dir() of its modules and classes)",
    "test_graph.py": "AOT compute graphs (ti.graph.GraphBuilder)",
    "test_mesh.py": "meshes",
    "test_texture.py": "textures (Vulkan/CUDA)",
    "test_simt.py": "GPU warp/subgroup intrinsics (ti.simt)",
    "test_shared_array.py": "GPU shared memory (ti.simt.block)",
    "test_cuda_internals.py": "CUDA internals",
    **{f: "ti.lang / C++ binding internals" for f in (
        "test_ast_resolver.py", "test_callable_template_mapper.py", "test_binding.py",
        "test_cli.py", "test_internal_func.py", "test_external_func.py",
        "test_snode_layout_inspection.py", "test_offline_cache.py")},
    **{f: "torch/paddle interop (not installed here)" for f in (
        "test_torch_ad.py", "test_torch_io.py", "test_paddle_io.py")},
}

# a failure whose reason matches is out of scope (the label says why)
NA_REASONS: tuple[tuple[str, str], ...] = (
    ("sparse SNodes (pointer/bitmasked/dynamic)",
     r"sparse SNodes|attribute '(pointer|bitmasked|dynamic|hash|activate|deactivate|is_active|"
     r"append|length|deactivate_all_snodes|rescale_index|bit_struct|bit_array|quant_array)'"),
    ("ti.lang / C++ binding internals",
     r"Taichi's internals|_Internals taichi\.|jitrt\.lang is not in jitrt|"
     r"cannot import name '\w+' from 'taichi\.(lang|_)|"
     r"No module named 'taichi\.(lang|_lib|_main|_snode|_kernels|_logging)|"
     r"attribute '(lang|_lib|_snode|_kernels|_logging|_funcs|_ti_core|snode|ptr)'"),
    ("GUI/GGUI", r"jitrt has no GUI|attribute '(GUI|ui|tools)'|jitrt\.tools is not"),
    ("quantized and half types",
     r"half precision|quantized types|attribute '(f16|float16|half2|quant)'"),
    ("meshes", r"meshes are not supported|attribute 'Mesh'"),
    ("sparse matrices and solvers (ti.linalg.SparseMatrix)",
     r"SparseMatrix|SparseSolver|sparse_matrix_builder|attribute 'linalg'|jitrt\.sparse is not"),
    ("AOT modules and compute graphs", r"attribute '(aot|GraphBuilder|Arg)'|jitrt\.aot is not"),
    ("GPU warp/subgroup intrinsics (ti.simt)", r"jitrt\.simt is not|thread/warp intrinsics"),
    ("textures (Vulkan/CUDA)", r"textures are not supported|texture formats"),
    ("Vulkan/Metal/OpenGL/DX archs", r"arch (vulkan|metal|opengl|gles|dx11|dx12)"),
    ("a package not installed here (torch, paddle, psutil)",
     r"No module named '(torch|paddle|psutil)'"),
)

MISSING_TYPES = {"AttributeError", "NotImplementedError", "ImportError", "NotInJitrt"}
MISSING_WORDS = re.compile(r"not supported|not in jitrt|unsupported|is not implemented",
                           re.IGNORECASE)


def normalise(message: str) -> str:
    """A short reason: the line of a jitrt compile error's `file:line:col: reason` (after its
    `File "...", line N, in f:` excerpt), else the first meaningful line; without
    file:line:col and long literals."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    placed = [ln for ln in lines if re.match(r"^\S+\.py:\d+:\d+: ", ln)]
    first = placed[0] if placed else lines[0] if lines else ""
    first = re.sub(r"^\S+\.py:\d+:\d+: ", "", first)
    first = re.sub(r"0x[0-9a-f]+", "0x..", first)
    first = re.sub(r"\[[^\]]{40,}\]", "[...]", first)
    return first[:160]


VACUOUS = "Taichi's own assertion cannot fail (a Python-scope Matrix is always true)"
# `assert x[i] == [1, 2]` (or `!=`) of an element of a field or ndarray of vectors/matrices:
# in Taichi `x[i]` is a Python-scope Matrix, `==` gives a Matrix of 0/1 and a Matrix has no
# __bool__, so its truth is len() > 0: the assertion holds whatever the values (README.md)
_ELEMENT_COMPARE = re.compile(r"assert\s+[\w.]+\[[^\]]*\]\s*(==|!=)\s*\S")


def vacuous_assertion(line: str, message: str) -> bool:
    """Whether a failed `assert` compares a vector/matrix element (pytest showed its left
    side as a numpy array of several components) in a form Taichi always finds true."""
    return bool(_ELEMENT_COMPARE.match(line.strip())) and message.startswith("assert array([")


def na_reason(text: str) -> str | None:
    for label, pattern in NA_REASONS:
        if re.search(pattern, text):
            return label
    return None


def classify(row: dict) -> tuple[str, str]:
    """(category, reason) of one recorded outcome (see the module docstring)."""
    if row["outcome"] == "passed":
        return "passed", ""
    if row["outcome"] == "skipped":
        return "skipped", normalise(row.get("skip_reason", ""))
    if row["when"] == "collect":
        return _collect_failure(row.get("message", ""))
    exc_type, message = row.get("exc_type", ""), row.get("message", "")
    reason = f"{exc_type}: {normalise(message)}"
    label = na_reason(message)
    if label:
        return "n/a", label
    if "Regex pattern did not match" in message:    # pytest.raises(..., match=...)
        return "error", "an error of the right kind whose message differs from Taichi's"
    mro = set(row.get("exc_mro", [exc_type]))
    if mro & MISSING_TYPES or MISSING_WORDS.search(message):
        return "missing", reason
    if exc_type == "AssertionError" and row.get("in_test_file"):
        if vacuous_assertion(row.get("raised_line", ""), message):
            return "n/a", VACUOUS
        return "wrong", "assertion on values"
    if exc_type == "Failed" and "DID NOT RAISE" in message:
        return "error", f"no error raised ({normalise(message)})"
    return "error", reason


def _collect_failure(message: str) -> tuple[str, str]:
    """A file that fails to import: the last `Type: message` line of pytest's report."""
    lines = [ln for ln in message.splitlines() if re.match(r"^[A-Za-z_.]+(Error|Exception|"
                                                           r"Jitrt)\w*: ", ln)]
    line = lines[-1] if lines else normalise(message)
    label = na_reason(line)
    if label:
        return "n/a", label
    return "missing" if MISSING_WORDS.search(line) or re.match(
        r"(AttributeError|ImportError|ModuleNotFoundError|NotInJitrt|"
        r"jitrt\.peer_names\.NotInJitrt)", line) else "error", f"import: {normalise(line)}"
