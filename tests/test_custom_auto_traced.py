"""Custom autograd.Functions that did not say `compiled_bw_traceable`: traced when Dynamo finds
their backward safe, else one opaque call (custom.py Note [Traced without opt-in]).  Every test
is differential (eager vs compiled: grads, logs, errors); the traced ones check explain() names
them, the side-effect zoo checks the backward still ran every step, in eager's order."""

import sys
import types

import numpy as np
import pytest
import torch
from differential import differential
from torch.autograd.function import once_differentiable

import compiled_bw

pytestmark = pytest.mark.both_backends


def _traced() -> str:
    lines = [ln for ln in compiled_bw.explain().splitlines()
             if "traced without opt-in" in ln]
    return lines[0] if lines else ""


def _leaves(*shapes):
    def build():
        return [torch.randn(*s, requires_grad=True) for s in shapes] + [[]]
    return build


# ---- traced: what the backward reads is in the key ---------------------------------------------

class CtxScaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale, flip):
        ctx.save_for_backward(x, w)
        ctx.scale, ctx.flip = scale, flip
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w * ctx.scale
        if ctx.flip:                     # a branch on a ctx value
            gx = -gx
        return gx, (g * x * ctx.scale).sum(0), None, None


def test_ctx_attributes_change_between_steps_recapture():
    vals = [(1.0, False), (2.5, True), (2.5, False), (-3.0, True)] * 2

    def step(st):
        x, w, n = st
        x.grad = w.grad = None
        n.append(0)
        scale, flip = vals[len(n) - 1]
        CtxScaled.apply(x.tanh(), w, scale, flip).sum().backward()
        return [x.grad, w.grad]
    # four distinct ctx states: four captures; the repeats (steps 5, 6) hit the cache
    st = differential(_leaves((4, 3), (3,)), step, steps=6, captures=4)
    assert st.cache_hits == 2, st
    assert "CtxScaledBackward" in _traced()
    assert "compiled_bw.opaque" not in compiled_bw.last_graph().code


LOG: list = []


class Logged(torch.autograd.Function):
    """A side effect Dynamo sees (a global list appended): stays opaque, called every step."""

    @staticmethod
    def forward(ctx, x, tag):
        ctx.tag = tag
        return x * 2

    @staticmethod
    def backward(ctx, g):
        LOG.append(ctx.tag)
        return g * 2, None


def test_side_effect_called_every_step_in_order():
    def build():
        LOG.clear()
        return [torch.randn(3, requires_grad=True), []]

    def step(st):
        x, _ = st
        x.grad = None
        a = Logged.apply(x, "first")
        b = Logged.apply(a.sin(), "second")
        (b * a).sum().backward()
        return [x.grad, list(LOG)]
    differential(build, step)
    assert "LoggedBackward" not in _traced()
    assert "LoggedBackward (opaque:" in compiled_bw.explain()


class OnceDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp()


def test_once_differentiable():
    def step(st):
        x, _ = st
        x.grad = None
        OnceDiff.apply(x * 1.5).sum().backward()
        return [x.grad]
    differential(_leaves((5,)), step)
    assert "OnceDiffBackward" in _traced()


class NonTensorIO(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n, name):
        ctx.n = n
        ctx.name = name
        return x * n, n + 1, name

    @staticmethod
    def backward(ctx, g, g_n, g_name):
        return g * ctx.n * (2.0 if ctx.name == "double" else 1.0), None, None


def test_non_tensor_inputs_and_outputs():
    names = iter(["double", "single", "double"] * 2)

    def step(st):
        x, _ = st
        x.grad = None
        y, m, name = NonTensorIO.apply(x, 3, next(names))
        (y * m).sum().backward()
        return [x.grad, m, name]
    st = differential(_leaves((4,)), step, captures=2)    # one per name; step 3 hits
    assert st.cache_hits == 1, st
    assert "NonTensorIOBackward" in _traced()


class NonDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = (x > 0).float()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return x.exp(), idx, x * 2

    @staticmethod
    def backward(ctx, g_exp, g_idx, g_two):
        (idx,) = ctx.saved_tensors
        return g_exp * 2 * idx + g_two + g_idx


