"""Inductor never writes into a tensor that user code in an opaque call received or returned
(backends/inductor.py Note [Inductor: opaque buffers]; found on real models: a module full backward hook returning grad_input gave
wrong parameter grads on GPT-2, Llama, ResNet-18 and ViT).

Each kind of opaque call (custom Function, tensor hook, node pre-/post-hook, module full
backward hook and pre-hook) and each leaf's hooks at its delivery point (a parameter's tensor
hook, a pre-hook on its AccumulateGrad node) keep what they receive and return, while the graph runs on with
kernels of the same size (so Inductor could reuse those buffers).  At the end of each step
the kept tensors must still hold their values, and every grad must equal eager's.
"""
from __future__ import annotations

import pytest
import torch
from differential import differential, grads
from functions import WritesItsGrad
from torch import nn

import compiled_bw

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

pytest.importorskip("torch._inductor.compile_fx")

D = 8


class _Keep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kept):
        ctx.kept = kept
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        r = g * 2.0
        ctx.kept += [g, r]
        return r, None


def _keep_tensor_hook(kept):
    def hook(g):
        r = g * 1.5
        kept.extend([g, r])
        return r
    return hook


def _keep_pre(kept):
    def hook(gs):
        r = (gs[0] * 0.5,)
        kept.extend([gs[0], r[0]])
        return r
    return hook


def _keep_post(kept):
    def hook(gin, gout):
        r = tuple(g * 3.0 for g in gin)
        kept.extend([*gin, *gout, *r])
        return r
    return hook


KINDS = ("custom", "tensor_hook", "node_prehook", "node_posthook", "module_hook", "leaf_hook",
         "all")


def _build(kind):
    def build():
        blk = nn.Sequential(nn.Linear(D, D), nn.ReLU())
        m = nn.Sequential(nn.Linear(D, D), nn.Tanh(), blk, nn.Linear(D, D), nn.Tanh(),
                          nn.Linear(D, D), nn.Linear(D, 1))
        kept: list = []
        if kind in ("module_hook", "all"):
            # the hook: returns a new grad_input made from grad_output
            blk.register_full_backward_hook(
                lambda mod, gin, gout: kept.extend([*gin, *gout]) or (gout[0] * 1.0,))
            blk.register_full_backward_pre_hook(lambda mod, gout: kept.extend(gout))
        if kind in ("leaf_hook", "all"):
            # a leaf's hooks get the grad at its delivery point, before AccumulateGrad
            for p in m.parameters():
                p.register_hook(kept.append)
            acc = m[5].bias.view_as(m[5].bias).grad_fn.next_functions[0][0]
            acc.register_prehook(kept.extend)
            kept.append(acc)     # the node (and its hook) lives as long as the step's state
            return m, torch.randn(4, D), kept
        return m, torch.randn(4, D), kept
    return build


def _step(kind):
    def step(st):
        m, x, kept = st
        m.zero_grad(set_to_none=True)
        h = m[1](m[0](x))
        if kind in ("tensor_hook", "all"):
            h.register_hook(_keep_tensor_hook(kept))
        h = m[2](h)
        if kind in ("custom", "all"):
            h = _Keep.apply(h, kept)
        h = m[4](m[3](h))
        if kind in ("node_prehook", "all"):
            h.grad_fn.register_prehook(_keep_pre(kept))
        if kind in ("node_posthook", "all"):
            h.grad_fn.register_hook(_keep_post(kept))
        m[6](m[5](h)).pow(2).sum().backward()
        compiled_bw.wait_for_compiles()
        out = [[None if t is None else t.clone() for t in kept
                if not isinstance(t, torch.autograd.graph.Node)], grads(m)]
        del kept[int(isinstance(kept[0], torch.autograd.graph.Node)) if kept else 0:]
        return out
    return step


@pytest.mark.parametrize("cpp_wrapper", ["1", "0"])
@pytest.mark.parametrize("kind", KINDS)
def test_user_code_keeps_what_it_saw(kind, cpp_wrapper, monkeypatch):
    monkeypatch.setenv("COMPILED_BW_CPP_WRAPPER", cpp_wrapper)
    differential(_build(kind), _step(kind), steps=3, backend="inductor")


def test_user_code_keeps_what_it_saw_background_compile(monkeypatch):
    """Background compile (the users' default): step 1 runs the eager backend, later steps the
    kernels compiled by the worker process."""
    monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "1")
    st = differential(_build("all"), _step("all"), steps=3, backend="inductor")
    assert st.background_compiles == 1, st
    assert hasattr(compiled_bw.last_compiled(), "source_code"), "Inductor's kernels did not run"


class _Twice(torch.autograd.Function):
    compiled_bw_traceable = False     # opaque calls are the point here
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def test_opaque_buffers_are_freed_after_their_last_use():
    """Note [Inductor: opaque buffers]: never reused, but freed (a `del` in the wrapper) after
    their last use, as eager's reference counting frees them -- Inductor alone keeps every one
    alive to the end of the graph (a chain of opaque calls then peaked at 1.7x eager)."""
    import re
    x = torch.randn(64, 64, requires_grad=True)
    compiled_bw.reset()
    with compiled_bw.enable(backend="inductor", background_compile=False, strict=True):
        y = x
        for _ in range(4):
            y = _Twice.apply(torch.tanh(y))
        y.sum().backward()
    src = compiled_bw.last_compiled().source_code
    call = src[src.index("def call("):]
    outs = re.findall(r"^\s*(buf\d+) = (?:buf\d+\[\d+\]|compiled_bw_opaque_direct)", call, re.M)
    returned = set(re.findall(r"buf\d+", call[call.rindex("return"):]))
    kept = [b for b in outs if b not in returned and not re.search(rf"^\s*del .*\b{b}\b", call, re.M)]
    assert outs and not kept, f"opaque buffers never freed: {kept}\n{call}"


