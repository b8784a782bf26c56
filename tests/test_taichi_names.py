"""Taichi 1.7.4's public names (top level, ti.math, ti.types, ti.ad, ti.profiler) in jitrt: each
works or fails with jitrt's "not in jitrt: use X" error; the archs and extensions programs ask
about; Taichi's init options; the small library functions added for them."""
import logging
import warnings

import numpy as np
import pytest

import jitrt as jr
from jitrt.cache.store import CacheStore
from jitrt.peer_names import NotInJitrt

# the public names of Taichi 1.7.4's namespaces (dir() of the installed package, without _names)
TAICHI_NAMES = {
    jr: """ArgPack BitpackedFields CRITICAL DEBUG DeviceCapability ERROR Field FieldsBuilder
        Format GUI INFO Layout Matrix MatrixField MatrixNdarray Mesh MeshInstance Ndarray SNode
        ScalarField ScalarNdarray Struct StructField TRACE TaichiAssertionError
        TaichiCompilationError TaichiNameError TaichiRuntimeError TaichiRuntimeTypeError
        TaichiSyntaxError TaichiTypeError Texture Vector VectorNdarray WARN abs acos activate ad
        algorithms amdgpu aot append argpack arm64 asin assume_in_range atan2 atomic_add
        atomic_and atomic_max atomic_min atomic_mul atomic_or atomic_sub atomic_xor axes
        bit_cast bit_shr block_local cache_read_only cast ceil cos cpu cuda data_oriented
        dataclass deactivate deactivate_all_snodes dx11 dx12 eig exp experimental extension f16
        f32 f64 field float16 float32 float64 floor frexp func get_addr gles global_thread_idx
        gpu graph grouped hex_to_rgb i i16 i32 i64 i8 ij ijk ijkl ijl ik ikl il init int16 int32
        int64 int8 is_active is_logging_effective j jk jkl jl k kernel kl l lang length linalg
        log loop_config math max mesh_local mesh_patch_idx metal min ndarray ndrange no_activate
        one opengl polar_decompose pow profiler pyfunc randn random raw_div raw_mod real_func ref
        rescale_index reset rgb_to_hex root round rsqrt select set_logging_level simt sin solve
        sparse sparse_matrix_builder sqrt static static_assert static_print stop_grad svd
        sym_eig sync tan tanh template tools types u1 u16 u32 u64 u8 ui uint1 uint16 uint32
        uint64 uint8 vulkan x64 x86_64 zero""",
    jr.math: """acos asin atan2 cconj cdiv ceil cexp cinv clamp clog clz cmul cos cpow cross
        csqrt degrees determinant distance dot e exp eye floor fract inf inverse isinf isnan
        ivec2 ivec3 ivec4 length log log2 mat2 mat3 mat4 max min mix mod nan normalize pi popcnt
        pow radians reflect refract rot_by_axis rot_yaw_pitch_roll rotation2d rotation3d round
        scale sign sin smoothstep sqrt step tan tanh translate uvec2 uvec3 uvec4 vdir vec2 vec3
        vec4""",
    jr.types: """argpack compound_types f16 f32 f64 float16 float32 float64 i16 i32 i64 i8
        int16 int32 int64 int8 is_integral is_real is_signed is_tensor matrix ndarray
        ndarray_type primitive_types quant ref rw_texture sparse_matrix_builder struct template
        texture texture_type u1 u16 u32 u64 u8 uint1 uint16 uint32 uint64 uint8 utils vector""",
    jr.ad: "FwdMode Tape clear_all_gradients grad_for grad_replaced no_grad",
    jr.profiler: """CuptiMetric clear_kernel_profiler_info clear_scoped_profiler_info
        collect_kernel_profiler_metrics get_kernel_profiler_total_time
        get_predefined_cupti_metrics kernel_metrics kernel_profiler memory_profiler
        print_kernel_profiler_info print_memory_profiler_info print_scoped_profiler_info
        query_kernel_profiler_info scoped_profiler set_kernel_profiler_metrics
        set_kernel_profiler_toolkit""",
}