def test_mark_non_differentiable_and_unused_outputs():
    def step(st):
        x, _ = st
        x.grad = None
        e, idx, _two = NonDiff.apply(x)
        (e * idx).sum().backward()       # `two` unused: its grad is materialized as zeros
        return [x.grad]
    differential(_leaves((5,)), step)
    assert "NonDiffBackward" in _traced()


class NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        out = None
        if g1 is not None:
            out = g1 * 2
        if g2 is not None:
            out = g2 * 3 if out is None else out + g2 * 3
        return out


@pytest.mark.parametrize("use", ["both", "first"])
def test_set_materialize_grads_false(use):
    def step(st):
        x, _ = st
        x.grad = None
        a, b = NoMaterialize.apply(x)
        (a.sum() + b.sum() if use == "both" else a.sum()).backward()
        return [x.grad]
    differential(_leaves((4,)), step)
    if use == "both":
        assert "NoMaterializeBackward" in _traced()


class Stepped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, step):
        ctx.step = step                  # a new value every step
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * (2 + 0 * ctx.step), None


def test_ctx_value_new_every_step_ends_opaque():
    """Traced, each new ctx value is a recapture; after a few the class runs opaque (Note
    [Refused for good]) and the steps hit the cache."""
    def step(st):
        x, n = st
        x.grad = None
        n.append(len(n))
        Stepped.apply(x, n[-1]).sum().backward()
        return [x.grad]
    st = differential(_leaves((3,)), step, steps=10, captures=None, backend="eager")
    assert st.cache_hits >= 3, st
    assert "SteppedBackward" not in _traced()


class NoneGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return None                      # ignores its grad


def test_traced_backward_ignoring_its_grad_still_runs_the_hooks_before_it():
    """The hooks on the Function's output and input run (the input's with None) although
    nothing uses what the output's hook returns."""
    def step(st):
        x, w, log = st
        x.grad = w.grad = None
        t = x.tanh()
        t.register_hook(lambda g: log.append(("t", g)))
        y = NoneGrad.apply(t)
        y.register_hook(lambda g: log.append(("y", g.clone())))
        ((y * w).sum() + x.sum()).backward()
        out = [x.grad, w.grad, list(log)]
        log.clear()
        return out
    differential(_leaves((3,), (3,)), step, fallbacks=None, strict=False)
    assert "NoneGradBackward" in _traced()


class WrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, g


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.sum(0)


@pytest.mark.parametrize("fn", [WrongCount, WrongShape])
def test_backward_errors_stay_eagers(fn):
    def step(st):
        x, _ = st
        x.grad = None
        fn.apply(x.sin()).sum().backward()
        return [x.grad]
    differential(_leaves((3, 4)), step, allow_errors=True, captures=None, fallbacks=None,
                 strict=False)


class OptedOut(torch.autograd.Function):
    compiled_bw_traceable = False

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_opt_out_stays_opaque():
    def step(st):
        x, _ = st
        x.grad = None
        OptedOut.apply(x).sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code
    assert "OptedOutBackward" not in _traced()


# ---- the side-effect zoo: each stays opaque (or follows the new value), called every step -------

class Counter:
    n = 0


COUNTER = Counter()
mylib = types.ModuleType("cbw_test_mylib")
mylib.DEBUG = False
sys.modules.setdefault("cbw_test_mylib", mylib)
SCALE = 2.0
TENSOR_GLOBAL = torch.tensor([1.0, 2.0, 3.0])


def _zoo(body):
    """A Function whose backward is `body(ctx, g) -> grad`, with a log list on its ctx's
    class (the side effects' record)."""
    class Zoo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, extra):
            ctx.save_for_backward(x)
            # a plain tag (in the key) except where a mutated list is the point
            ctx.extra = extra if body is bw_ctx_list else "tag"
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return body(ctx, g), None
    Zoo.__name__ = Zoo.__qualname__ = f"Zoo_{body.__name__}"
    return Zoo


def bw_print(ctx, g):
    print("backward ran", ctx.extra)
    return g * 2


def bw_counter(ctx, g):
    COUNTER.n += 1
    return g * 2


def bw_append(ctx, g):
    LOG.append(ctx.extra)
    return g * 2


