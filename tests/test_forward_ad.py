"""Forward-mode AD around compiled backwards: forward-over-reverse (dual grad_outputs).

Consumes compiled_bw and tests/differential.py; produces pytest tests.  A backward whose
grad_outputs carry forward-AD tangents must give eager's grads and eager's tangents of them,
and a capture that fails on such a backward must leave the thread's autograd working
(core/dispatch_tls.py Note [Dispatch state after a failed trace]).
"""
from __future__ import annotations

import logging
import subprocess
import sys

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from differential import assert_same, differential, selected_backend

import compiled_bw
from compiled_bw.graph import node_table
from compiled_bw.torchapi import dynamo as torch_dynamo

# torch 2.12 only: a node fed dual grads that runs as the real node (an opaque call, trace/
# trace.py Note [Built-in formulas fake tensors reject]) fails inside torch's dispatch under
# make_fx ("tls_on_entry.has_value() INTERNAL ASSERT FAILED at PythonFallbackKernel.cpp"): the
# backward runs eager autograd with that reason.  2.11 and 2.13 on compile it.
OPAQUE_DUAL_FAILS = node_table.release() == (2, 12)
DUAL_FAILURE = "tls_on_entry.has_value() INTERNAL ASSERT"


def _expect_opaque_dual_fallbacks(st, n):
    """On 2.12: n fallbacks, each with torch's assert as the reason."""
    assert st.fallbacks == n and all(DUAL_FAILURE in r for r in st.fallback_reasons), \
        st.fallback_reasons


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
    # as the real node (trace/trace.py Note [Built-in formulas fake tensors reject]; its
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
        st = differential(build, step, captures=None, options={"dynamic": True},
                          fallbacks=None if OPAQUE_DUAL_FAILS else 0)
    finally:
        log.disabled = disabled
    assert any("trace failed" in r for r in st.recompile_reasons), st.recompile_reasons
    if OPAQUE_DUAL_FAILS:
        _expect_opaque_dual_fallbacks(st, 3)


def test_a_formula_fake_tensors_reject_leaves_autograd_working_while_logs_keep_its_frames(monkeypatch):
    # ConvolutionBackward0 fed a dual grad, static: its formula raises on fake tensors and the
    # node runs as the real node (trace/trace.py Note [Built-in formulas fake tensors
    # reject]).  FakeTensor logs that failure with its traceback; a handler that keeps the
    # records (as pytest's log capture does) keeps the failed frames alive, and before the fix,
    # when they died after the trace, torch's guards in them switched autograd off for the
    # thread (PyTorch's test_convolution.py: 209 tests failed after one such test).
    x = torch.randn(2, 3, 7, requires_grad=True)
    w = torch.randn(4, 3, 3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    inputs = [x, w, b, [1], [0], [1], False, [0], 1]

    def grads_of_dual():
        with fwAD.dual_level():
            dual = [fwAD.make_dual(t, torch.rand_like(t)) if isinstance(t, torch.Tensor) else t
                    for t in inputs]
            out = torch.ops.aten.convolution(*dual)
            go = fwAD.make_dual(torch.rand_like(out), torch.rand_like(out))
            return [_primal_and_tangent(g) for g in torch.autograd.grad(out, [x, w, b], go)]

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    log = logging.getLogger("torch._subclasses.fake_tensor")
    # compiled_bw drops this log record (torchapi/dynamo.py Note [Meta failures are our
    # fallbacks]); a logger set up to keep it anyway (its filter off) is what this test needs
    monkeypatch.setattr(torch_dynamo._OurMetaFailures, "filter", lambda self, record: True)
    handler = Keep(level=logging.DEBUG)
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False     # only this handler holds them
    try:
        torch.manual_seed(0)
        eager = grads_of_dual()
        compiled_bw.reset()
        with compiled_bw.enable(backend=selected_backend(), strict=not OPAQUE_DUAL_FAILS):
            torch.manual_seed(0)
            ours = grads_of_dual()
    finally:
        log.removeHandler(handler)
        log.propagate = propagate
    assert_same(eager, ours)
    if OPAQUE_DUAL_FAILS:
        _expect_opaque_dual_fallbacks(compiled_bw.stats(), 1)
    else:
        assert any("formula raised on fake tensors" in n for n in compiled_bw.stats().notes)
    assert records, "the trace no longer fails there: this test reaches nothing"
    # When the kept frames die is up to the program: here, pytest's own machinery keeps the
    # thread's state from showing it, so the same steps run in a fresh interpreter.
    code = _LEAK_PROGRAM.format(backend=selected_backend(), strict=not OPAQUE_DUAL_FAILS)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "records 1" in out.stdout and "autograd after: True" in out.stdout, out.stdout


_LEAK_PROGRAM = '''
import gc, logging
import torch, torch.autograd.forward_ad as fwAD
import compiled_bw
from compiled_bw.torchapi import dynamo
dynamo._OurMetaFailures.filter = lambda self, record: True   # keep the record (see above)
records = []
class Keep(logging.Handler):
    def emit(self, r):
        records.append(r)
log = logging.getLogger("torch._subclasses.fake_tensor")
log.addHandler(Keep())
log.propagate = False
x, w, b = (torch.randn(*s, requires_grad=True) for s in ((2, 3, 7), (4, 3, 3), (4,)))
inputs = [x, w, b, [1], [0], [1], False, [0], 1]
with compiled_bw.enable(backend="{backend}", strict={strict}):
    with fwAD.dual_level():
        dual = [fwAD.make_dual(t, torch.rand_like(t)) if isinstance(t, torch.Tensor) else t
                for t in inputs]
        out = torch.ops.aten.convolution(*dual)
        go = fwAD.make_dual(torch.rand_like(out), torch.rand_like(out))
        torch.autograd.grad(out, [x, w, b], go)
print("records", len(records))
records.clear()
gc.collect()
print("autograd after:", (torch.randn(2, requires_grad=True) * 2).grad_fn is not None)
'''
