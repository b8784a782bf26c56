"""Taichi's test-harness helpers (its `tests/test_utils.py`), re-implemented for jitrt's runner:
copied to `tests/test_utils.py` of the run directory, where Taichi's tests import it
(`from tests import test_utils`).

`test(arch=..., exclude=..., require=..., **options)` parametrizes a test over the CPU only
(`req_arch, req_options`, the names Taichi's conftest reads); conftest.py calls
`ti.init(arch=ti.cpu, enable_fallback=False, **options)` before it and `ti.reset()` after. A test
that names archs without the CPU, excludes the CPU, or requires an extension jitrt says it lacks
(`ti.is_extension_supported`) is skipped with the reason.
"""
import os
import tempfile

import pytest

import taichi as ti


def expected_archs():
    """The archs tests run on here: the CPU."""
    return [ti.cpu]


def get_rel_eps():
    return 1e-6


def approx(expected, **kwargs):
    """pytest.approx with Taichi's relative tolerance floor (1e-6); a bool compares as truth."""
    if isinstance(expected, bool):
        return _Truth(expected)
    kwargs["rel"] = max(kwargs.get("rel", 1e-6), get_rel_eps())
    return pytest.approx(expected, **kwargs)


class _Truth:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return bool(self.value) == bool(other)

    def __ne__(self, other):
        return bool(self.value) != bool(other)


def allclose(x, y, **kwargs):
    return x == approx(y, **kwargs)


def make_temp_file(*args, **kwargs):
    fd, name = tempfile.mkstemp(*args, **kwargs)
    os.close(fd)
    return name


def mkdir_p(dir_path):
    os.makedirs(dir_path, exist_ok=True)


def _as_list(value):
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _excluded(exclude):
    for item in _as_list(exclude):
        arch = item[0] if isinstance(item, (list, tuple)) else item
        system = item[1] if isinstance(item, (list, tuple)) and len(item) > 1 else None
        if arch == ti.cpu and system in (None, "Linux"):
            return True
    return False


def _skip_reason(arch, exclude, require):
    archs = _as_list(arch)
    if archs and ti.cpu not in archs:
        return f"runs only on {[str(a) for a in archs]}"
    if _excluded(exclude):
        return "excludes the CPU"
    lacking = [str(e) for e in _as_list(require) if not ti.is_extension_supported(ti.cpu, e)]
    if lacking:
        return f"requires extensions jitrt lacks on the CPU: {lacking}"
    return None


def test(arch=None, exclude=None, require=None, **options):
    """Taichi's `test_utils.test`: run the test once, on the CPU, after `ti.init(**options)`."""
    reason = _skip_reason(arch, exclude, require)

    def decorator(func):
        func.__ti_test__ = True
        if reason is not None:
            return pytest.mark.skip(reason=reason)(func)
        return pytest.mark.parametrize("req_arch,req_options", [(ti.cpu, options)],
                                       ids=["arch=cpu"])(func)
    return decorator


def torch_op(*, output_shapes=((1,),)):
    """Taichi's harness helper: the kernel `f(*inputs, *outputs)` as a differentiable torch
    operation. The forward pass allocates one zero f64 tensor per shape in `output_shapes`
    (requiring grad), launches `f` to fill them and returns them; the backward pass zeroes the
    inputs' gradients, hands torch's output gradients to the outputs' `.grad`, launches
    `f.grad` on the same tensors and returns the inputs' gradients."""
    torch = pytest.importorskip("torch")

    def inner(f):
        class KernelOp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                outputs = tuple(torch.zeros(shape, dtype=torch.double, requires_grad=True)
                                for shape in output_shapes)
                f(*inputs, *outputs)
                ctx.save_for_backward(*inputs, *outputs)
                return outputs

            @staticmethod
            def backward(ctx, *grads):
                saved = ctx.saved_tensors
                inputs, outputs = saved[:len(saved) - len(grads)], saved[len(saved) - len(grads):]
                for x in inputs:
                    x.grad.fill_(0)
                for out, g in zip(outputs, grads):
                    out.grad = g
                f.grad(*inputs, *outputs)
                return tuple(x.grad for x in inputs)

        def op(*args):
            return KernelOp.apply(*args)
        return op
    return inner


__all__ = ["test"]