def test_wrapper_calls_opaque_and_deliver_directly():
    """Note [Inductor: direct calls]: Inductor's Python wrapper calls our functions, not the
    dispatcher (~3-8 us a call), and emits nothing for a barrier; grads as eager's."""
    def build():
        return (torch.randn(64, 64, requires_grad=True),)

    def step(st):
        (x,) = st
        x.grad = None
        h = x.register_hook(lambda g: g * 1.0)      # a leaf hook: delivery points
        y = x
        for _ in range(3):
            y = _Twice.apply(torch.tanh(y))
        y.sum().backward()
        h.remove()
        return [x.grad]

    differential(build, step, steps=2, backend="inductor")
    src = compiled_bw.last_compiled().source_code
    call = src[src.index("def call("):]
    assert "compiled_bw_opaque_direct(" in call and "compiled_bw_deliver_direct(" in call, call
    assert not any(f"torch.ops.compiled_bw.{op}.default(" in call
                   for op in ("opaque", "deliver", "barrier")), call


class _Strides(torch.autograd.Function):
    """Records the strides of the grad its backward is given."""

    @staticmethod
    def forward(ctx, x, log):
        ctx.log = log
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        ctx.log.append(("custom", tuple(g.shape), g.stride()))
        return g * 3.0, None


def test_opaque_calls_get_eagers_strides_size_one_dims_included():
    # Note [Inductor: opaque input strides]: Inductor laid out the (3, 1, 5) grad of a keepdim
    # sum with strides (5, 15, 1), and a hook saw them where eager's are (5, 5, 1)
    def build():
        return torch.randn(3, 4, 5, requires_grad=True), torch.randn(2, 6, requires_grad=True)

    def step(state):
        x, w = state
        x.grad = w.grad = None
        log = []

        def seen(tag):
            return lambda g: log.append((tag, tuple(g.shape), g.stride()))
        y = x.sum(1, keepdim=True)
        y.register_hook(seen("keepdim"))
        u = w.unsqueeze(1) * 2.0                # (2, 1, 6)
        u.register_hook(seen("unsqueeze"))
        v = _Strides.apply(x.amax(2, keepdim=True).transpose(0, 2), log)   # (1, 4, 3)
        t = w.t()[:, :1] * 1.5                  # (6, 1)
        t.register_hook(seen("column"))
        loss = (y * torch.randn(3, 1, 5)).sum() + (u * torch.randn(2, 1, 6)).sum() \
            + (v.exp() * torch.randn(1, 4, 3)).sum() + (t * torch.randn(6, 1)).sum()
        loss.backward()
        return [x.grad, w.grad, log]
    differential(build, step, steps=3, backend="inductor")


def test_a_traced_write_into_a_grad_a_hook_kept_stays_on_the_eager_backend():
    """The hook keeps its grad, the traced backward after it doubles that very tensor in place:
    eager's kept tensor is doubled.  Inductor's functionalized code would leave it unchanged,
    so this graph stays on the eager backend, the reason recorded (backends/inductor.py Note
    [Inductor: writes into tensors user code holds]).  Found by a random-program differential."""
    def step(ps):
        (x,) = ps
        x.grad = None
        kept = []
        y = WritesItsGrad.apply(x)
        y.register_hook(kept.append)
        ((y * 2) * torch.arange(3.0)).sum().backward()
        return [*grads(ps), kept[0]]
    st = differential(lambda: [torch.ones(3, requires_grad=True)], step, backend="inductor",
                      fallbacks=1, strict=False)
    assert "writes in place into a tensor user code holds" in st.fallback_reasons[0], st


class _Spectral(torch.nn.Module):
    """A Fourier neural operator's spectral layer: the low modes of rfft2, mixed by complex
    weights, written into a zero spectrum by slice assignment (CopySlices: an opaque call),
    then irfft2."""

    def __init__(self, c: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        self.w = torch.nn.Parameter(torch.randn(c, c, modes, modes, dtype=torch.cfloat) / c)

    def forward(self, x):
        m = self.modes
        xf = torch.fft.rfft2(x)
        out = torch.zeros(*x.shape[:2], x.shape[2], x.shape[3] // 2 + 1, dtype=torch.cfloat)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], self.w)
        return torch.fft.irfft2(out, s=x.shape[2:])


def test_a_formulas_own_write_before_an_opaque_call_is_compiled():
    """irfft2's backward doubles a slice of its own fresh result in place (`mul_`), then that
    result is the grad of an opaque CopySlices: user code gets it after the write, as in eager,
    so Inductor compiles the graph (Note [Inductor: writes into tensors user code holds]); the
    check once refused every such graph."""
    def build():
        return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 1), _Spectral(4, 3), torch.nn.GELU(),
                                   _Spectral(4, 3), torch.nn.Conv2d(4, 1, 1))

    def step(m):
        m.zero_grad(set_to_none=True)
        (m(torch.randn(2, 2, 8, 8)) - 1).pow(2).mean().backward()
        return grads(m)
    differential(build, step, steps=3, backend="inductor")
