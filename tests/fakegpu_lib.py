"""A fake GPU vendor's Python binding (the test double of a module like cuda-bindings' `driver`
or hip-python's `hip`): the calls of `backends/stream_driver.py`'s table under made-up `fg*`
names, over host memory. Kernels never run; memory calls do what they say (device memory is
host memory), and the calls a launch path's test looks at are recorded in `calls` in the shape
of `test_gpu_launch_path.RecordingDriver`'s: ("launch", function, grid, block), ("h2d", dst,
nbytes), ("d2h", src, nbytes), ("event_sync", event state), and the memsets as ("memset", word
bytes, dst, value, words). Kernels do not run, except the device's fill kernel, which
writes what it would. Every call is in `log`.
"""
import ctypes
import types

import numpy as np

SUCCESS, ERROR_OUT_OF_MEMORY = 0, 2
ERROR_NAMES = {SUCCESS: b"fgSuccess", ERROR_OUT_OF_MEMORY: b"fgErrorOutOfMemory"}
Attribute = types.SimpleNamespace(MULTIPROCESSORS=1, THREADS_PER_MULTIPROCESSOR=2)
STREAM_DEFAULT, STREAM_NON_BLOCKING, EVENT_NO_TIMING, CAPTURE_THREAD_LOCAL, PINNED_DEFAULT = \
    0, 1, 2, 1, 0


class FakeGpuLib:
    """One process's fake GPU: 4 multiprocessors of 256 threads each (as the recording
    driver), device memory in ctypes blocks. The constants are the binding's, as a module's."""

    SUCCESS, Attribute, STREAM_NON_BLOCKING = SUCCESS, Attribute, STREAM_NON_BLOCKING
    STREAM_DEFAULT = STREAM_DEFAULT
    EVENT_NO_TIMING, CAPTURE_THREAD_LOCAL = EVENT_NO_TIMING, CAPTURE_THREAD_LOCAL
    PINNED_DEFAULT = PINNED_DEFAULT

    def __init__(self, devices: int = 1) -> None:
        self.devices, self.calls, self.log, self.memory = devices, [], [], {}
        self.images: list[bytes] = []        # what each module load was given
        self.fail: dict[str, int] = {}       # call name -> the error it returns
        self.event_streams: dict[int, object] = {}   # id(event) -> the stream it was recorded on

    def __getattribute__(self, name):
        found = object.__getattribute__(self, name)
        if name.startswith("fg") and callable(found):
            def call(*args):
                self.log.append((name, args))
                code = self.fail.get(name)
                return (code, None) if code else found(*args)
            return call
        return found

    def fgGetErrorName(self, err):
        return SUCCESS, ERROR_NAMES.get(int(err), b"")

    def fgInit(self, flags):
        return (SUCCESS,)

    def fgGetDeviceCount(self):
        return SUCCESS, self.devices

    def fgSetDevice(self, device):
        return (SUCCESS,)

    def fgDeviceGetAttribute(self, which, device):
        return SUCCESS, {Attribute.MULTIPROCESSORS: 4, Attribute.THREADS_PER_MULTIPROCESSOR: 256}[
            which]

    def fgDriverGetVersion(self):
        return SUCCESS, 1

    def fgStreamCreate(self, flags):
        self.streams = getattr(self, "streams", 0) + 1
        return SUCCESS, "stream" if self.streams == 1 else f"stream{self.streams}"

    def fgStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event[0] if isinstance(event, list) else event))
        return (SUCCESS,)

    def fgStreamSynchronize(self, stream):
        return (SUCCESS,)

    def fgStreamDestroy(self, stream):
        return (SUCCESS,)

    def fgModuleLoad(self, image):
        self.images.append(bytes(image))
        return SUCCESS, ("module", bytes(image))

    def fgModuleUnload(self, module):
        return (SUCCESS,)

    def fgModuleGetFunction(self, module, name):
        return SUCCESS, name.decode()

    def fgLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.calls.append(("launch", function, gx, bx))
        if function == "jitrt_fill_words":      # the device's fill kernel (backends/gpu_fill.py)
            self.fill_words(params)
        return (SUCCESS,)

    @staticmethod
    def fill_words(params):
        """What the fill kernel does: (dst, words, words per element, threads, then the
        element's words two to a parameter): thread t writes word t % period of the element
        at words t, t + threads, ... (right only when threads is a multiple of period, which
        the launch must ensure: a wrong launch gives wrong values here too)."""
        slots = (ctypes.c_void_p * 12).from_address(params)
        dst, total, period, threads, *pairs = [ctypes.c_uint64.from_address(p).value
                                               for p in slots]
        element = np.array(pairs, np.uint64).view(np.uint32)
        words = (ctypes.c_uint32 * total).from_address(dst)
        thread = np.arange(total, dtype=np.uint64) % np.uint64(threads)
        np.frombuffer(words, np.uint32)[:] = element[(thread % np.uint64(period)).astype(np.intp)]

    def fgEventCreate(self, flags):
        return SUCCESS, ["event"]

    def fgEventRecord(self, event, stream):
        event[0] = "recorded"
        self.event_streams[id(event)] = stream
        return (SUCCESS,)

    def fgEventSynchronize(self, event):
        self.calls.append(("event_sync", event[0]))
        return (SUCCESS,)

    def fgEventDestroy(self, event):
        return (SUCCESS,)

    def fgStreamBeginCapture(self, stream, mode):
        return (SUCCESS,)

    def fgStreamEndCapture(self, stream):
        return SUCCESS, "graph"

    def fgGraphInstantiate(self, graph, flags):
        return SUCCESS, "exec"

    def fgGraphExecUpdate(self, graph_exec, graph):
        return (SUCCESS,)

    def fgGraphLaunch(self, graph_exec, stream):
        self.calls.append(("graph_launch", graph_exec))
        return (SUCCESS,)

    def fgGraphDestroy(self, graph):
        return (SUCCESS,)

    def fgGraphExecDestroy(self, graph_exec):
        return (SUCCESS,)

    def fgMalloc(self, nbytes):
        block = (ctypes.c_uint8 * nbytes)()
        self.memory[ctypes.addressof(block)] = block
        return SUCCESS, ctypes.addressof(block)

    def fgMallocHost(self, nbytes, flags):
        return self.fgMalloc(nbytes)

    def fgFree(self, ptr):
        self.memory.pop(ptr, None)
        return (SUCCESS,)

    fgFreeHost = fgFree

    def fgMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        self.calls.append(("h2d", dst, nbytes))
        ctypes.memmove(dst, src, nbytes)
        return (SUCCESS,)

    def fgMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        self.calls.append(("d2h", src, nbytes))
        ctypes.memmove(dst, src, nbytes)
        return (SUCCESS,)

    def fgMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        ctypes.memmove(dst, src, nbytes)
        return (SUCCESS,)

    def fgMemsetD8Async(self, dst, value, nbytes, stream):
        return self.memset(1, dst, value, nbytes)

    def fgMemsetD16Async(self, dst, value, count, stream):
        return self.memset(2, dst, value, count)

    def fgMemsetD32Async(self, dst, value, count, stream):
        return self.memset(4, dst, value, count)

    WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32}

    def memset(self, width, dst, value, count):
        """`count` words of `width` bytes, as the vendor's memset (an unsigned word)."""
        assert dst % width == 0, (dst, width)
        value %= 1 << 8 * width           # a signed word (HIP's D32) as its bits
        self.calls.append(("memset", width, dst, value, count))
        words = (ctypes.c_uint8 * (count * width)).from_address(dst)
        np.frombuffer(words, self.WORDS[width])[:] = value
        return (SUCCESS,)