def bw_module_flag(ctx, g):
    if mylib.DEBUG:
        LOG.append("debug")
        return g * 3
    return g * 2


def bw_global_scale(ctx, g):
    return g * SCALE


def bw_ctx_list(ctx, g):
    return g * sum(ctx.extra)


def bw_item(ctx, g):
    LOG.append(round(g.sum().item(), 3))
    return g * 2


def bw_tolist(ctx, g):
    LOG.append(len(g.tolist()))
    return g * 2


def bw_numpy(ctx, g):
    (x,) = ctx.saved_tensors
    return g * torch.from_numpy(np.asarray(x.detach().numpy()) * 0 + 2)


def bw_autograd_grad(ctx, g):
    (x,) = ctx.saved_tensors
    with torch.enable_grad():
        xx = x.detach().requires_grad_()
        (d,) = torch.autograd.grad((xx * xx).sum(), xx)
    return g * d


def bw_hook(ctx, g):
    (x,) = ctx.saved_tensors
    with torch.enable_grad():
        y = x.detach().requires_grad_()
        y.register_hook(lambda t: LOG.append("hook") or t)
        (y * 2).sum().backward()
    return g * 2


def bw_tensor_global(ctx, g):
    return g * TENSOR_GLOBAL


ZOO = [bw_print, bw_counter, bw_append, bw_module_flag, bw_global_scale, bw_ctx_list, bw_item,
       bw_tolist, bw_numpy, bw_autograd_grad, bw_hook, bw_tensor_global]
MAY_TRACE = {bw_global_scale}      # traced, but every step with the value it reads then


@pytest.mark.parametrize("body", ZOO, ids=[b.__name__ for b in ZOO])
def test_side_effect_zoo(body, capsys):
    global SCALE
    fn = _zoo(body)
    steps = iter(range(100))
    printed = []

    def build():
        global SCALE
        LOG.clear()
        COUNTER.n = 0
        mylib.DEBUG = False
        SCALE = 2.0
        return [torch.randn(3, requires_grad=True), [1.0, 2.0]]

    def step(st):
        global SCALE
        x, extra = st
        x.grad = None
        k = next(steps) % 3
        mylib.DEBUG = k == 1              # flipped between steps
        SCALE = 2.0 + k                   # reassigned between steps
        extra.append(float(k))            # a ctx list mutated between steps
        fn.apply(x.cos(), extra).sum().backward()
        printed.append(capsys.readouterr().out)
        return [x.grad, list(LOG), COUNTER.n, printed[-1]]

    differential(build, step, captures=None)
    if body not in MAY_TRACE:
        assert f"{fn.__name__}Backward" not in _traced(), compiled_bw.explain()
    SCALE = 2.0


GATE = 2.0
GATES = [2.0]


def _gate_helper(g):
    return g * 2


class _ScaledByGlobal(torch.autograd.Function):
    """Auto-traced; its backward reads module globals only (Note [Constant function keys])."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * GATE


class _ScaledByList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * GATES[0]


class _ScaledByHelper(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return _gate_helper(g)


@pytest.mark.parametrize("change", ["reassigned", "list mutated", "helper replaced"])
def test_backward_reading_globals_sees_each_steps_values(change):
    """A traced backward bakes in the globals it reads: each step must see the values they
    hold then (a kept key would replay the first step's)."""
    global GATE, _gate_helper
    helper = _gate_helper

    def step(st):
        global GATE, _gate_helper
        x, log = st
        x.grad = None
        i = len(log) % 3
        log.append(i)
        if change == "reassigned":
            GATE = 2.0 + i
        elif change == "list mutated":
            GATES[0] = 2.0 + i
        else:
            _gate_helper = (lambda g, i=i: g * (i + 1)) if i else helper
        fn = {"reassigned": _ScaledByGlobal, "list mutated": _ScaledByList,
              "helper replaced": _ScaledByHelper}[change]
        fn.apply(x.sin()).sum().backward()
        return [x.grad]
    try:
        differential(lambda: [torch.randn(3, requires_grad=True), []], step, steps=4,
                     captures=None)
        if change == "reassigned":
            assert "_ScaledByGlobal" in _traced(), compiled_bw.explain()
    finally:
        GATE, GATES[0], _gate_helper = 2.0, 2.0, helper
