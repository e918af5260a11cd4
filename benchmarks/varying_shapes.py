"""`python -m benchmarks.varying_shapes`: a small transformer over steps of random batch size
and sequence length, under eager autograd, torch compiled autograd and compiled_bw.

Consumes --steps, --modes, --max-batch, --max-seq, --seed; produces one line per mode on
stdout: total time of the run (compiles included), median step time of the last third of the
steps, captures / dynamic captures / Inductor compiles (compiled_bw), and the max abs grad
difference vs eager on the same sequence of shapes.  Every mode sees the same sequence.
Inductor compiles of dynamic graphs run in the foreground (runtime/dynamic.py).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import torch

import compiled_bw


def _model(seed: int):
    torch.manual_seed(seed)
    return torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True), 2)


def _shapes(steps: int, max_batch: int, max_seq: int, seed: int) -> list:
    rng = random.Random(seed)
    return [(rng.randint(1, max_batch), rng.randint(16, max_seq)) for _ in range(steps)]


def _modes() -> dict:
    def torch_ca():
        import torch._dynamo.compiled_autograd as ca
        return ca._enable(torch.compile(backend="inductor", dynamic=None))
    import contextlib
    return {
        "eager": contextlib.nullcontext,
        "torch-ca": torch_ca,
        "cbw-eager": lambda: compiled_bw.enable(backend="eager", cache_size_limit=64),
        "cbw-inductor": lambda: compiled_bw.enable(backend="inductor", cache_size_limit=64,
                                                   background_compile=False),
        "cbw-inductor-static": lambda: compiled_bw.enable(
            backend="inductor", cache_size_limit=64, background_compile=False, dynamic=False),
    }


def run_mode(name: str, ctx_factory, shapes: list, seed: int) -> tuple:
    model = _model(seed)
    compiled_bw.reset()
    torch.manual_seed(seed + 1)
    inputs = [torch.randn(b, t, 64) for b, t in shapes]
    times, grads = [], []
    t_all = time.perf_counter()
    for x in inputs:
        model.zero_grad(set_to_none=True)
        loss = model(x).pow(2).mean()
        with ctx_factory():
            t0 = time.perf_counter()
            loss.backward()
            times.append(time.perf_counter() - t0)
        grads.append([p.grad.clone() for p in model.parameters()])
    total = time.perf_counter() - t_all
    st = compiled_bw.stats()
    return total, times, grads, st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.varying_shapes",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--modes", default="eager,torch-ca,cbw-eager,cbw-inductor")
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--max-seq", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    shapes = _shapes(a.steps, a.max_batch, a.max_seq, a.seed)
    modes = _modes()
    names = a.modes.split(",")
    if "eager" not in names:
        names.insert(0, "eager")
    ref = None
    print(f"{a.steps} steps, shapes (batch, seq): {shapes[:6]}{' ...' if a.steps > 6 else ''}")
    print("mode | total s (compiles incl.) | median step ms (last third) | captures | dynamic "
          "| Inductor compiles | fallbacks | max grad diff")
    for name in names:
        print(f"[{name}] ...", file=sys.stderr, flush=True)
        try:
            total, times, grads, st = run_mode(name, modes[name], shapes, a.seed)
        except Exception as e:  # noqa: BLE001 -- a mode that fails is reported, the rest run
            print(f"{name} | n/a ({type(e).__name__}: {str(e)[:100]})")
            continue
        if ref is None:
            ref = grads
        diff = max((g - r).abs().max().item() for gs, rs in zip(grads, ref, strict=True)
                   for g, r in zip(gs, rs, strict=True))
        steady = statistics.median(times[-max(1, len(times) // 3):]) * 1e3
        cbw = name.startswith("cbw")
        compiles = st.captures - st.fallbacks if name.startswith("cbw-inductor") else "-"
        print(f"{name} | {total:.2f} | {steady:.2f} | {st.captures if cbw else '-'} | "
              f"{st.dynamic_captures if cbw else '-'} | {compiles} | "
              f"{st.fallbacks if cbw else '-'} | {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
