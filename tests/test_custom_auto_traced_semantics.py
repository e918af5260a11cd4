"""Automatic tracing of custom Functions, probed from PyTorch's semantics: whatever the backward
reads or does (closures, mutable ctx attributes, needs_input_grad, data-dependent branches, random
ops, in-place mutation of a saved tensor, views, dtype changes), compiled_bw gives eager's grads,
either by tracing it safely or by keeping it an opaque call."""
import pytest
import torch
from differential import differential

import compiled_bw

pytestmark = pytest.mark.both_backends


def _mk_closure():
    box = [2.0]
    k = 2.0

    def setk(v):
        nonlocal k
        k = v

    class Clo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * k
    return Clo, setk, box


def test_closure_cell_changes():
    fn, setk, _ = _mk_closure()

    def step(st):
        x, log = st
        x.grad = None
        log.append(0)
        setk(1.0 + len(log))
        fn.apply(x.sin()).sum().backward()
        return [x.grad]
    differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=4, captures=None)


class DictCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * ctx.d["s"], None


class ListCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * ctx.d[0], None


@pytest.mark.parametrize("fn", [DictCtx, ListCtx])
def test_ctx_mutable_same_object(fn):
    def build():
        return [torch.randn(3, requires_grad=True), {"s": 1.0} if fn is DictCtx else [1.0], []]

    def step(st):
        x, d, log = st
        x.grad = None
        log.append(0)
        if fn is DictCtx:
            d["s"] = float(len(log))
        else:
            d[0] = float(len(log))
        y = fn.apply(x.sin(), d)
        if fn is DictCtx:
            d["s"] = d["s"] + 10       # mutated after forward, before backward
        else:
            d[0] = d[0] + 10
        y.sum().backward()
        return [x.grad]
    differential(build, step, steps=4, captures=None)


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w if ctx.needs_input_grad[0] else None
        gw = g * x * 3 if ctx.needs_input_grad[1] else None
        return gx, gw


def test_needs_input_grad_varies():
    def step(st):
        x, w, log = st
        x.grad = w.grad = None
        log.append(0)
        n = len(log) % 3
        xx = x if n != 1 else x.detach()
        ww = w if n != 2 else w.detach()
        NeedsGrad.apply(xx, ww).sum().backward()
        return [x.grad, w.grad]
    differential(lambda: [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), []],
                 step, steps=6, captures=None)


class DataBranch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.sum() > 0:
            return g * 2
        return g * -3


def test_data_dependent_branch():
    def step(st):
        x, log = st
        x.grad = None
        log.append(0)
        s = 1.0 if len(log) % 2 else -1.0
        DataBranch.apply(x.abs() * s).sum().backward()
        return [x.grad]
    differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=4, captures=None)


class RandBw(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * torch.rand_like(g)


def test_random_in_backward():
    def step(st):
        x, _log = st
        x.grad = None
        RandBw.apply(x.sin()).sum().backward()
        return [x.grad, torch.rand(2)]
    # Refused (Note [A traced backward draws no torch random number]): the real backward draws
    # from the global generator every step, so grads and the RNG stream after it are eager's,
    # with no fallback on either backend.
    differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=3, captures=None)
    assert "RandBwBackward (opaque:" in compiled_bw.explain(), compiled_bw.explain()


_WRITES = {
    "one": lambda y: y.mul_(2),
    "chained": lambda y: y.mul_(2).add_(1),
    "one_after_another": lambda y: (y.mul_(2), y.add_(1)),
    "through_a_view": lambda y: (y[:2].mul_(2), y.add_(1)),
    "through_split": lambda y: (y.split(2)[0].mul_(2), y.unbind(0)[1].add_(1)),
}


@pytest.mark.parametrize("writes", _WRITES)
def test_several_writes_into_a_saved_tensor_bump_its_version_as_eager(writes):
    # Each in-place op bumps the saved tensor's version counter once, whether it writes the
    # tensor, a view of it, or the result of an earlier in-place op (which is the tensor).
    write = _WRITES[writes]

    class Writes(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.save_for_backward(y)
            return x * 1, y

        @staticmethod
        def backward(ctx, g, gy):
            (y,) = ctx.saved_tensors
            write(y)
            return g * y + gy

    def step(st):
        x, _log = st
        x.grad = None
        a, y = Writes.apply(x.sin())
        (a.sum() + y.sum()).backward()
        return [x.grad, y.detach().clone(), y._version]
    differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=3, captures=None)


class ViewGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g.t()


class ViewGrad2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.view(-1).view(g.shape)


class ViewGrad3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.t() * 1

    @staticmethod
    def backward(ctx, g):
        return g.t()          # a transposed view of its grad, of the input's shape


@pytest.mark.parametrize("fn", [ViewGrad, ViewGrad2, ViewGrad3])
def test_returns_view_of_grad(fn):
    def step(st):
        x, _log = st
        x.grad = None
        log2 = []
        t = x * 1
        t.register_hook(lambda gg: log2.append((gg.clone(), gg.stride())))
        y = fn.apply(t) if fn is not ViewGrad else fn.apply(t.t().contiguous().t())
        (y * torch.arange(6.).reshape(y.shape)).sum().backward()
        return [x.grad, log2]
    # ViewGrad returns a grad of the wrong shape: eager raises, so must compiled_bw (its capture
    # records a fallback).
    differential(lambda: [torch.randn(2, 3, requires_grad=True), []], step, steps=3, captures=None,
                 allow_errors=True, fallbacks=None)


class DtypeGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.double()

    @staticmethod
    def backward(ctx, g):
        return g * 2     # float64 grad for a float32 input


class DtypeGrad2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return (g * 2).half()


@pytest.mark.parametrize("fn", [DtypeGrad, DtypeGrad2])
def test_grad_dtype_differs(fn):
    def step(st):
        x, _log = st
        x.grad = None
        t = x * 1
        seen = []
        t.register_hook(lambda gg: seen.append(gg.dtype))
        fn.apply(t).sum().backward()
        return [x.grad, seen]
    differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=3, captures=None,
                 allow_errors=True)
