"""The C++ walk's memo of custom Function nodes (walk/fastwalk.py Note [Custom node memo]):
from the second step on, a custom node at the same place of the graph takes its signature entry
from the memo when everything that entry was made from is the same.  Each program first lets
the memo be made and hit (same values for a few steps), then changes one thing the entry (or
eager's behaviour) depends on: the result must be eager's -- a recapture or the opaque path,
never a stale graph.  Each test fails if memo_hit skips the comparison it names."""

import pytest
import torch
from differential import differential

import compiled_bw
from compiled_bw.walk import fastwalk

pytestmark = pytest.mark.both_backends


def _leaves(*shapes):
    """build(): the leaves, then a step counter (each run counts from 0)."""
    def build():
        return [torch.randn(*s, requires_grad=True) for s in shapes] + [[0]]
    return build


def _next(st) -> int:
    """This step's number (the counter _leaves' build made)."""
    k = st[-1][0]
    st[-1][0] += 1
    return k


class Scaled(torch.autograd.Function):
    """Traced without opt-in (Dynamo finds it safe): ctx.scale and ctx.cfg are in its key."""

    @staticmethod
    def forward(ctx, x, w, scale, cfg):
        ctx.save_for_backward(x, w)
        ctx.scale, ctx.cfg = scale, cfg
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        k = ctx.scale * ctx.cfg[0]
        return g * w * k, (g * x * k).sum(0), None, None


def _scaled_steps(values):
    def step(st):
        x, w, _ = st
        x.grad = w.grad = None
        scale, cfg = values[_next(st)]
        Scaled.apply(x.tanh(), w, scale, cfg).sum().backward()
        return [x.grad, w.grad]
    return step


def test_memo_is_used_on_hits():
    """The other tests exercise the memo only if cache hits take it."""
    if not fastwalk.in_use():
        pytest.skip("the C++ walk is not built")
    before = fastwalk.counters()["memo_hits"]
    differential(_leaves((4, 3), (3,)), _scaled_steps([(2.0, [1.0])] * 4), steps=4)
    assert fastwalk.counters()["memo_hits"] - before >= 3


def test_ctx_value_changes_after_hits():
    vals = [(2.0, [1.0])] * 3 + [(3.0, [1.0])] * 2 + [(3, [1.0])]
    differential(_leaves((4, 3), (3,)), _scaled_steps(vals), steps=6, captures=3)


def test_ctx_list_mutated_in_place_after_hits():
    """The same list object in every step's ctx, changed in place: equal by identity, not by
    value (the memo keeps a copy)."""
    cfg = [1.0]

    def build():
        cfg[0] = 1.0
        return [torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(st):
        x, w = st
        x.grad = w.grad = None
        Scaled.apply(x.tanh(), w, 2.0, cfg).sum().backward()
        cfg[0] += 1.0
        return [x.grad, w.grad]
    differential(build, step, steps=4, captures=None)


def test_negative_zero_is_not_zero():
    """0.0 == -0.0, but a backward dividing by it gives inf or -inf: floats compare by value
    bits."""
    class Div(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, d):
            ctx.d = d
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g / ctx.d, None

    ds = [0.0, 0.0, 0.0, -0.0, -0.0]

    def step(st):
        x, _ = st
        x.grad = None
        Div.apply(x * 2, ds[_next(st)]).sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, steps=5, captures=2)


SCALE_G = 1.0


class ReadsGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * SCALE_G


def test_global_reassigned_after_hits():
    scales = [1.0, 1.0, 1.0, 4.0, 4.0]

    def step(st):
        global SCALE_G
        x, _ = st
        x.grad = None
        SCALE_G = scales[_next(st)]
        ReadsGlobal.apply(x.sin()).sum().backward()
        return [x.grad]
    try:
        differential(_leaves((3,)), step, steps=5, captures=2)
    finally:
        globals()["SCALE_G"] = 1.0


class Swapped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _triple(ctx, g):
    return g * 3


def test_backward_replaced_on_the_class_after_hits():
    orig = Swapped.backward

    def step(st):
        x, _ = st
        x.grad = None
        Swapped.backward = staticmethod(orig if _next(st) < 3 else _triple)
        Swapped.apply(x.sin()).sum().backward()
        return [x.grad]
    try:
        differential(_leaves((3,)), step, steps=5, captures=2)
    finally:
        Swapped.backward = staticmethod(orig)


