"""Grads that an opaque call returns unchanged go on as the same tensor, as under eager's
engine (calls/opaque.py Note [Passed-through grads]): a tensor hook or a custom backward
that returns its grad hands the very object to the next node.  Differential: identities of
the grads user code sees, values, eager vs compiled, on both backends."""

import typing

import pytest
import torch
from differential import differential, grads
from functions import ToBoth

pytestmark = pytest.mark.both_backends


class Passthrough(torch.autograd.Function):
    """Backward returns its grad unchanged and records which object it got."""
    seen: typing.ClassVar[list] = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        Passthrough.seen.append(g)
        return g


def _build():
    return [torch.randn(4, 3, requires_grad=True)]


def test_hook_return_reaches_custom_backward_as_the_same_tensor():
    def step(ps):
        (w,) = ps
        w.grad = None
        Passthrough.seen.clear()
        hooked = []
        y = Passthrough.apply(w * 2)
        y.register_hook(lambda g: hooked.append(g) or g)     # returns its grad
        (y.sin()).sum().backward()
        return [*grads(ps), [Passthrough.seen[0] is hooked[0]]]
    differential(_build, step)


def test_custom_backward_return_reaches_hook_as_the_same_tensor():
    def step(ps):
        (w,) = ps
        w.grad = None
        Passthrough.seen.clear()
        hooked = []
        x = w * 2
        x.register_hook(hooked.append)
        y = Passthrough.apply(Passthrough.apply(x))
        (y.sin()).sum().backward()
        # the inner backward got what the outer one returned; the hook on x got it too
        return [*grads(ps), [Passthrough.seen[1] is Passthrough.seen[0],
                             hooked[0] is Passthrough.seen[0]]]
    differential(_build, step)


class PassToBoth(ToBoth):
    """Returns its one grad for both inputs (PyTorch's test_no_grad_copy MyFunc), opaque,
    noting it."""
    @staticmethod
    def backward(ctx, g):
        Passthrough.seen.append(g)
        return g, g


def test_grad_returns_one_passed_through_tensor_for_both_inputs():
    """torch.autograd.grad (no leaf accumulates): eager's input buffers hold the one tensor the
    backward returned for both inputs, and grad() returns it for each; so does ours (in a
    backward() that accumulates into leaves the graph copies it for all but one, as eager's
    AccumulateGrad does: tests/test_no_grad_copy.py)."""
    def build():
        return [torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)]

    def step(ps):
        a, b = ps
        Passthrough.seen.clear()
        ga, gb = torch.autograd.grad((PassToBoth.apply(a, b) * 3).sum(), [a, b])
        return [ga, gb, [ga is gb, ga is Passthrough.seen[0]]]
    differential(build, step)


class Pass(Passthrough):
    """Passthrough, opted out (an opaque call whatever Dynamo says)."""
    compiled_bw_traceable = False


def test_a_grad_passed_to_two_inputs_reaches_the_next_backward_as_itself():
    """PassToBoth hands its grad to leaf `b` and to Pass's node: eager's input buffers hold
    that one tensor, so Pass's backward gets the very object PassToBoth got (and may keep it);
    the leaf copies it, as eager's AccumulateGrad does with a grad referenced elsewhere."""
    def build():
        return [torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)]

    def step(ps):
        a, b = ps
        a.grad = b.grad = None
        Passthrough.seen.clear()
        (PassToBoth.apply(Pass.apply(a), b) * 3).sum().backward()
        first, second = Passthrough.seen
        return [*grads(ps), [second is first, a.grad.data_ptr() == first.data_ptr(),
                             b.grad.data_ptr() == first.data_ptr()]]
    differential(build, step)


def test_a_grad_passed_to_an_unread_output_too_reaches_a_leaf_hook_as_itself():
    """PassToBoth returns its grad for `b` too, which backward(inputs=[a]) never reads: `a`'s
    hook gets the very tensor PassToBoth got (and kept), as in eager, so its in-place write
    shows in the kept tensor."""
    def build():
        return [torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)]

    def step(ps):
        a, b = ps
        a.grad = None
        Passthrough.seen.clear()
        h = a.register_hook(lambda g: g.add_(1))
        ((PassToBoth.apply(b, a) * 2) * torch.arange(12.0).view(4, 3)).sum().backward(
            inputs=[a])
        h.remove()
        return [a.grad, Passthrough.seen[0]]
    differential(build, step)

