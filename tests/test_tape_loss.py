"""What `jr.ad.Tape(loss=...)` takes: one number (a 0-d field, a one-element ndarray or torch
tensor with a gradient), as Taichi does; anything else is refused when the Tape is made."""
from __future__ import annotations

import pytest

import jitrt as jr


@pytest.mark.parametrize("make, words", [
    (lambda: jr.field(jr.f32, shape=3, needs_grad=True),
     r"has shape \(3,\); The loss of `Tape` must be a 0-D field"),
    (lambda: jr.ndarray(jr.f32, shape=2, needs_grad=True),
     r"ndarray of shape \(2,\); The loss of `Tape` must be an ndarray with only one element"),
    (lambda: jr.ndarray(jr.f32, shape=1),
     "was created without needs_grad=True; Gradients of loss are not allocated, please set "
     "needs_grad=True for all ndarrays"),
    (lambda: jr.field(jr.f32, shape=()),
     r"without needs_grad=True; .*please use ti.field\(..., needs_grad=True\)"),
])
def test_a_loss_of_more_than_one_number_or_without_a_gradient_is_refused(make, words):
    loss = make()
    with pytest.raises(jr.TapeLossError, match=words) as info:
        jr.ad.Tape(loss=loss)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


def test_torch_losses_are_refused_as_taichi_refuses_them():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="must be a tensor only contains one element"):
        jr.ad.Tape(loss=torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="please set requires_grad=True for all tensors"):
        jr.ad.Tape(loss=torch.ones(1))


def test_a_one_element_ndarray_loss_seeds_its_gradient():
    a = jr.ndarray(jr.f32, shape=4, needs_grad=True)
    p = jr.ndarray(jr.f32, shape=1, needs_grad=True)
    a.fill(1.0)

    @jr.kernel
    def total(a: jr.types.ndarray(), p: jr.types.ndarray()):
        for i in a:
            p[0] += a[i] * 2

    with jr.ad.Tape(loss=p):
        total(a, p)
    assert p.to_numpy().tolist() == [8.0]
    assert a.grad.to_numpy().tolist() == [2.0] * 4