def _make(k):
    """A class named Rescaled, defined anew: its backward multiplies by k (code, not a value)."""
    if k == 2:
        class Rescaled(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g * 2
    else:
        class Rescaled(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g * 5
    return Rescaled


def test_class_redefined_with_the_same_name():
    classes = [_make(2)] * 3 + [_make(5)] * 2

    def step(st):
        x, _ = st
        x.grad = None
        classes[_next(st)].apply(x.sin()).sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, steps=5, captures=2)


class Gated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w if ctx.needs_input_grad[0] else None
        gw = g * x if ctx.needs_input_grad[1] else None
        return gx, gw


def test_needs_input_grad_changes_after_hits():
    flags = [True, True, True, False, False, True]

    def step(st):
        x, w, _ = st
        x.grad = w.grad = None
        w.requires_grad_(flags[_next(st)])
        a = x * 1.0
        Gated.apply(a, w).sum().backward()
        return [x.grad, w.grad]
    differential(_leaves((3,), (3,)), step, steps=6, captures=2)


class TwoOut(torch.autograd.Function):
    """Its backward tells a materialized zero grad from None (set_materialize_grads)."""

    @staticmethod
    def forward(ctx, x, mat):
        ctx.set_materialize_grads(mat)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        if g2 is None:
            return g1 * 7, None
        return g1 * 2 + g2 * 3, None


def test_materialize_flag_changes_after_hits():
    mats = [True, True, True, False, False]

    def step(st):
        x, _ = st
        x.grad = None
        a, _ = TwoOut.apply(x.sin(), mats[_next(st)])
        a.sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, steps=5, captures=2)


class SavesView(torch.autograd.Function):
    """Its backward reads a saved tensor's stride: a trace bakes it in."""

    @staticmethod
    def forward(ctx, w, transposed):
        ctx.save_for_backward(w.t().contiguous().t() if transposed else w.clone())
        return w * 1.0

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * s.stride(1) + s, None


def test_saved_tensor_strides_change_after_hits():
    """Same shapes and ctx, another layout of a saved tensor: a recapture."""
    ts = [False, False, False, True, True]

    def step(st):
        w, _ = st
        w.grad = None
        SavesView.apply(w * 1.0, ts[_next(st)]).sum().backward()
        return [w.grad]
    differential(_leaves((3, 4)), step, steps=5, captures=None)


class MaybeSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, keep):
        ctx.save_for_backward(x, w if keep else None)
        return x * w

    @staticmethod
    def backward(ctx, g):
        _, w = ctx.saved_tensors
        return (g * w if w is not None else g * 5), None, None


def test_saved_tensor_none_after_hits():
    keeps = [True, True, True, False, False]

    def step(st):
        x, w, _ = st
        x.grad = None
        MaybeSaved.apply(x.sin(), w, keeps[_next(st)]).sum().backward()
        return [x.grad]
    differential(_leaves((3,), (3,)), step, steps=5, captures=2)


def test_saved_tensor_modified_in_place_after_hits():
    """The memo unpacks the saved tensors as node.saved_tensors does: eager's version check
    fails it, and the Python entry raises eager's error."""
    def step(st):
        x, w, _ = st
        x.grad = w.grad = None
        a = x.tanh()
        y = Scaled.apply(a, w, 2.0, [1.0])
        if _next(st) == 3:
            with torch.no_grad():
                a.mul_(2)
        y.sum().backward()
        return [x.grad, w.grad]
    # (the walk meets eager's error: that backward runs eager autograd, which raises it)
    differential(_leaves((4, 3), (3,)), step, steps=5, allow_errors=True, fallbacks=None)


class Opaque(torch.autograd.Function):
    compiled_bw_traceable = False

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.k + x, None


def test_opaque_function_ctx_changes_after_hits():
    """An opaque call runs the real backward (its ctx read live): no recapture needed, and the
    memo's hits must hand it this step's node and saved tensors."""
    ks = [2.0, 2.0, 2.0, 5.0, 5.0]

    def step(st):
        x, _ = st
        x.grad = None
        Opaque.apply(x.sin(), ks[_next(st)]).sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, steps=5, captures=1)


def test_reset_forgets_memos():
    if not fastwalk.in_use():
        pytest.skip("the C++ walk is not built")
    differential(_leaves((4, 3), (3,)), _scaled_steps([(2.0, [1.0])] * 2), steps=2)
    assert fastwalk.memo_size() > 0
    compiled_bw.reset()
    assert fastwalk.memo_size() == 0
