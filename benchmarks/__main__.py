"""`python -m benchmarks`: eager autograd vs compiled_bw, side by side in one process.

Consumes --models, --modes, --steps, --quick, --out; produces a table on stdout and
<out>/latest.json.  Steady-state backward time is the median over interleaved steps (mode A,
B, A, B, ... so machine drift cancels), reported as a ratio to eager autograd; also the first
backward (capture + compile), captures, fallbacks and the max abs grad difference vs eager (a
wrong grad is shown as FAIL, never hidden).  A mode that fails on a model shows n/a (reason).
(The full harness, with torch compiled autograd and charts, is issue 6.)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import torch

import compiled_bw

from .models import MODELS

MODES = {
    "eager": lambda: contextlib.nullcontext(),
    "cbw-eager": lambda: compiled_bw.enable(backend="eager"),
    "cbw-inductor": lambda: compiled_bw.enable(backend="inductor"),
}


def _backward_time(model, x, ctx_factory):
    model.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    with ctx_factory():
        t0 = time.perf_counter()
        loss.backward()
        dt = time.perf_counter() - t0
    return dt, [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def bench_model(name, modes, steps):
    torch.manual_seed(0)
    model, x = MODELS[name]()
    res = {m: {"times": [], "first": None, "error": None} for m in modes}
    ref = None
    _, ref = _backward_time(model, x, MODES["eager"])
    for m in modes:
        compiled_bw.reset()
        try:
            res[m]["first"], g = _backward_time(model, x, MODES[m])
            res[m]["maxdiff"] = max((a - b).abs().max().item() for a, b in zip(ref, g))
        except Exception as e:  # noqa: BLE001 -- one failing cell never stops the harness
            res[m]["error"] = f"{type(e).__name__}: {e}"[:120]
    compiled_bw.reset()
    for _ in range(steps):
        for m in modes:
            if res[m]["error"]:
                continue
            dt, _ = _backward_time(model, x, MODES[m])
            res[m]["times"].append(dt)
    st = compiled_bw.stats()
    out = {}
    base = statistics.median(res["eager"]["times"]) if "eager" in modes else None
    for m in modes:
        r = res[m]
        if r["error"]:
            out[m] = {"error": r["error"]}
            continue
        med = statistics.median(r["times"])
        out[m] = {"median_ms": med * 1e3, "ratio": med / base if base else None,
                  "first_ms": r["first"] * 1e3, "maxdiff": r.get("maxdiff", 0.0)}
    out["_stats"] = {"captures": st.captures, "cache_hits": st.cache_hits, "fallbacks": st.fallbacks,
                     "fallback_reasons": sorted(set(st.fallback_reasons))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="few steps, small run (CI smoke test)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    steps = 5 if a.quick else a.steps
    modes = a.modes.split(",")
    if "eager" not in modes:
        modes.insert(0, "eager")
    results = {}
    print(f"{'model':10} {'mode':10} {'ratio':>7} {'median ms':>10} {'first ms':>9} {'max|diff|':>10}")
    for name in a.models.split(","):
        print(f"[{name}] running {len(modes)} modes x {steps} steps ...", file=sys.stderr, flush=True)
        r = results[name] = bench_model(name, modes, steps)
        for m in modes:
            c = r[m]
            if "error" in c:
                print(f"{name:10} {m:10} n/a ({c['error']})")
                continue
            ok = "FAIL" if c["maxdiff"] > 1e-3 else f"{c['maxdiff']:.1e}"
            print(f"{name:10} {m:10} {c['ratio']:7.2f} {c['median_ms']:10.2f} {c['first_ms']:9.1f} {ok:>10}")
        if r["_stats"]["fallbacks"]:
            print(f"{'':10} fallbacks: {r['_stats']['fallback_reasons']}")
    os.makedirs(a.out, exist_ok=True)
    meta = {"torch": torch.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(), "steps": steps, "date": time.strftime("%Y-%m-%d")}
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
