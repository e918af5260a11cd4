"""Measure one model under several modes, side by side in one process.

Consumes a model factory and mode names; produces per mode: median steady-state backward time
(modes interleaved A B C A B C ... so machine drift cancels) and its ratio to eager, the first
backward (capture + compile; on a GPU, timed from an idle device to the last kernel; with compiled_bw's background compile, capture + a run on the
eager backend) and when the compiled code is in use ("ready": the first backward plus the wait
for background compiles), peak live tensor bytes during one backward (memory.py's method),
compiled_bw's per-step overhead on a cache hit (walk + signature + lookup), captures / cache
hits / fallbacks, and the max abs grad difference vs eager.  A mode that raises is recorded as
n/a (reason); the harness goes on.
Compiles are cold: each mode's first backward runs with a fresh, empty Inductor cache (in
memory and on disk), so no mode reuses kernels another mode or an earlier run compiled.
"""
from __future__ import annotations

import statistics
import time

import torch

import compiled_bw
from compiled_bw.graph.saved import gradient_edge
from compiled_bw.walk import fastwalk

from .memory import peak_backward_bytes, peak_backward_bytes_cuda

TOL = 1e-3   # max abs grad difference (float32; x30 for 16-bit grads) above which a cell FAILs


def _diff(a, b) -> float:
    """Max abs difference, in float32 units: 16-bit grads are compared at 1/30 of it."""
    d = (a.float() - b.float()).abs().max().item()
    return d / 30 if a.dtype in (torch.bfloat16, torch.float16) else d


def _loss(model, x):
    return model(x).float().pow(2).mean()


def _sync(x) -> None:
    if x.is_cuda:
        torch.cuda.synchronize(x.device)


def _backward(model, x, ctx_factory):
    """One backward, timed (on a GPU: from an idle device to the backward's last kernel)."""
    model.zero_grad(set_to_none=True)
    loss = _loss(model, x)
    with ctx_factory():
        _sync(x)
        t0 = time.perf_counter()
        loss.backward()
        _sync(x)
        dt = time.perf_counter() - t0
    return dt, [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def _walk_overhead_us(model, x, reps=5) -> float:
    """Median cost of the cache-hit path's walk + signature + dict lookup, in µs."""
    times = []
    cache: dict = {}
    for _ in range(reps):
        loss = _loss(model, x)
        t0 = time.perf_counter()
        w = fastwalk.walk([gradient_edge(loss)])
        cache.get((w.signature, tuple(w.root_edges)))
        times.append(time.perf_counter() - t0)
        del loss, w
    return statistics.median(times) * 1e6


def _fresh_cache(tmp_root: str):
    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:     # a torch without Inductor: nothing to keep cold
        import contextlib
        return contextlib.nullcontext()
    return fresh_cache(dir=tmp_root, delete=False)


def bench_model(factory, modes: dict, steps: int, tmp_root: str) -> dict:
    torch.manual_seed(0)
    model, x = factory()
    _, ref = _backward(model, x, modes["eager"])
    res = {m: {"times": []} for m in modes}
    stats = {}
    for name, ctx in modes.items():
        compiled_bw.reset()
        try:
            with _fresh_cache(tmp_root):
                first, g = _backward(model, x, ctx)
                t0 = time.perf_counter()
                compiled_bw.wait_for_compiles()
                waited = time.perf_counter() - t0
            res[name]["first_ms"] = first * 1e3
            res[name]["ready_ms"] = (first + waited) * 1e3
            res[name]["maxdiff"] = max((_diff(a, b) for a, b in zip(ref, g, strict=True)),
                                       default=0.0)
            for _ in range(2):      # warm up: later steps must be cache hits
                _, g = _backward(model, x, ctx)
            res[name]["maxdiff"] = max([res[name]["maxdiff"]] + [
                _diff(a, b) for a, b in zip(ref, g, strict=True)])
            peak = peak_backward_bytes_cuda if x.is_cuda else peak_backward_bytes
            res[name]["peak_mb"] = peak(model, x, ctx) / 2**20
        except Exception as e:  # noqa: BLE001 -- one failing cell never stops the harness
            res[name]["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        st = compiled_bw.stats()
        stats[name] = (st.captures, st.fallbacks, sorted(set(st.fallback_reasons)),
                       sorted(set(st.notes)), st.cudagraph_replays)
    live = [m for m in modes if "error" not in res[m]]
    for _ in range(steps):
        for m in live:
            dt, _g = _backward(model, x, modes[m])
            res[m]["times"].append(dt)
    base = statistics.median(res["eager"]["times"])
    out = {"nodes_overhead_us": _walk_overhead_us(model, x)}
    for m in modes:
        r = res[m]
        if "error" in r:
            out[m] = {"error": r["error"]}
            continue
        med = statistics.median(r["times"])
        captures, fallbacks, reasons, notes, replays = stats[m]
        out[m] = {"median_ms": med * 1e3, "ratio": med / base, "first_ms": r["first_ms"],
                  "ready_ms": r["ready_ms"], "peak_mb": r["peak_mb"],
                  "maxdiff": r["maxdiff"], "fail": r["maxdiff"] > TOL,
                  "captures": captures, "fallbacks": fallbacks, "fallback_reasons": reasons,
                  "notes": notes, "cudagraph_replays": replays}
    return out