@pytest.mark.parametrize("module", list(TAICHI_NAMES), ids=lambda m: m.__name__)
def test_every_taichi_name_works_or_says_what_to_use(module):
    missing = []
    for name in TAICHI_NAMES[module].split():
        try:
            getattr(module, name)
        except NotInJitrt as exc:
            assert f"{module.__name__}.{name} is not in jitrt: " in str(exc)
        except AttributeError:
            missing.append(name)
    assert missing == []


def test_archs_jitrt_lacks_are_names_that_init_refuses():
    assert jr.x86_64 == jr.x64 == jr.cpu and jr.vulkan.name == "vulkan"
    for arch in (jr.vulkan, jr.metal, jr.opengl, jr.gles, jr.dx11, jr.dx12):
        with pytest.raises(jr.ConfigError, match=f"arch {arch} is not supported by jitrt"):
            jr.init(arch=arch)


def test_extensions_answer_for_jitrt():
    ext = jr.extension
    assert jr.is_extension_supported(jr.cpu, ext.adstack)
    assert jr.is_extension_supported(jr.cuda, ext.data64)
    assert jr.is_extension_supported(jr.cpu, ext.assertion)
    for lacking in (ext.sparse, ext.quant, ext.quant_basic, ext.bls, ext.mesh, ext.extfunc):
        assert not jr.is_extension_supported(jr.cpu, lacking)
    assert not jr.is_extension_supported(jr.vulkan, ext.adstack)
    with pytest.raises(TypeError, match="ext must be a jr.extension member"):
        jr.is_extension_supported(jr.cpu, "adstack")


def test_dtype_spellings_and_class_names():
    assert (jr.int32, jr.float64, jr.uint8, jr.types.f32, jr.types.int64) == \
        (jr.i32, jr.f64, jr.u8, jr.f32, jr.i64)
    assert jr.ScalarNdarray is jr.VectorNdarray is jr.MatrixNdarray is jr.Ndarray
    assert (jr.il, jr.ijl, jr.jkl) == ((0, 3), (0, 1, 3), (1, 2, 3))


def test_atomic_and_or_xor_and_their_operators():
    x = jr.field(jr.i32, shape=4)
    old = jr.field(jr.i32, shape=8)

    @jr.kernel
    def k():
        for i in range(8):
            old[i] = jr.atomic_or(x[0], 1 << i)
            jr.atomic_and(x[1], ~(1 << i))
            jr.atomic_xor(x[2], 3 << i)
            x[3] ^= 1 << i
    x[1] = -1
    k()
    assert x.to_numpy().tolist() == [255, -256, 3 ^ 6 ^ 12 ^ 24 ^ 48 ^ 96 ^ 192 ^ 384, 255]
    # each OR saw the bits of the ORs before it: eight distinct old values, all below 255
    assert len(set(old.to_numpy().tolist())) == 8 and old.to_numpy().max() < 255


def test_a_bitwise_atomic_on_floats_is_a_type_error():
    f = jr.field(jr.f32, shape=2)

    @jr.kernel
    def k():
        jr.atomic_and(f[0], 1)
    with pytest.raises(jr.TaichiTypeError, match="needs an integer element, got f32") as info:
        k()
    assert isinstance(info.value, TypeError) and "jr.atomic_and(f[0], 1)" in str(info.value)


def test_zero_one_assume_in_range_in_kernels():
    out = jr.field(jr.f32, shape=3)

    @jr.kernel
    def k():
        for i in out:
            v = jr.Vector([2.0, 5.0])
            out[i] = jr.one(v)[1] * 10 + jr.zero(v)[0] + jr.assume_in_range(i, i, 0, 1)
    k()
    assert out.to_numpy().tolist() == [10, 11, 12]
    assert jr.hex_to_rgb(0xFF8000) == (1.0, 128 / 255, 0.0)


