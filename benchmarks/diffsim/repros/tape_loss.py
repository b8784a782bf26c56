"""Compatibility: Taichi's `ti.ad.Tape(loss=...)` zeroes the loss on entry; jitrt's does not.

    DIFFSIM_TI=jitrt PYTHONPATH=. python benchmarks/diffsim/repros/tape_loss.py

Taichi 1.7.4 prints 4.0 three times (Tape.__enter__ calls loss.fill(0.0)); jitrt prints 4.0,
8.0, 12.0: a program ported unchanged reports a loss that grows with every iteration (its
gradients are right). mpm2d.py and mass_spring.py zero the loss themselves.
"""
import os
if os.environ.get("DIFFSIM_TI") == "jitrt":
    import jitrt as ti
else:
    import taichi as ti
ti.init(arch=ti.cpu)
x = ti.field(ti.f32, shape=4, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)

@ti.kernel
def total():
    for i in x:
        loss[None] += x[i]

x.fill(1.0)
for it in range(3):
    with ti.ad.Tape(loss=loss):
        total()
    print(it, loss[None])        # Taichi: 4.0 every time (the Tape zeroes the loss on entry)
