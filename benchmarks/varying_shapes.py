"""Varying shapes: a small transformer over steps of random batch size and sequence length,
under eager autograd, torch compiled autograd and compiled_bw; a row of `python -m benchmarks`
and `python -m benchmarks.varying_shapes` on its own.

Consumes the modes (benchmarks/modes.py) and a Config (steps, max batch, max sequence length);
produces per mode: total time of the run (zero_grad + forward + backward of every step,
compiles included), steady-state backward time (the steps after the first third in which no
mode captured or compiled, summed, and its ratio to eager's on the same steps), captures / dynamic captures / Inductor compiles, and
the max abs grad difference vs eager at every step; for cbw-inductor also its dynamic graph's
backward time against a static graph's on the same sizes.  The modes run the same sequence
of shapes interleaved step by step (eager, torch-ca, cbw-..., then the next step), so machine
drift cancels; all of them share one cold Inductor cache.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import random
import statistics
import sys
import tempfile
import time

import torch

import compiled_bw

D = 64


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int = 30
    max_batch: int = 64
    max_seq: int = 512
    seed: int = 0
    static_sizes: int = 2   # sizes on which cbw-inductor's dynamic graph is timed vs static
    layers: int = 2

    def describe(self) -> str:
        return (f"{self.steps} steps, batch 1-{self.max_batch}, sequence length "
                f"16-{self.max_seq} (seed {self.seed}), d={D}, {self.layers} layers")


FULL = Config()
# the smoke run (`python -m benchmarks --quick`): small shapes, one layer, no static compiles;
# seed 4: batch and length both change at the second step (one dynamic capture serves all)
QUICK = Config(steps=6, max_batch=8, max_seq=64, seed=4, static_sizes=0, layers=1)


def _model(cfg: Config):
    torch.manual_seed(cfg.seed)
    return torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(D, 4, 2 * D, dropout=0.0, batch_first=True),
        cfg.layers)


def shapes(cfg: Config) -> list:
    rng = random.Random(cfg.seed)
    return [(rng.randint(1, cfg.max_batch), rng.randint(16, cfg.max_seq))
            for _ in range(cfg.steps)]


def _step(model, x, ctx_factory) -> tuple:
    """(backward seconds, step seconds, grads) of one training step's gradient."""
    t0 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    loss = model(x).pow(2).mean()
    with ctx_factory():
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
    return t2 - t1, t2 - t0, [p.grad for p in model.parameters()]


_COUNTED = ("captures", "dynamic_captures", "dynamic_hits", "inductor_compiles", "fallbacks")


def _counts() -> dict:
    st = compiled_bw.stats()
    return {k: getattr(st, k) for k in _COUNTED} | {"reasons": len(st.fallback_reasons)}


