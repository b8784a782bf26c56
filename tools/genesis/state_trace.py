"""Genesis state traces, to find where two runs of one scene part (jitrt on the CPU against
jitrt on CUDA, or two commits): `scene.py --trace DIR` writes, after every step, the fields
of the program (`jitrt.data.live_user_fields()`) whose contents changed since the last
snapshot, one `DIR/sNNNN.npz` per step; `--trace-kernels A:B` adds a snapshot after every
kernel launch of steps A..B-1 (`DIR/sNNNN_kKKK_<kernel>.npz`, the device synchronised first;
the kernels a Genesis module holds by name). `DIR/names.txt` has each field's index, dtype,
shape and the attribute path under the rigid solver that holds it. A batch's fields are
traced sliced to the first environment (the last index axis as long as the batch). Then

    python3 tools/genesis/state_trace.py DIR_A DIR_B [--tol 1e-4] [--shown 5]

prints the first snapshots where a field of the same name differs by more than `tol`
(floats: relative to the field's magnitude, at least 1; integers: the count of elements that
differ), with which fields and by how much. Fields are matched by path (a CPU and a GPU build
create different helper fields), unnamed ones by dtype, shape and order. jitrt only: on
Quadrants `--trace` does nothing.
"""
from __future__ import annotations

import os
import sys
from typing import Any

LIMIT = 4 << 20      # fields larger than this (meshes, SDF grids: static) are not traced


class Tracer:
    def __init__(self, out: str, scene: Any, kernel_steps: tuple[int, int] | None,
                 n_envs: int = 0) -> None:
        from jitrt import data
        self.out = out
        os.makedirs(out, exist_ok=True)
        # a batch's fields: the first environment's slice (the last index axis of length n_envs)
        self.axis: dict[int, int] = {}
        self.fields = []
        for f in data.live_user_fields():
            dims = tuple(f.shape)
            axis = len(dims) - 1 - dims[::-1].index(n_envs) if n_envs > 1 and n_envs in dims \
                else -1
            if f.to_numpy().nbytes // (n_envs if axis >= 0 else 1) <= LIMIT:
                self.axis[len(self.fields)] = axis
                self.fields.append(f)
        self.last: dict[int, Any] = {}
        self.step = -1
        self.launch = 0
        self.kernel_steps = kernel_steps
        paths = _paths(scene.sim.rigid_solver)
        with open(os.path.join(out, "names.txt"), "w") as f:
            for i, fld in enumerate(self.fields):
                arr = self.array(i)
                f.write(f"{i} {arr.dtype} {arr.shape} {paths.get(id(fld), fld.name)}\n")
        if kernel_steps is not None:
            _wrap_kernels(self)

    def snapshot(self, tag: str) -> None:
        import numpy as np
        sys.modules["quadrants"].sync()
        changed = {}
        for i in range(len(self.fields)):
            arr = self.array(i)
            old = self.last.get(i)
            if old is None or not np.array_equal(old, arr, equal_nan=True):
                changed[f"f{i}"] = arr
                self.last[i] = arr
        np.savez_compressed(os.path.join(self.out, tag + ".npz"), **changed)

    def array(self, i: int) -> Any:
        arr = self.fields[i].to_numpy()
        return arr if self.axis[i] < 0 else arr.take(0, axis=self.axis[i])

    def after_step(self, i: int) -> None:
        self.step = i
        self.launch = 0
        self.snapshot(f"s{i:04d}")

    def after_launch(self, name: str) -> None:
        ks = self.kernel_steps
        step = self.step + 1          # the step now running
        if ks is not None and ks[0] <= step < ks[1]:
            self.snapshot(f"s{step:04d}_k{self.launch:03d}_{name}")
        self.launch += 1