def test_logging_level_names():
    logger = logging.getLogger("jitrt")
    before = logger.level
    try:
        jr.set_logging_level(jr.ERROR)
        assert jr.is_logging_effective(jr.CRITICAL) and not jr.is_logging_effective(jr.WARN)
        jr.set_logging_level(jr.TRACE)
        assert jr.is_logging_effective("debug")
        with pytest.raises(ValueError, match="unknown logging level 'loud'"):
            jr.set_logging_level("loud")
    finally:
        logger.setLevel(before)


def test_glsl_and_complex_helpers_match_numpy():
    out = jr.field(jr.f64, shape=16)

    @jr.kernel
    def k():
        m = jr.math
        out[0] = m.mix(2.0, 4.0, 0.25)
        out[1] = m.step(1.0, 1.0) + m.step(1.0, 0.5) * 10
        out[2] = m.fract(-1.25)
        out[3] = m.smoothstep(0.0, 2.0, 0.5)
        out[4] = m.mod(-1.0, 3.0)
        out[5] = m.degrees(m.pi)
        out[6] = m.distance(jr.Vector([1.0, 2.0]), jr.Vector([4.0, 6.0]))
        r = m.reflect(jr.Vector([1.0, -1.0]), jr.Vector([0.0, 1.0]))
        out[7] = r[1]
        t = m.refract(jr.Vector([1.0, 1.0, 1.0]), jr.Vector([0.0, 1.0, 0.0]), 2.0)
        out[8] = t[0] * 100 + t[1]
        out[9] = m.isnan(m.nan) * 10 + m.isinf(-m.inf)
        z = m.cmul(jr.Vector([1.0, 2.0]), jr.Vector([3.0, -1.0]))
        out[10] = z[0] * 100 + z[1]
        q = m.cdiv(z, jr.Vector([3.0, -1.0]))
        out[11] = q[0] * 100 + q[1]
        out[12] = m.rotation2d(m.pi / 2)[1, 0]
        out[13] = m.determinant(jr.Matrix([[2.0, 1.0], [1.0, 3.0]]))
        out[14] = (m.translate(1.0, 2.0, 3.0) @ jr.Vector([1.0, 1.0, 1.0, 1.0]))[2]
        out[15] = m.clog(m.cexp(jr.Vector([0.5, 0.25])))[1]
    k()
    z = (1 + 2j) * (3 - 1j)
    expected = [2.5, 1, 0.75, 0.15625, 2, 180, 5, 1, 200 - 1, 11, z.real * 100 + z.imag,
                100 + 2, 1, 5, 4, 0.25]
    # the literals are default_fp (f32): results to f32 precision (a GPU may round otherwise)
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-6, atol=1e-6)


TAICHI_INIT_OPTIONS = """ad_stack_size advanced_optimization allow_nv_shader_extension
    auto_mesh_local_default_occupacy cache_loop_invariant_global_vars cfg_optimization
    check_out_of_bound cpu_block_dim_adaptive cpu_max_num_threads cuda_stack_limit debug
    default_cpu_block_dim default_gpu_block_dim demote_dense_struct_fors
    demote_no_access_mesh_fors detect_read_only device_memory_GB device_memory_fraction
    experimental_auto_mesh_local fast_math flatten_if force_scalarize_matrix gpu_max_reg
    half2_vectorization kernel_profiler lower_access make_block_local make_cpu_multithreading_loop
    make_mesh_block_local make_thread_local max_block_dim mesh_localize_all_attr_mappings
    mesh_localize_from_end_mapping mesh_localize_to_end_mapping move_loop_invariant_outside_if
    num_compile_threads offline_cache offline_cache_cleaning_factor
    offline_cache_cleaning_policy offline_cache_file_path offline_cache_max_size_of_files
    opt_level optimize_mesh_reordered_mapping print_accessor_ir print_ir print_ir_dbg_info
    print_kernel_amdgcn print_kernel_asm print_kernel_llvm_ir print_kernel_llvm_ir_optimized
    print_preprocessed_ir print_struct_llvm_ir quant_opt_atomic_demotion quant_opt_store_fusion
    random_seed real_matrix_scalarize saturating_grid_dim simplify_after_lower_access
    simplify_before_lower_access timeline use_llvm verbose verbose_kernel_launches
    vk_api_version log_level gdb_trigger short_circuit_operators print_full_traceback
    unrolling_limit require_version _test_mode""".split()
