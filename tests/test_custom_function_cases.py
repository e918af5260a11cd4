"""Custom autograd.Function semantics on both backends (the list of cases a custom Function
must keep: PyNode in python_function.cpp / custom_function.cpp, test_autograd.py), each for an
opaque Function and for one traced into the graph (`compiled_bw_traceable = True`).
Consumes nothing; differential: eager vs compiled_bw, grads (None-ness, dtype, strides), the
log of user backward calls and hooks in order, and the capture counts."""

import typing

import pytest
import torch
from differential import differential

import compiled_bw

pytestmark = pytest.mark.both_backends


def _leaves(*shapes):
    def build():
        return [torch.randn(*s, requires_grad=True) for s in shapes] + [[]]
    return build


class Logged(torch.autograd.Function):
    """A Python side effect in backward: appends to a class-level log."""
    log: typing.ClassVar[list] = []

    @staticmethod
    def forward(ctx, x, tag):
        ctx.tag = tag
        return x * 2

    @staticmethod
    def backward(ctx, g):
        Logged.log.append(("backward", ctx.tag))
        return g * 2, None


def test_side_effect_backward_runs_each_step_in_order_with_hooks():
    """Two opaque Functions and tensor hooks between them: every step calls each backward
    once, interleaved with the hooks in eager's order."""
    def step(st):
        x, log = st
        x.grad = None
        Logged.log.clear()
        a = Logged.apply(x.sin(), "a")
        a.register_hook(lambda g: Logged.log.append(("hook", "a")))
        b = Logged.apply(a.cos(), "b")
        b.register_hook(lambda g: Logged.log.append(("hook", "b")))
        c = Logged.apply(x.exp(), "c")
        (b * c).sum().backward()
        log.append(list(Logged.log))
        return [x.grad, list(log)]
    differential(_leaves((5,)), step)


class TracedAttrs(torch.autograd.Function):
    """Traced; its backward reads three ctx attributes of different types."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x, alpha, mode, dims):
        ctx.save_for_backward(x)
        ctx.alpha, ctx.mode, ctx.dims = alpha, mode, dims
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = g * ctx.alpha
        if ctx.mode == "square":
            out = out * x * 2
        return out.permute(ctx.dims).permute(ctx.dims), None, None, None


def test_traced_function_ctx_attribute_changes_recapture_never_stale():
    args = [(2.0, "plain", (0, 1)), (3.0, "plain", (0, 1)), (3.0, "square", (0, 1)),
            (3.0, "square", (1, 0)), (2.0, "plain", (0, 1))]
    it = iter(args * 2)

    def step(st):
        x, _log = st
        x.grad = None
        alpha, mode, dims = next(it)
        TracedAttrs.apply(x.tanh(), alpha, mode, dims).sum().backward()
        return [x.grad]
    st = differential(_leaves((2, 2)), step, steps=5, captures=4)
    assert st.cache_hits == 1
    assert "compiled_bw.opaque" not in compiled_bw.last_graph().code


class NonTensorIO(torch.autograd.Function):
    """Non-tensor inputs (int, str, None, a tensor that needs no grad) and outputs."""

    @staticmethod
    def forward(ctx, x, k, name, nothing, c):
        ctx.k = k
        ctx.save_for_backward(c)
        return x * k + c, k + 1, name, x.detach() * 0

    @staticmethod
    def backward(ctx, g, g_int, g_str, g_det):
        (c,) = ctx.saved_tensors
        ctx.seen = (g_int, g_str, g_det is None, None if g_det is None else g_det.shape)
        return g * ctx.k + c, None, None, None, None


class NonTensorIOTraced(NonTensorIO):
    compiled_bw_traceable = True


@pytest.mark.parametrize("fn", [NonTensorIO, NonTensorIOTraced], ids=["opaque", "traced"])
def test_non_tensor_inputs_and_outputs(fn):
    def step(st):
        x, c, log = st
        x.grad = None
        y, k1, name, det = fn.apply(x, 3, "n", None, c)
        (y.sum() + det.sum()).backward()
        log.append((k1, name, y.grad_fn.seen))
        return [x.grad, c.grad, list(log)]

    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4), []]
    differential(build, step)


class NonDiff(torch.autograd.Function):
    """mark_non_differentiable on one output; the other gets a grad."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        m = x.argmax().reshape(1).float()
        ctx.mark_non_differentiable(m)
        return x * 2, m

    @staticmethod
    def backward(ctx, g, g_m):
        (x,) = ctx.saved_tensors
        ctx.seen = (g_m is None, None if g_m is None else float(g_m.abs().sum()))
        return g * 2 + x * 0


class NonDiffTraced(NonDiff):
    compiled_bw_traceable = True


