"""Custom Functions compiled_bw must call (never traced), against eager autograd, on both
backends: what PyNode::apply and the engine do with what a backward returns -- the grad passed
through, a new tensor (taken by AccumulateGrad when nothing else holds it), one the backward
kept (copied), a broadcastable shape (summed), another dtype (cast), None, a shape that is
wrong (the engine's error), an exception, a node hook registered while it runs, several
inputs, a transposed layout -- with the Function's output going straight to a leaf or on
through other nodes.  The one-tensor case runs calls/opaque.py Note [Custom calls in C++]
(the C++ call with the extension), the rest its Python tail.
"""
from __future__ import annotations

import typing

import pytest
import torch

from tests.differential import differential

LOG: list = []


class _Call(torch.autograd.Function):
    compiled_bw_traceable = False       # the call under test: never traced
    mode = "pass"
    ptr = None
    kept: typing.ClassVar[list] = []
    remember = False        # then `last` is what the backward returned
    last = None

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        mode = _Call.mode
        LOG.append(("backward", mode, tuple(g.shape)))
        if mode == "pass":
            r = g
        elif mode in ("new", "kept"):
            r = g * 2
            if mode == "kept":
                _Call.kept.append(r)
        elif mode == "broadcast":
            r = g.expand(2, *g.shape) * 1       # (2, m, n): the engine sums it to (m, n)
        elif mode == "dtype":
            r = (g * 2).double()
        elif mode == "none":
            r = None
        elif mode == "wrong_shape":
            r = g.reshape(-1)[:3].clone()
        elif mode == "raise":
            raise ValueError("backward says no")
        elif mode == "late_hook":
            node = torch._C._current_autograd_node()
            node.register_hook(lambda gi, go: LOG.append(("late post hook", len(gi), len(go))))
            r = g * 2
        elif mode == "transposed":
            r = (g.t() * 2).contiguous().t() if g.dim() == 2 else g * 2
        else:
            raise AssertionError(mode)
        if r is not None:
            _Call.ptr = r.data_ptr()
        if _Call.remember:
            _Call.last = r
        return r


class _Probe(torch.autograd.Function):
    """Another custom Function compiled_bw must call: says what grad it was given."""
    compiled_bw_traceable = False

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        LOG.append(("probe", g is _Call.last, tuple(g.stride())))
        return g * 1


class _Two(torch.autograd.Function):
    compiled_bw_traceable = False

    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        LOG.append(("two",))
        return g * 2, g * 3


MODES = ["pass", "new", "kept", "broadcast", "dtype", "none", "wrong_shape", "raise", "late_hook",
         "transposed"]


def _build():
    return [torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)]