def _paths(root: Any) -> dict[int, str]:
    """{id(field): attribute path} over the rigid solver's objects, four levels deep."""
    from jitrt.data import Field
    out: dict[int, str] = {}
    seen: set[int] = set()

    def walk(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 4:
            return
        seen.add(id(obj))
        if isinstance(obj, Field):
            out.setdefault(id(obj), path)
            return
        attrs = getattr(obj, "__dict__", None)
        if attrs is None:
            return
        for key, value in list(attrs.items()):
            if not key.startswith("__"):
                walk(value, f"{path}.{key}", depth + 1)
    walk(root, "rigid", 0)
    return out


def _wrap_kernels(tracer: Tracer) -> None:
    """Every jitrt kernel a Genesis module holds, replaced there by a wrapper that launches
    it and then tells the tracer."""
    from jitrt.kernel import Kernel
    wrapped: dict[int, Any] = {}
    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("genesis"):
            continue
        for key, value in list(vars(mod).items()):
            if isinstance(value, Kernel):
                if id(value) not in wrapped:
                    wrapped[id(value)] = _wrapper(value, tracer)
                setattr(mod, key, wrapped[id(value)])


def _wrapper(kernel: Any, tracer: Tracer) -> Any:
    def launch(*args: Any, **kwargs: Any) -> Any:
        out = kernel(*args, **kwargs)
        tracer.after_launch(kernel.name)
        return out
    return launch


def _keys(folder: str) -> dict[str, str]:
    """{npz key: a name that means the same field in another run}: the attribute path where
    the walk found one, else dtype, shape and the occurrence of that pair among the unnamed
    fields (a CPU and a GPU build of one scene create different helper fields)."""
    keys: dict[str, str] = {}
    seen: dict[str, int] = {}
    for line in open(os.path.join(folder, "names.txt")):
        index, rest = line.split(None, 1)
        dtype, tail = rest.strip().split(None, 1)
        shape, _, path = tail.rpartition(") ")
        if path.startswith("rigid"):
            keys[f"f{index}"] = path
        else:
            sig = f"{dtype} {shape})"
            seen[sig] = seen.get(sig, 0) + 1
            keys[f"f{index}"] = f"{sig} #{seen[sig]}"
    return keys


def compare(a: str, b: str, tol: float, shown: int) -> None:
    """Print the first `shown` snapshots (of those both folders hold) where a field of the
    same name differs by more than `tol`."""
    import numpy as np
    keys_a, keys_b = _keys(a), _keys(b)
    tags = sorted(t[:-4] for t in os.listdir(a) if t.endswith(".npz"))
    tags = [t for t in tags if os.path.exists(os.path.join(b, t + ".npz"))]
    last_a: dict[str, Any] = {}
    last_b: dict[str, Any] = {}
    reported = 0
    for tag in tags:
        last_a.update({keys_a[k]: v for k, v in np.load(os.path.join(a, tag + ".npz")).items()})
        last_b.update({keys_b[k]: v for k, v in np.load(os.path.join(b, tag + ".npz")).items()})
        bad = []
        for key in sorted(set(last_a) & set(last_b)):
            x, y = last_a[key], last_b[key]
            if x.shape != y.shape:
                continue      # not the same field after all
            if x.dtype.kind in "fc":
                if not x.size:
                    continue
                nan = np.isnan(x) | np.isnan(y)
                if (np.isnan(x) != np.isnan(y)).any():
                    bad.append((float("inf"), key))
                    continue
                scale = max(1.0, float(np.abs(np.where(nan, 0, x)).max()))
                d = float(np.abs(np.where(nan, 0, x - y)).max()) / scale
            else:
                d = float(np.count_nonzero(x != y))
            if d > tol:
                bad.append((d, key))
        if bad:
            print(f"{tag}: {len(bad)} fields differ")
            for d, key in sorted(bad, reverse=True)[:12]:
                print(f"    {d:10.3g} {key}")
            reported += 1
            if reported >= shown:
                return
    print(f"{len(tags)} snapshots compared")


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--shown", type=int, default=5, help="differing snapshots to print")
    ns = p.parse_args()
    compare(ns.a, ns.b, ns.tol, ns.shown)
