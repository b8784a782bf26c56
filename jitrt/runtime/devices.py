"""Several devices in one process: `jr.device(k)`, the device a with-block launches on.

Stage: runtime. Each GPU of a process that jitrt uses has its own `Program` (its context,
stream, launch handles, device memory), opened by `jr.device(k)` with the current program's
configuration on first use and kept open until the next `jr.init` or `jr.reset`
(`program.OPEN`). Entering the block makes device k's program the current one for the whole
process (as Warp's `wp.ScopedDevice` sets the default device); leaving it makes the previous
one current again. Arrays belong to the device that first gave them device memory (a
launch, an export), and a launch given an array of another device raises
(`check_devices`); `Ndarray.to_device(k)` copies one to device k. docs/gpu.md, "Several
devices, streams and interop", has the rules. Caches: none (the programs are `program.OPEN`).
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from .. import data
from ..backends import registry
from ..errors import ConfigError, JitrtError, KernelArgError
from . import program as program_mod

if TYPE_CHECKING:
    from ..backends.base import Device
    from .program import Program


@contextlib.contextmanager
def device(device_id: int) -> Iterator["Program"]:
    """`with jr.device(1):` launches, exports and `jr.sync()` use GPU 1 of the current
    program's arch (its program opened on first use, with the same options); the previous
    device is current again after the block. Process-wide, not per thread. On the CPU only
    device 0 exists. Yields the device's Program."""
    if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
        raise ConfigError(f"jr.device({device_id!r}): a device id is an int >= 0")
    previous = program_mod.current()
    if previous.recorders or previous.fwd is not None:
        raise JitrtError(f"jr.device({device_id}) inside a jr.ad.Tape, jr.ad.FwdMode or graph "
                         f"recording of device {previous.config.device_id}: they record one "
                         "device's launches; open them inside the with-block")
    target = program_mod.open_program(device_id)
    program_mod.activate(target)
    try:
        yield target
    finally:
        if program_mod.OPEN.get((previous.arch, previous.config.device_id)) is previous:
            program_mod.activate(previous)


def device_count() -> int:
    """How many devices of the current program's arch this machine has (1 on the CPU): the
    ids `jr.device(k)` accepts are 0 .. count - 1."""
    return program_mod.current().device.device_count()


def device_for(device_id: int) -> "Device | None":
    """GPU `device_id` of the current program's arch, opened if needed; None on the CPU
    (device 0; another id raises). What `Ndarray.to_device` copies to."""
    program = program_mod.open_program(device_id)
    return None if registry.get(program.arch).host_memory else program.device


data.OPEN_DEVICE[0] = device_for


def device_name(dev: "Device | None") -> str:
    """`cuda:1`, `cpu`: how errors name a device."""
    if dev is None:
        return "cpu"
    return f"{dev.arch}:{dev.device_id}"


def owner_device(value: Any) -> "Device | None":
    """The open device whose memory holds `value`'s data (a jitrt array's device copy, or
    the memory of the foreign array it wraps), or None when it has none."""
    mirror = getattr(value, "_mirror", None)
    dev = getattr(mirror, "device", None)
    if dev is None or getattr(dev, "closed", False):
        return None
    return dev  # type: ignore[no-any-return]


def foreign_device(value: Any) -> tuple[int, int] | None:
    """(DLPack device type, device id) of another library's array (`__dlpack_device__`:
    torch, CuPy, JAX), or None for jitrt's and numpy's arrays and objects without one."""
    from ..data import Field, Ndarray
    if isinstance(value, (Ndarray, Field)) or type(value).__module__ == "numpy":
        return None
    try:
        kind, index = value.__dlpack_device__()
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return None
    return int(kind), int(index)


def check_devices(kernel: Any, params: Any, values: list[Any], program: "Program") -> None:
    """Raise `KernelArgError` when an array argument (or its `.grad`) lives on another device
    than the one this launch runs on, naming the argument and both devices: a jitrt array
    whose device copy is another device's, or another library's array of this device's kind
    (`__dlpack_device__`) with another device id."""
    here = program.device
    for p, v in zip(params, values):
        if p.kind not in ("ndarray", "tensor"):
            continue
        foreign = foreign_device(v)
        if foreign is not None:
            if foreign[0] == here.dlpack_device_type and foreign[1] != here.device_id:
                raise mismatch(kernel, p.name, f"{here.arch}:{foreign[1]}", here)
            continue
        for what, buf in ((p.name, v), (f"{p.name}.grad", getattr(v, "grad", None))):
            there = owner_device(buf)
            if there is not None and there is not here:
                raise mismatch(kernel, what, device_name(there), here)


def mismatch(kernel: Any, what: str, there: str, here: "Device") -> KernelArgError:
    name = what.split(".")[0]
    return KernelArgError(
        f"kernel {kernel.qualname}: argument '{what}' lives on {there}, but this launch runs "
        f"on {device_name(here)}; launch it inside jr.device({there.rsplit(':', 1)[-1]}), or "
        f"copy a jitrt ndarray with {name}.to_device({here.device_id})")


def check_field_device(kernel_name: str, fld: Any, program: "Program") -> None:
    """Raise `KernelArgError` when a field a kernel uses (or its `.grad`) lives on another
    device than the program's, naming the kernel, the field and both devices."""
    here = program.device
    for buf in (fld, fld.grad):
        there = owner_device(buf)
        if there is not None and there is not here:
            raise KernelArgError(
                f"kernel {kernel_name.removesuffix('[]')}: field '{buf.name}' lives on "
                f"{device_name(there)}, but this launch runs on {device_name(here)}: a field "
                "belongs to the device that first used it (docs/gpu.md, \"Several devices, "
                "streams and interop\")")
