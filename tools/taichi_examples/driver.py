"""Run one Taichi example program headless and dump its fields (used by run.py).

    python driver.py PROGRAM.py OUT_PREFIX --frames N --seconds T

Runs under either interpreter: Taichi's (`import taichi` is Taichi) or ours (`import taichi`
is jitrt through tools/taichi_suite/harness on PYTHONPATH). Both get the same stand-ins, so
the program computes the same thing on each side:

- `ti.GUI`, `ti.ui`, `ti.tools` are stand-ins that draw nothing; the N-th `show()` (of a GUI,
  a GGUI window or a video manager) stops the program (the `Stop` exception), so both sides
  stop after the same frame; `running` stays True until then;
- `cv2`, `matplotlib` (and its pyplot) are no-op modules; `random` and `numpy.random` are seeded;
- `ti.init(...)` always runs on the CPU with one thread (`cpu_max_num_threads=1`: the order
  of floating-point atomic sums is then the program's, on both sides), and with
  `fast_math=False` if `--exact` is given;
- `time.time()` and its kin advance 1/60 s a reading (the same animation on both sides);
- a program still running after T seconds stops too (marked `timeout`).

Then every field, ndarray, numpy array and number the program's module holds (also those of
its objects, one level down, and of its lists) goes to OUT_PREFIX.npz, and the outcome
(`finished` / `stopped` / `timeout` / `error` with the exception's first line) to
OUT_PREFIX.json.
"""

import importlib.abc
import importlib.machinery
import json
import os
import random
import runpy
import signal
import sys
import time
import traceback
import types


class Stop(BaseException):
    """The program ran its N frames."""


class Timeout(BaseException):
    """The program ran past its time budget."""


FRAMES = [3]
EXACT = [False]     # --exact: ti.init(fast_math=False)
SHOWN = [0]


def _shown() -> None:
    SHOWN[0] += 1
    if SHOWN[0] >= FRAMES[0]:
        raise Stop()


class _Anything:
    """Accepts any call, attribute, item, iteration or `with`: draws nothing."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.value = kwargs.get("value", args[1] if len(args) > 1 else 0)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __call__(self, *args: object, **kwargs: object) -> object:
        return _Anything()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def __enter__(self) -> object:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __bool__(self) -> bool:
        return False

    def __getitem__(self, key: object) -> object:
        return _Anything()

    def _same(self, *other: object) -> object:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _same
    astype = _same


class _NoInput:
    """No event, no key pressed, the cursor in the middle: the input of both GUI stand-ins."""

    def get_event(self, *args: object) -> bool:
        return False

    def get_events(self, *args: object) -> list:
        return []

    def is_pressed(self, *args: object) -> bool:
        return False

    def get_cursor_pos(self) -> tuple[float, float]:
        return (0.5, 0.5)


class _Keys(type):
    def __getattr__(cls, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return name     # ti.GUI.ESCAPE, ti.GUI.LMB, ...


class GUI(_NoInput, metaclass=_Keys):
    """`ti.GUI`'s stand-in: no window, no events; the cursor in the middle."""

    def __init__(self, name: str = "", res: object = 512, *args: object, **kwargs: object):
        self.res = (res, res) if isinstance(res, int) else tuple(res)   # type: ignore[arg-type]
        self.running = True
        self.fps_limit = 60
        self.frame = 0

    def show(self, *args: object, **kwargs: object) -> None:
        self.frame += 1
        _shown()

    def slider(self, name: str, minimum: float, maximum: float, step: float = 1) -> object:
        return _Anything(value=minimum)

    def label(self, name: str) -> object:
        return _Anything(value=0)

    def button(self, name: str, *args: object) -> str:
        return name

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None     # circles, lines, set_image, text, ...


