"""The fill kernel of a GPU device: `count` copies of an element that repeats no 1-, 2- or
4-byte word (an f64 such as 1.5, a `vec3` of unequal components), written in one launch.

Stage: backend (a helper of `gpu.py`). A fill whose element repeats a word is one driver
memset (`StreamDriver.fill_call`); any other element of up to `FILL_WORDS` 4-byte words is
this kernel, built once per device from LLVM IR (no frontend; compiled only when a program
first fills such an element), launched with the element's
words as kernel parameters: one driver call per fill, no upload; an array of at most
`UPLOAD_BYTES` (a 0-d f64 `loss.grad` set to 1) is one upload from the pinned element ring
instead, which needs no compiled code. The kernel's artifact goes to the offline cache (a warm
start compiles nothing). Thread `t` writes words
`t, t + T, t + 2T, ...` of the array (`T` threads in all), so a warp's stores are
consecutive; `T` is launched as a multiple of the element's words, so each thread writes one
word of the element, picked once before its loop (the loop is a store and an add). Elements
of other sizes (not a multiple of 4 bytes, or over `FILL_WORDS` words) are filled by
doubling copies (`StreamDriver.fill_doubling`).
"""
from __future__ import annotations

import ctypes
import functools
import math
from typing import Any, Callable

from llvmlite import ir

from ..codegen.targets import Target

FILL_WORDS = 16          # a mat4 of f32, a vec8 of f64
UPLOAD_BYTES = 4096      # arrays up to this size are filled by one upload instead
VERSION = "2"            # in the offline cache's key of the kernel's artifact
FILL_BLOCK = 256
NAME = "jitrt_fill_words"
I32, I64 = ir.IntType(32), ir.IntType(64)
# kernel parameters: dst, words in all, words per element, threads launched, then the
# element's words two to a 64-bit parameter
PARAMS = 4 + FILL_WORDS // 2


def fill_module(target: Target) -> ir.Module:
    """The module holding the fill kernel for `target`."""
    module = ir.Module(name="jitrt_fill")
    module.triple, module.data_layout = target.triple, target.data_layout
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * PARAMS), NAME)
    target.mark_kernel(fn)
    dst, total, period, threads, *pairs = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    tid = b.add(b.mul(b.zext(target.block_index(module, b), I64),
                      b.zext(target.block_size(module, b), I64)),
                b.zext(target.thread_in_block(module, b), I64))
    words = [b.trunc(b.lshr(pairs[k // 2], ir.Constant(I64, 32 * (k % 2))), I32)
             for k in range(FILL_WORDS)]
    # threads % period == 0 (kernel_call launches so): word t % period at every stride
    start = b.urem(tid, period)
    word = words[0]
    for j in range(1, FILL_WORDS):
        word = b.select(b.icmp_unsigned("==", start, ir.Constant(I64, j)), words[j], word)
    b.cbranch(b.icmp_unsigned("<", tid, total), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64, "i")
    ptr = b.inttoptr(b.add(dst, b.shl(i, ir.Constant(I64, 2))), I32.as_pointer())
    b.store(word, ptr, align=4)
    nxt = b.add(i, threads)
    i.add_incoming(tid, entry)
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, total), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return module


def upload_call(up: Callable[[int, int, int], None], dst: int, pattern: bytes, count: int
                ) -> Callable[[], None]:
    """`count` copies of `pattern` uploaded to `dst` by `up` (the element ring's), prepared:
    the bytes are made here, each call is the one copy."""
    data = ctypes.create_string_buffer(pattern * count, len(pattern) * count)
    return functools.partial(upload, up, data, dst, ctypes.addressof(data), len(data))


def upload(up: Callable[[int, int, int], None], keep: Any, dst: int, src: int, nbytes: int
           ) -> None:
    """One upload of a small array's fill (`keep`: its bytes, alive as long as the call)."""
    up(dst, src, nbytes)


def kernel_call(device: Any, function: Any, dst: int, pattern: bytes, count: int
                ) -> Callable[[], None]:
    """One launch of the fill kernel writing `count` copies of `pattern` (a multiple of 4
    bytes, at most `FILL_WORDS` words) from `dst`, prepared: its parameters are built here,
    and each call of the result is the one driver call."""
    period = len(pattern) // 4
    total = period * count
    padded = pattern + bytes(4 * FILL_WORDS - len(pattern))
    blocks = fill_blocks(total, period, device.max_resident_threads)
    values = (ctypes.c_uint64 * PARAMS)(
        dst, total, period, blocks * FILL_BLOCK,
        *(int.from_bytes(padded[8 * k:8 * k + 8], "little") for k in range(FILL_WORDS // 2)))
    params = (ctypes.c_void_p * PARAMS)(*(ctypes.addressof(values) + 8 * k
                                          for k in range(PARAMS)))
    return functools.partial(launch, device.driver.launch, (values, params), function,
                             blocks, ctypes.addressof(params))


def fill_blocks(total: int, period: int, resident: int) -> int:
    """Blocks of FILL_BLOCK threads for `total` words: enough for one word a thread, at most
    what the device holds at once, and a multiple of period / gcd(period, FILL_BLOCK), so
    that the threads in all are a multiple of the element's words (the kernel's rule)."""
    unit = period // math.gcd(period, FILL_BLOCK)
    blocks = max(1, min(-(-total // FILL_BLOCK), resident // FILL_BLOCK))
    return -(-blocks // unit) * unit


def launch(driver_launch: Callable[[Any, int, int, int], None], keep: Any, function: Any,
           blocks: int, params: int) -> None:
    """One launch of the fill kernel (`keep`: its parameters, alive as long as the call)."""
    driver_launch(function, blocks, FILL_BLOCK, params)