SAMPLE = {"offline_cache_cleaning_factor": 0.25, "offline_cache_file_path": None,
          "offline_cache_max_size_of_files": 1 << 20, "log_level": "warn",
          "cpu_max_num_threads": 2, "ad_stack_size": 0, "random_seed": 1,
          "require_version": "1.7.4", "offline_cache_cleaning_policy": "version"}


@pytest.mark.parametrize("name", TAICHI_INIT_OPTIONS)
def test_every_taichi_init_option_is_accepted(name):
    value = SAMPLE.get(name, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jr.init(**{name: value})
    ignored = [str(w.message) for w in caught if "is a Taichi option jitrt ignores" in str(
        w.message)]
    assert len(ignored) <= 1 and all(f"jr.init({name}=...)" in m for m in ignored)


def test_taichi_cache_options_reach_the_lru():
    jr.init(offline_cache_max_size_of_files=12345, offline_cache_cleaning_factor=0.5)
    cfg = jr.runtime.program.current().config
    assert (cfg.offline_cache_max_bytes, cfg.offline_cache_cleaning_factor) == (12345, 0.5)
    with pytest.raises(jr.ConfigError, match="offline_cache_cleaning_factor.*from 0 to 1"):
        jr.init(offline_cache_cleaning_factor=2)


def test_cleaning_factor_evicts_a_fraction_of_the_entries(tmp_path):
    import os
    from jitrt.cache import store as store_mod
    for k in range(8):                              # 8 entries of 100 bytes, oldest first
        path = tmp_path / f"{k:02d}{store_mod.SUFFIX}"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + k, 1000 + k))
    assert CacheStore(tmp_path, 750).evict() == 1                      # just below the cap
    assert CacheStore(tmp_path, 650, cleaning_factor=0.5).evict() == 4   # half of 7 -> 4
    assert sorted(p.name[:2] for p in tmp_path.iterdir()) == ["05", "06", "07"]
    assert CacheStore(tmp_path, 10_000, cleaning_factor=0.5).evict() == 0  # under the cap


def test_device_id_on_the_cpu_is_an_error():
    with pytest.raises(jr.ConfigError, match=r"jr.init\(device_id=7\): the CPU is device 0"):
        jr.init(arch=jr.cpu, device_id=7)
    jr.init(arch=jr.cpu, device_id=0)


def test_dataclass_is_a_struct_type():
    @jr.dataclass
    class C:
        i: int
        f: float
    x = C.field(shape=3)

    @jr.kernel
    def k():
        for i in range(3):
            x[i].i = i
            x[i].f = i * 0.5
    k()
    assert x.to_numpy()["i"].tolist() == [0, 1, 2] and x.to_numpy()["f"].tolist() == [0, .5, 1]
    assert isinstance(x, jr.StructField)
    with pytest.raises(NotImplementedError, match=r"properties \(area\) are not supported"):
        @jr.dataclass
        class S:
            r: jr.f32

            @property
            def area(self):
                return self.r