@pytest.mark.parametrize("fn", [NonDiff, NonDiffTraced], ids=["opaque", "traced"])
def test_mark_non_differentiable(fn):
    def step(st):
        x, log = st
        x.grad = None
        y, m = fn.apply(x)
        assert not m.requires_grad
        (y * m).sum().backward()
        log.append(y.grad_fn.seen)
        return [x.grad, list(log)]
    differential(_leaves((6,)), step)


class NoMaterialize(torch.autograd.Function):
    """set_materialize_grads(False): an unused output's grad reaches backward as None."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, ga, gb):
        ctx.got_none = (ga is None, gb is None)
        out = None
        if ga is not None:
            out = ga * 3
        if gb is not None:
            out = gb if out is None else out + gb
        return out


class NoMaterializeTraced(NoMaterialize):
    compiled_bw_traceable = True


@pytest.mark.parametrize("fn", [NoMaterialize, NoMaterializeTraced], ids=["opaque", "traced"])
def test_set_materialize_grads_false(fn):
    uses = iter(["a", "b", "ab"] * 2)

    def step(st):
        x, log = st
        x.grad = None
        a, b = fn.apply(x)
        use = next(uses)
        loss = (a.sum() if "a" in use else 0) + (b.sum() if "b" in use else 0)
        loss.backward()
        log.append(a.grad_fn.got_none)
        return [x.grad, list(log)]
    differential(_leaves((3,)), step, captures=3)


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.square()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class OnceTraced(Once):
    compiled_bw_traceable = True


@pytest.mark.parametrize("fn", [Once, OnceTraced], ids=["opaque", "traced"])
def test_once_differentiable_used_several_times(fn):
    def step(st):
        x, w, _log = st
        x.grad = w.grad = None
        y = fn.apply(x) + fn.apply(x * w) + fn.apply(fn.apply(w))
        y.sum().backward()
        return [x.grad, w.grad]
    differential(_leaves((4,), (4,)), step)


class CountsCalls(torch.autograd.Function):
    """Traced by opt-in, but its backward writes its ctx (a side effect the graph cannot
    repeat): it must run as an opaque call, every step."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        ctx.calls = getattr(ctx, "calls", 0) + 1
        ctx.last_grad_sum = float(g.sum())
        return g * x.exp()


def test_traced_backward_that_writes_its_ctx_runs_opaque():
    def step(st):
        x, log = st
        x.grad = None
        y = CountsCalls.apply(x * 2)
        (y * 3).sum().backward(retain_graph=True)
        (y * 3).sum().backward()
        log.append((y.grad_fn.calls, y.grad_fn.last_grad_sum))
        return [x.grad, list(log)]
    differential(_leaves((4,)), step, captures=2)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


_SHIFT = 1.0


class ReadsAGlobal(torch.autograd.Function):
    """Opted in, but its backward reads a module global the user reassigns between steps."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * _SHIFT


def test_traced_backward_reading_a_reassigned_global_is_never_stale():
    # a trace bakes the global's value in: each value is its own graph (Note [What a traced
    # function may read] in graph/custom.py)
    def step(st):
        global _SHIFT
        x, log = st
        x.grad = None
        _SHIFT = float(len(log) + 2)
        log.append(_SHIFT)
        ReadsAGlobal.apply(x.sin()).sum().backward()
        return [x.grad]
    differential(_leaves((4,)), step, captures=3)
    assert "opaque" not in compiled_bw.last_graph().code


class _Knob:
    def __init__(self) -> None:
        self.scale = 1.0


class ReadsAnObject(torch.autograd.Function):
    """Opted in; its ctx holds a user object whose attribute changes between steps."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x, knob):
        ctx.knob = knob
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.knob.scale, None


def test_traced_backward_reading_a_mutable_ctx_object_runs_as_a_call():
    # no key can see the attribute change: the node runs opaque every step (one capture)
    knob = _Knob()

    def step(st):
        x, log = st
        x.grad = None
        knob.scale = float(len(log) + 2)
        log.append(knob.scale)
        ReadsAnObject.apply(x.sin(), knob).sum().backward()
        return [x.grad]
    differential(_leaves((4,)), step, captures=1)


class TakesAnActivation(torch.autograd.Function):
    """Opted in; a function (torch.tanh / torch.sigmoid) in its ctx is keyed by identity."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x, act):
        ctx.act = act
        ctx.save_for_backward(x)
        return act(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.act(x), None


def test_traced_backward_with_a_function_in_its_ctx_stays_traced():
    def step(st):
        x, log = st
        x.grad = None
        act = (torch.tanh, torch.sigmoid)[len(log) % 2]
        log.append(act.__name__)
        TakesAnActivation.apply(x, act).sum().backward()
        return [x.grad]
    differential(_leaves((4,)), step, steps=4, captures=2)