class Window(_NoInput, _Anything):
    """`ti.ui.Window`'s stand-in."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.running = True

    def show(self, *args: object) -> None:
        _shown()

    def get_gui(self) -> object:
        return _Gui()


class _Gui(_Anything):
    def sub_window(self, *a: object, **k: object) -> object:
        return self

    def slider_float(self, name: str, value: float, *a: object, **k: object) -> float:
        return value

    slider_int = slider_float

    def checkbox(self, name: str, value: bool, *a: object) -> bool:
        return value

    def button(self, *a: object) -> bool:
        return False

    def color_edit_3(self, name: str, value: object) -> object:
        return value


def _ui_module() -> types.ModuleType:
    ui = types.ModuleType("taichi.ui")

    def __getattr__(name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything if name[:1].isupper() else name
    ui.__getattr__ = __getattr__  # type: ignore[attr-defined]
    ui.Window = Window  # type: ignore[attr-defined]
    return ui


class VideoManager(_Anything):
    def write_frame(self, *args: object) -> None:
        _shown()


def imresize(img: object, width: int, height: object = None) -> object:
    """`ti.tools.imresize`: nearest-neighbour, of a field or an array (GUI programs draw
    with it)."""
    import numpy as np
    data = np.asarray(img.to_numpy() if hasattr(img, "to_numpy") else img)  # type: ignore[attr-defined]
    height = width if height is None else height
    rows = np.arange(width) * data.shape[0] // width
    cols = np.arange(int(height)) * data.shape[1] // int(height)  # type: ignore[call-overload]
    return data[rows][:, cols]


def _tools_module() -> types.ModuleType:
    tools = types.ModuleType("taichi.tools")
    tools.__getattr__ = _stand_in  # type: ignore[attr-defined]
    tools.VideoManager = VideoManager  # type: ignore[attr-defined]
    tools.imresize = imresize  # type: ignore[attr-defined]
    return tools


def _stand_in(name: str) -> object:
    """A no-op module's attribute; none for Python's own probes (`__file__`: inspect, which
    Taichi uses to find class kernels, walks every module's file)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything()


def _noop_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__getattr__ = _stand_in  # type: ignore[attr-defined]
    mod.__path__ = []  # type: ignore[attr-defined]
    sys.modules[name] = mod
    return mod


def _fake_clock(program: str) -> None:
    """`time.time()`, `time.time_ns()`, `time.perf_counter()` read by the program's own code:
    a clock that advances 1/60 s a reading, the same on both sides (programs animate with
    it); Taichi's and jitrt's own readings get the real clock."""
    readings = [0]
    real = time.time, time.time_ns, time.perf_counter

    def mine() -> bool:
        return sys._getframe(2).f_code.co_filename == program

    def now() -> float:
        if not mine():
            return real[0]()
        readings[0] += 1
        return 1.7e9 + readings[0] / 60.0

    def now_ns() -> int:
        if not mine():
            return real[1]()
        readings[0] += 1
        return int((1.7e9 + readings[0] / 60.0) * 1e9)

    def counter() -> float:
        if not mine():
            return real[2]()
        readings[0] += 1
        return readings[0] / 60.0
    time.time, time.time_ns, time.perf_counter = now, now_ns, counter


def install(ti: types.ModuleType) -> None:
    """Put the stand-ins on `ti` (and in sys.modules) and pin ti.init to one CPU thread."""
    for name in ("cv2", "matplotlib", "matplotlib.pyplot", "matplotlib.cm", "PIL",
                 "PIL.Image"):
        _noop_module(name)
    sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]  # type: ignore[attr-defined]
    ti.GUI = GUI  # type: ignore[attr-defined]
    ti.ui = _ui_module()  # type: ignore[attr-defined]
    ti.tools = _tools_module()  # type: ignore[attr-defined]
    sys.modules["taichi.ui"] = ti.ui
    sys.modules["taichi.tools"] = ti.tools
    real_init = ti.init

    def init(*args: object, **kwargs: object) -> object:
        kwargs["arch"] = ti.cpu
        kwargs["cpu_max_num_threads"] = 1
        if EXACT[0]:
            kwargs["fast_math"] = False
        result = real_init(**kwargs)
        ti.random = _counter_random(ti)  # type: ignore[attr-defined]
        ti.randn = _counter_randn(ti, ti.random)  # type: ignore[attr-defined]
        return result
    ti.init = init  # type: ignore[attr-defined]


def _counter_randn(ti: types.ModuleType, random: object) -> object:
    """`ti.randn` from the counter `ti.random` (Box-Muller), the same on both sides."""
    @ti.func
    def randn(dtype: ti.template() = float):  # type: ignore[no-untyped-def,valid-type]
        u1 = 1.0 - random()  # type: ignore[operator]
        u2 = random()  # type: ignore[operator]
        return ti.sqrt(-2.0 * ti.log(u1)) * ti.cos(2.0 * 3.14159265358979 * u2)
    return randn


def _counter_random(ti: types.ModuleType) -> object:
    """`ti.random` as a hash of a call counter: the same numbers on both sides when the
    calls come in the same order (one CPU thread), which Taichi's and jitrt's own generators
    never give."""
    state = ti.field(ti.u32, shape=())

    @ti.func
    def random(dtype: ti.template() = float):  # type: ignore[no-untyped-def,valid-type]
        h = ti.atomic_add(state[None], ti.u32(1))
        h ^= h >> 16
        h *= ti.u32(0x7FEB352D)
        h ^= h >> 15
        h *= ti.u32(0x846CA68B)
        h ^= h >> 16
        if ti.static(dtype in (float, ti.f32, ti.f64)):
            return ti.cast(h >> 8, ti.f32) * (1.0 / 16777216.0)
        else:
            return ti.cast(h, dtype)
    return random