def test_static_assert_and_static_print(capsys):
    v = jr.Vector.field(4, jr.f32, shape=())

    @jr.kernel
    def ok():
        jr.static_assert(v.n == 4, "four")
        jr.static_print("n is", v.n, v[None][0])
    ok()
    assert capsys.readouterr().out == "n is 4 <a run-time f32 value>\n"

    @jr.kernel
    def fails():
        jr.static_assert(v.n == 3, "Oh, no!")
    with pytest.raises(jr.TaichiCompilationError, match="static assertion failed: Oh, no!"):
        fails()

    @jr.kernel
    def not_static():
        flag = False
        jr.static_assert(flag)
    with pytest.raises(jr.TaichiTypeError, match="not known at compile time"):
        not_static()


def test_dtype_predicates():
    t = jr.types
    assert t.is_integral(jr.u8) and not t.is_integral(jr.f32)
    assert t.is_real(jr.f64) and not t.is_real(jr.i32)
    assert t.is_signed(jr.i8) and t.is_signed(jr.f32) and not t.is_signed(jr.u16)
    assert t.is_tensor(jr.math.vec3) and not t.is_tensor(jr.f32)
    with pytest.raises(TypeError, match="is_integral\\(dt\\): dt must be a jitrt dtype"):
        t.is_integral(3)


def test_solve_2x2_and_3x3_with_partial_pivoting():
    x2 = jr.Vector.field(2, jr.f64, shape=())
    x3 = jr.Vector.field(3, jr.f64, shape=())
    A2 = np.array([[1e-20, 1.0], [1.0, 1.0]])       # needs the row swap
    A3 = np.array([[1.0, 2.0, -4.0], [2.0, 3.0, 3.0], [5.0, -3.0, 1.0]])

    @jr.kernel
    def k():
        x2[None] = jr.solve(jr.Matrix([[1e-20, 1.0], [1.0, 1.0]]), jr.Vector([1.0, 2.0]))
        x3[None] = jr.solve(jr.Matrix([[1.0, 2.0, -4.0], [2.0, 3.0, 3.0], [5.0, -3.0, 1.0]]),
                            jr.Vector([3.0, 15.0, 3.0]))
    jr.init(default_fp=jr.f64)
    k()
    np.testing.assert_allclose(x2.to_numpy(), np.linalg.solve(A2, [1.0, 2.0]), rtol=1e-15)
    np.testing.assert_allclose(x3.to_numpy(), np.linalg.solve(A3, [3.0, 15.0, 3.0]), rtol=1e-14)

    @jr.kernel
    def bad():
        x2[None] = jr.solve(jr.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), jr.Vector([1.0, 2.0]))
    with pytest.raises(jr.KernelCompileError, match="takes a 2x2 or 3x3 matrix"):
        bad()


def test_primitive_types_lists():
    pt = jr.types.primitive_types
    assert pt.f32 is jr.f32 and pt.uint8 is jr.u8 and float in pt.real_types
    assert jr.i64 in pt.integer_types and set(pt.all_types) == set(pt.real_types +
                                                                   pt.integer_types)


def test_test_mode_init_reads_back_log_level_and_gdb_trigger(monkeypatch):
    """Taichi's `ti.init(_test_mode=True)` returns its special config; jitrt's program reads
    its two options back the same way: as given, else `TI_<NAME>`, else Taichi's default."""
    monkeypatch.delenv("TI_LOG_LEVEL", raising=False)
    monkeypatch.delenv("TI_GDB_TRIGGER", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = jr.init(_test_mode=True)
        assert (program.log_level, program.gdb_trigger) == ("info", False)
        program = jr.init(_test_mode=True, log_level="warn", gdb_trigger=True)
        assert (program.log_level, program.gdb_trigger) == ("warn", True)
        assert program.config.log_level == "warning"           # what jitrt's logging uses
        monkeypatch.setenv("TI_LOG_LEVEL", "trace")
        monkeypatch.setenv("TI_GDB_TRIGGER", "1")
        program = jr.init(_test_mode=True)
        assert (program.log_level, program.gdb_trigger) == ("trace", True)
