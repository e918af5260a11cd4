"""compiled_bw on CUDA (skipped without a GPU; tools/gpu_check.sh runs them on a GPU machine).

Differential, like every test here: the same program under eager autograd and compiled_bw, on
the eager backend, on Inductor (Triton kernels; foreground and background compile) and with
CUDA graphs, comparing every grad.  Also: mixed CPU/CUDA graphs, streams (runtime/streams.py
Note [Streams]), the background worker compiling for the GPU, and peak GPU memory.
"""
import os

import pytest
import torch
from differential import differential, grads, grads_raw
from torch import nn

import compiled_bw

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEV = "cuda"


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class OpaqueSquare(Square):
    compiled_bw_traceable = False   # kept an opaque call: user code inside the graph


def _opaque_step(m):
    m.zero_grad(set_to_none=True)
    OpaqueSquare.apply(m(torch.randn(32, 64, device=DEV))).sum().backward()
    return grads(m)


def _mlp():
    return nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.LayerNorm(64), nn.Linear(64, 8)).to(DEV)


def _mlp_step(m):
    m.zero_grad(set_to_none=True)
    m(torch.randn(32, 64, device=DEV)).pow(2).sum().backward()
    return grads(m)


def _mixed_step(m):       # the loss is computed on the CPU: a graph on two devices
    m.zero_grad(set_to_none=True)
    m(torch.randn(32, 64, device=DEV)).cpu().pow(2).sum().backward()
    return grads(m)


def _custom_step(m):      # a custom Function: an opaque call between Triton kernels
    m.zero_grad(set_to_none=True)
    Square.apply(m(torch.randn(32, 64, device=DEV))).sum().backward()
    return grads(m)


def _hook_build():
    m = _mlp()
    m[1].register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 0.5,))
    return m


def _bf16_step(m):
    # compared at bf16's tolerance: Inductor computes a fused bf16 chain in float32 and rounds
    # once, eager rounds after every op (the float32 grads differ by ~2e-4)
    m.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(torch.randn(32, 64, device=DEV)).float().pow(2).mean()
    loss.backward()
    return [g.to(torch.bfloat16) for g in grads(m)]


def _grad_step(m):
    x = torch.randn(32, 64, device=DEV, requires_grad=True)
    return list(torch.autograd.grad(m(x).sum(), [x, m[0].weight]))


CASES = {
    "mlp": (_mlp, _mlp_step),
    "mixed_cpu_cuda": (_mlp, _mixed_step),
    "custom_function": (_mlp, _custom_step),
    "module_hook": (_hook_build, _mlp_step),
    "bf16_autocast": (_mlp, _bf16_step),
    "grad": (_mlp, _grad_step),
}
MODES = {
    "eager": {"backend": "eager"},
    "inductor": {"backend": "inductor", "options": {"background_compile": False}},
    "inductor-cudagraphs": {"backend": "inductor",
                            "options": {"background_compile": False, "cudagraphs": True}},
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(CASES))
def test_differential_cuda(case, mode):
    build, step = CASES[case]
    st = differential(build, step, steps=4, **MODES[mode])
    assert not [n for n in st.notes if "failed" in n], st.notes


def test_cudagraphs_replay():
    # an eligible graph (one CUDA device, no user code inside) is recorded once and replayed;
    # a grad is never memory the next replay overwrites
    m = _mlp()
    kept = []
    st = differential(lambda: m, lambda m: kept.append(_mlp_step(m)) or kept[-1], steps=5,
                      backend="inductor",
                      options={"background_compile": False, "cudagraphs": True})
    assert st.cudagraph_replays == 4, (st.cudagraph_replays, st.notes)
    assert not [n for n in st.notes if "cudagraphs" in n], st.notes


