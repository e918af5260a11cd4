"""Forward-mode AD around compiled backwards: forward-over-reverse (dual grad_outputs).

Consumes compiled_bw and tests/differential.py; produces pytest tests.  A backward whose
grad_outputs carry forward-AD tangents must give eager's grads and eager's tangents of them,
and a capture that fails on such a backward must leave the thread's autograd working
(core/dispatch_tls.py Note [Dispatch state after a failed trace]).
"""
from __future__ import annotations

import logging

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from differential import differential


def _primal_and_tangent(t):
    p, tan = fwAD.unpack_dual(t)
    return p.detach().clone(), None if tan is None else tan.clone()


def test_forward_over_reverse_gives_eagers_tangents():
    def build():
        return torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)

    def step(s):
        x, w = s
        with fwAD.dual_level():
            out = (x @ w).sin() * x
            go = fwAD.make_dual(torch.randn_like(out), torch.randn_like(out))
            gx, gw = torch.autograd.grad(out, [x, w], go)
            return [_primal_and_tangent(gx), _primal_and_tangent(gw)]

    differential(build, step, captures=None)


def test_a_failed_capture_of_a_dual_grad_leaves_autograd_working():
    # ConvolutionBackward0 fed a dual grad: its symbolic trace (dynamic=True) fails inside
    # torch (aten._fw_primal under FakeTensor) and is traced again static, where that node runs
    # as the real node (capture/trace.py Note [Built-in formulas fake tensors reject]; its
    # tangents are eager's).  Before the fix torch's failed trace left autograd dispatch keys
    # excluded in the thread and the next forward built no graph.
    def build():
        return torch.randn(2, 3, 7, requires_grad=True), torch.randn(4, 3, 3, requires_grad=True)

    def step(s):
        x, w = s
        with fwAD.dual_level():
            out = F.conv1d(fwAD.make_dual(x, torch.rand_like(x)),
                           fwAD.make_dual(w, torch.rand_like(w)))
            go = fwAD.make_dual(torch.rand_like(out), torch.rand_like(out))
            gx, gw = torch.autograd.grad(out, [x, w], go)
            res = [_primal_and_tangent(gx), _primal_and_tangent(gw)]
        y = (x * w.sum()).sum()
        gy = torch.autograd.grad(y, [x, w])
        return res, y.requires_grad, gy

    # FakeTensor logs the failure with its traceback; a log handler that keeps records (pytest's
    # capture) keeps the failed frames alive, and torch's leaked state would only appear when
    # they die, after this test.  Without the record they die with the exception, as in a
    # program that does not keep its logs.
    log = logging.getLogger("torch._subclasses.fake_tensor")
    disabled, log.disabled = log.disabled, True
    try:
        st = differential(build, step, captures=None, fallbacks=0, options={"dynamic": True})
    finally:
        log.disabled = disabled
    assert any("trace failed" in r for r in st.recompile_reasons), st.recompile_reasons