def _program(where: str):
    def step(st):
        w, v = st
        w.grad = v.grad = None
        LOG.clear()
        _Call.kept.clear()
        x = w if where == "leaf" else (w * 3)
        y = _Call.apply(x)
        y.register_hook(lambda g: LOG.append(("hook on y", tuple(g.shape))))
        if where == "inner":      # (eager calls it with None where the backward returned None)
            x.register_hook(lambda g: LOG.append(
                ("hook on x", None if g is None else (g.dtype, tuple(g.stride())))))
        loss = (y.sin() * v).sum()
        loss.backward()
        # AccumulateGrad took what the backward returned (eager: when nothing else holds it).
        # Asked only where that tensor is what reaches the leaf and is alive or taken: else a
        # buffer allocated after it was freed may have its address either way.
        steal = None
        if where == "leaf" and _Call.mode in ("pass", "new", "kept", "late_hook"):
            steal = w.grad.data_ptr() == _Call.ptr
        return w.grad, v.grad, steal, list(LOG)
    return step


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("where", ["leaf", "inner"])
@pytest.mark.parametrize("mode", MODES)
def test_what_a_custom_backward_returns(mode, where, backend):
    _Call.mode = mode
    errs = mode in ("wrong_shape", "raise")
    try:
        differential(_build, _program(where), backend=backend, allow_errors=errs,
                     captures=None, fallbacks=None if errs else 0, strict=not errs)
    finally:
        _Call.mode = "pass"


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_custom_backward_for_two_inputs(backend):
    def step(st):
        a, b = st
        a.grad = b.grad = None
        LOG.clear()
        (_Two.apply(a, b * 1).cos() * 2).sum().backward()
        return a.grad, b.grad, list(LOG)
    differential(_build, step, backend=backend)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_custom_backward_that_changes_its_mode_between_steps(backend):
    """The same graph (one capture) while the backward returns, step by step, the grad, a
    new tensor, another dtype, a kept tensor: each step as eager."""
    def build():
        return [*_build(), iter(["pass", "new", "dtype", "kept", "pass", "late_hook"])]

    def step(st):
        _Call.mode = next(st[2])
        try:
            return _program("leaf")(st[:2])
        finally:
            _Call.mode = "pass"
    differential(build, step, steps=6, backend=backend, captures=1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("seer", ["tensor_hook", "prehook", "leaf_hook", "next_function"])
@pytest.mark.parametrize("mode", ["new", "transposed"])
def test_user_code_next_gets_the_very_tensor_a_backward_returned(mode, seer, backend):
    """Eager hands what a custom backward returned on as is: the next hook or custom
    backward gets that tensor (`is`), in its layout -- also the first time a layout comes
    back that the graph did not expect (calls/opaque.py Note [The tensor user code
    returned, to user code])."""
    def see(g):
        LOG.append((seer, g is _Call.last, tuple(g.stride())))

    def step(st):
        w, v = st
        w.grad = v.grad = None
        LOG.clear()
        x = w if seer == "leaf_hook" else w * 3
        if seer == "next_function":
            x = _Probe.apply(x)
        y = _Call.apply(x)
        if seer == "tensor_hook":
            x.register_hook(see)
        elif seer == "prehook":
            x.grad_fn.register_prehook(lambda gs: see(gs[0]))
        elif seer == "leaf_hook":
            h = w.register_hook(see)
        (y.sin() * v).sum().backward()
        if seer == "leaf_hook":
            h.remove()
        _Call.last = None
        return w.grad, v.grad, list(LOG)

    _Call.mode, _Call.remember = mode, True
    try:
        differential(_build, step, backend=backend, captures=None)
    finally:
        _Call.mode, _Call.remember, _Call.last = "pass", False, None


_CPP_FUNCTION = r'''
#include <torch/extension.h>
using namespace torch::autograd;
struct Scale : public Function<Scale> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, double k) {
    ctx->save_for_backward({x});
    ctx->saved_data["k"] = k;
    return x * k * x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto x = ctx->get_saved_variables()[0];
    double k = ctx->saved_data["k"].toDouble();
    return {g[0] * 2 * k * x, torch::Tensor()};
  }
};
torch::Tensor scale(torch::Tensor x, double k) { return Scale::apply(x, k); }
'''


@pytest.fixture(scope="module")
def cpp_function():
    from torch.utils.cpp_extension import load_inline
    return load_inline("cbw_test_cpp_function", cpp_sources=_CPP_FUNCTION, functions=["scale"])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cpp_custom_function_runs_as_its_real_node(cpp_function, backend):
    # #36 item 10: a torch::autograd::Function of a C++ extension (node class CppFunction)
    # made the whole backward fall back ("unknown autograd node kind CppFunction"); it runs
    # as an opaque call of the real node, its hooks called, and with retain_graph=False its
    # saved tensors freed as eager frees them (a third backward raises where eager's does)
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(st):
        x, w = st
        x.grad = w.grad = None
        y = cpp_function.scale(x.tanh() * w, 3.0)
        log = []
        y.grad_fn.register_hook(lambda gi, go: log.append(gi[0].sum().item()))
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        try:
            y.sum().backward()
        except RuntimeError as e:
            log.append(str(e)[:60])
        return [x.grad, w.grad, log]
    st = differential(build, step, steps=3, backend=backend, captures=2, fallbacks=None)
    # the one fallback a step is the third backward's: eager's error, raised by the walk
    assert st.fallbacks == 3 and all("backward through the graph a second time" in r
                                     for r in st.fallback_reasons), st.fallback_reasons