def test_cudagraphs_grad_that_is_an_input_view():
    # the leaf's grad is a view of the root grad (a graph input): it must not be the static
    # buffer the next replay copies into (the .grad objects of earlier steps are compared last)
    def build():
        return torch.randn(4, 4, device=DEV, requires_grad=True)

    def step(w):
        w.grad = None
        w.view(16).backward(torch.randn(16, device=DEV))
        return grads_raw([w])
    st = differential(build, step, steps=4, backend="inductor",
                      options={"background_compile": False, "cudagraphs": True})
    assert not [n for n in st.notes if "recording" in n], st.notes


def test_cudagraphs_say_why_not():
    # Square's backward is traced (safe without opt-in): only an opaque call keeps cudagraphs off
    st = differential(_mlp, _opaque_step, backend="inductor",
                      options={"background_compile": False, "cudagraphs": True})
    assert st.cudagraph_replays == 0
    assert any("cudagraphs: not used" in n and "user code" in n for n in st.notes), st.notes


def test_background_compile_on_cuda():
    # the worker process compiles Triton kernels for this GPU; this process loads them
    m = _mlp()
    compiled_bw.reset()
    ref = None
    for i in range(3):
        torch.manual_seed(i)
        m.zero_grad(set_to_none=True)
        loss = m(torch.randn(32, 64, device=DEV)).pow(2).sum()
        ref = torch.autograd.grad(loss, list(m.parameters()), retain_graph=True)
        with compiled_bw.enable(backend="inductor", background_compile=True, strict=True):
            loss.backward()
        compiled_bw.wait_for_compiles()
        for p, r in zip(m.parameters(), ref, strict=True):
            torch.testing.assert_close(p.grad, r)
    st = compiled_bw.stats()
    assert st.background_compiles == 1, st.notes
    assert not [n for n in st.notes if "failed" in n], st.notes


def _side_stream_step(m, backward_on_side: bool):
    m.zero_grad(set_to_none=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        loss = m(torch.randn(32, 64, device=DEV)).pow(2).sum()
        if backward_on_side:
            loss.backward()
    if not backward_on_side:
        torch.cuda.current_stream().wait_stream(s)
        loss.backward()
    torch.cuda.synchronize()
    return grads(m)


def test_forward_on_a_side_stream_backward_there():
    # the engine runs the backward on the forward's stream, which is the current one: compiled
    differential(_mlp, lambda m: _side_stream_step(m, True), backend="inductor",
                 options={"background_compile": False})


def test_forward_on_a_side_stream_backward_on_another():
    # the engine would run the nodes on the forward's stream and sync at the end: eager runs
    st = differential(_mlp, lambda m: _side_stream_step(m, False), backend="inductor",
                      fallbacks=3, captures=None)
    assert all("ran on stream" in r for r in st.fallback_reasons), st.fallback_reasons




@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_peak_memory_at_most_eager(backend):
    # with retain_graph=False the graph frees each saved activation after its last use
    # (8 x Linear + tanh: GEMMs separate the layers; benchmarks/memory.py mlp8, GPU-sized)
    torch.manual_seed(0)
    m = nn.Sequential(*[k for _ in range(8) for k in (nn.Linear(2048, 2048), nn.Tanh())]).to(DEV)
    x = torch.randn(4096, 2048, device=DEV)

    def peak(ctx):
        for _ in range(3):
            m.zero_grad(set_to_none=True)
            loss = m(x).pow(2).mean()
            with ctx():
                loss.backward()
        compiled_bw.wait_for_compiles()
        m.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        loss = m(x).pow(2).mean()
        with ctx():
            loss.backward()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    import contextlib
    eager = peak(contextlib.nullcontext)
    compiled_bw.reset()
    ours = peak(lambda: compiled_bw.enable(backend=backend, strict=True, background_compile=False))
    assert ours <= eager * 1.05, (ours / 2**20, eager / 2**20)


def test_inductor_made_triton_kernels():
    compiled_bw.reset()
    m = _mlp()
    _mlp_step(m)
    with compiled_bw.enable(backend="inductor", background_compile=False, strict=True):
        _mlp_step(m)
    src = compiled_bw.last_compiled().source_code
    assert "triton" in src and "@triton.jit" in src, src[:500]
    assert os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