def examples_package(program: str) -> None:
    """`taichi.examples` (Taichi's package of these programs, which some import) is the
    directory of the examples, on jitrt's side too."""
    if "taichi.examples" in sys.modules or "/examples/" not in program:
        return
    root = program[:program.rindex("/examples/") + len("/examples")]
    package = types.ModuleType("taichi.examples")
    package.__path__ = [root]  # type: ignore[attr-defined]
    sys.modules["taichi.examples"] = package
    sys.meta_path.insert(0, _ExamplesFinder())


class _ExamplesFinder(importlib.abc.MetaPathFinder):
    """Finds `taichi.examples.X` in the examples' directory (before jitrt's alias looks)."""

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if not fullname.startswith("taichi.examples."):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, path)


def _is_field(ti: types.ModuleType, value: object) -> bool:
    # jitrt's StructField is not a ti.Field subclass (Taichi's is): asked by name
    return isinstance(value, (ti.Field, ti.Ndarray)) or type(value).__name__ == "StructField"


def collect(ti: types.ModuleType, env: dict) -> dict:
    """name -> numpy array of every field/ndarray/array/number the module (or its objects,
    lists and dicts, one level down) holds."""
    import numpy as np
    out: dict = {}

    def add(name: str, value: object, depth: int) -> None:
        if isinstance(value, bool) or name in out:
            return
        if _is_field(ti, value):
            try:
                data = value.to_numpy()  # type: ignore[attr-defined]
                parts = data.items() if isinstance(data, dict) else [("", data)]
                for key, part in parts:     # a struct field: one array per member
                    out[f"{name}.{key}" if key else name] = np.asarray(part, dtype=np.float64)
            except Exception as exc:    # noqa: BLE001 (a field that cannot be read)
                if not name.endswith(".grad"):    # Taichi's unplaced gradients cannot
                    out[name + ".error"] = np.asarray(str(exc)[:200])
            grad = getattr(value, "grad", None)
            if grad is not None and _is_field(ti, grad):
                add(name + ".grad", grad, depth)
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            out[name] = np.asarray(value, dtype=np.float64)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = np.asarray(float(value))
        elif depth == 0 and isinstance(value, (list, tuple)) and len(value) < 64:
            for i, item in enumerate(value):
                add(f"{name}[{i}]", item, 1)
        elif depth == 0 and isinstance(value, dict) and len(value) < 64:
            for key, item in value.items():
                add(f"{name}[{key!r}]", item, 1)
        elif depth == 0 and hasattr(value, "__dict__") and not isinstance(
                value, (type, types.ModuleType, types.FunctionType, GUI, _Anything)) and \
                type(value).__module__ in ("__main__", "builtins"):
            for key, item in vars(value).items():
                add(f"{name}.{key}", item, 1)

    for name, value in list(env.items()):
        if not name.startswith("__"):
            add(name, value, 0)
    return out


def _module_globals(exc: BaseException, program: str) -> dict:
    """The globals of the program's module frame among the frames `exc` went through, and
    the locals of its functions' frames (named `function.name`)."""
    found: dict = {}
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if os.path.exists(code.co_filename) and os.path.samefile(code.co_filename, program):
            if code.co_name == "<module>":
                found.update(tb.tb_frame.f_globals)
            else:   # a function's locals too (`Dendrite().run()` keeps its fields in self)
                found.update({f"{code.co_name}.{k}": v for k, v in tb.tb_frame.f_locals.items()})
        tb = tb.tb_next
    return found


def _on_alarm(signum: int, frame: object) -> None:
    raise Timeout()


def main() -> None:
    program, prefix = sys.argv[1], sys.argv[2]
    FRAMES[0] = int(sys.argv[sys.argv.index("--frames") + 1])
    seconds = int(sys.argv[sys.argv.index("--seconds") + 1])
    EXACT[0] = "--exact" in sys.argv
    random.seed(0)
    import numpy as np
    np.random.seed(0)
    import taichi as ti
    install(ti)
    examples_package(os.path.abspath(program))
    start = time.monotonic()
    _fake_clock(program)
    sys.argv = [program]
    env: dict = {}
    outcome, message = "finished", ""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        env = runpy.run_path(program, run_name="__main__")
    except BaseException as exc:    # noqa: BLE001 (the program's error is the result)
        env = _module_globals(exc, program)
        if isinstance(exc, Stop):
            outcome = "stopped"
        elif isinstance(exc, Timeout):
            outcome = "timeout"
        elif not isinstance(exc, SystemExit) or exc.code not in (None, 0):
            outcome = "error"
            lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [""]
            # a kernel error's first line is where; its last says what
            said = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
            message = f"{type(exc).__name__}: {said}"[:600]
            traceback.print_exc()
    signal.alarm(0)
    seconds_run = time.monotonic() - start
    arrays = collect(ti, env)
    np.savez(prefix + ".npz", **arrays)
    with open(prefix + ".json", "w", encoding="utf-8") as out:
        json.dump({"outcome": outcome, "message": message, "frames": SHOWN[0],
                   "seconds": round(seconds_run, 1)}, out)


if __name__ == "__main__":
    main()