def _ca_counts() -> dict:
    """torch compiled autograd's captures and Inductor compiles (Dynamo's counters)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    ind = counters["inductor"]
    return {"captures": counters["compiled_autograd"]["captures"],
            "inductor_compiles": ind["fxgraph_cache_miss"] + ind["fxgraph_cache_hit"]
            + ind["fxgraph_cache_bypass"]}


def _fresh_cache(tmp_root: str):
    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:
        import contextlib
        return contextlib.nullcontext()
    return fresh_cache(dir=tmp_root, delete=False)


def bench_varying(modes: dict, cfg: Config, tmp_root: str) -> dict:
    """The results dict of one model (benchmarks/report.py `varying_table` reads it)."""
    seq = shapes(cfg)
    compiled_bw.reset()
    base = _model(cfg)
    models = {m: copy.deepcopy(base) for m in modes}
    res = {m: {"bw": [], "step": [], "captured": [], "maxdiff": 0.0, "counts": {},
               "error": None} for m in modes}
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    with _fresh_cache(tmp_root):
        for k, (b, t) in enumerate(seq):
            print(f"{' ' if k else ''}{b}x{t}", end="", file=sys.stderr, flush=True)
            x = torch.randn(b, t, D, generator=gen)
            ref = None
            for m, ctx in modes.items():
                r = res[m]
                if r["error"]:
                    continue
                count = _ca_counts if m == "torch-ca" else (lambda: {}) if m == "eager" \
                    else _counts
                before = count()
                try:
                    bw, total, g = _step(models[m], x, ctx)
                except Exception as e:  # noqa: BLE001 -- one failing mode never stops the run
                    r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
                    continue
                after = count()
                for k, v in after.items():
                    r["counts"][k] = r["counts"].get(k, 0) + v - before[k]
                r["captured"].append(after.get("captures", 0) != before.get("captures", 0)
                                     or after.get("inductor_compiles", 0)
                                     != before.get("inductor_compiles", 0))
                r["bw"].append(bw)
                r["step"].append(total)
                if ref is None:
                    ref = [p.clone() for p in g]
                r["maxdiff"] = max([r["maxdiff"]] + [
                    (a - e).abs().max().item() for a, e in zip(g, ref, strict=True)])
        try:
            static = _dynamic_vs_static(models["cbw-inductor"], seq, cfg) \
                if "cbw-inductor" in modes and not res["cbw-inductor"]["error"] else None
        except Exception as e:  # noqa: BLE001 -- the run's own numbers stand without it
            static = f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:100]})"
    reasons = compiled_bw.stats().fallback_reasons
    return _summary(res, seq, cfg, static, reasons)


def _summary(res: dict, seq: list, cfg: Config, static, reasons) -> dict:
    # steady: the steps after the first third in which no mode captured or compiled (the same
    # steps for every mode)
    live = [r for r in res.values() if not r["error"]]
    k0 = len(seq) // 3
    steady_steps = [k for k in range(k0, len(seq))
                    if not any(k < len(r["captured"]) and r["captured"][k] for r in live)]
    eager = res["eager"]
    base_steady = sum(eager["bw"][k] for k in steady_steps)
    out = {"kind": "varying", "config": cfg.describe(), "shapes": seq,
           "steady_steps": steady_steps, "dynamic_vs_static": static,
           "fallback_reasons": sorted(set(reasons)),
           "per_step_ms": {m: [round(t * 1e3, 2) for t in r["bw"]] for m, r in res.items()}}
    for m, r in res.items():
        if r["error"]:
            out[m] = {"error": r["error"]}
            continue
        steady = sum(r["bw"][k] for k in steady_steps)
        c = r["counts"]
        out[m] = {"total_s": sum(r["step"]), "steady_ms": steady * 1e3,
                  "steady_ratio": steady / base_steady, "total_ratio":
                  sum(r["step"]) / sum(eager["step"]), "first_ms": r["bw"][0] * 1e3,
                  "maxdiff": r["maxdiff"], "fail": r["maxdiff"] > 1e-3,
                  "captures": c.get("captures"), "dynamic_captures": c.get("dynamic_captures"),
                  "inductor_compiles": c.get("inductor_compiles"),
                  "fallbacks": c.get("fallbacks", 0)}
    return out


def _dynamic_vs_static(model, seq: list, cfg: Config, reps: int = 7):
    """cbw-inductor's dynamic graph vs a static graph of the same sizes, in one process,
    interleaved: [(size, dynamic ms, static ms)] for the largest size of the run and a middle
    one (each static graph a foreground Inductor compile; a size the dynamic graph does not
    serve is left out).  The static graphs live in a cache of their own (a second setting of
    enable(), made while the dynamic one's cache is set aside): in the dynamic graph's cache,
    their static keys would be found first."""
    if not cfg.static_sizes:
        return None
    from compiled_bw import api  # (the benchmark's own access: two caches side by side)
    by_size = sorted(set(seq), key=lambda s: s[0] * s[1])
    picks = [by_size[-1], by_size[len(by_size) // 2]][:cfg.static_sizes]
    def dyn():
        return compiled_bw.enable(backend="inductor", background_compile=True)

    def stat():
        return compiled_bw.enable(backend="inductor", background_compile=False, dynamic=False,
                                  cache_size_limit=64)
    dyn()
    compiled_bw.wait_for_compiles()
    dyn_cache = api._G.caches.pop("inductor")
    stat()      # its setting's state is made now, with its own, new cache
    api._G.caches["inductor"] = dyn_cache
    out = []
    for b, t in picks:
        x = torch.randn(b, t, D)
        _step(model, x, stat)       # compiles it
        before = compiled_bw.stats().dynamic_hits
        _step(model, x, dyn)
        if compiled_bw.stats().dynamic_hits == before:   # no dynamic graph ran this size
            continue
        times: dict = {"dyn": [], "static": []}
        for _ in range(reps):
            times["dyn"].append(_step(model, x, dyn)[0])
            times["static"].append(_step(model, x, stat)[0])
        out.append(((b, t), statistics.median(times["dyn"]) * 1e3,
                    statistics.median(times["static"]) * 1e3))
    return out


def main(argv=None) -> int:
    from .modes import available_modes
    from .report import varying_table
    ap = argparse.ArgumentParser(prog="python -m benchmarks.varying_shapes",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=FULL.steps)
    ap.add_argument("--modes", default="eager,torch-ca,cbw-eager,cbw-inductor")
    ap.add_argument("--max-batch", type=int, default=FULL.max_batch)
    ap.add_argument("--max-seq", type=int, default=FULL.max_seq)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--static-sizes", type=int, default=FULL.static_sizes)
    ap.add_argument("--layers", type=int, default=FULL.layers)
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    cfg = Config(a.steps, a.max_batch, a.max_seq, a.seed, a.static_sizes, a.layers)
    available = available_modes()
    names = [m for m in a.modes.split(",") if m in available]
    if "eager" not in names:
        names.insert(0, "eager")
    with tempfile.TemporaryDirectory(prefix="compiled_bw_bench_") as tmp:
        r = bench_varying({m: available[m] for m in names}, cfg, tmp)
    for line in varying_table({"varying_shapes": r}, names):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
