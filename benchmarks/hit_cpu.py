"""Thread CPU time of cache-hit backwards: eager autograd vs compiled_bw, interleaved.

Consumes a model name of benchmarks/models.py (default custom_hooks), --steps, --backend;
produces the median thread CPU time of `loss.backward()` for eager and for compiled_bw (the
graph compiled in the foreground, then only cache hits), the steps alternating in one process
with one torch thread, and their ratio.  Thread CPU, not wall clock, so that other work on a
shared machine moves the ratio less; still compare ratios from one run, or base and change in
alternate processes.
Run: python -m benchmarks.hit_cpu [--model custom_hooks] [--steps 300] [--backend inductor]
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import compiled_bw

from . import models


def measure(name: str, steps: int, backend: str) -> tuple:
    """(eager median s, compiled_bw median s, compiled_bw.stats())."""
    torch.manual_seed(0)
    m, x = models.MODELS[name]()
    params = list(m.parameters())
    cfg = {"backend": backend, "background_compile": False}

    def loss():
        for p in params:
            p.grad = None
        return m(x).float().pow(2).mean()

    for _ in range(3):                  # capture, compile, first hits
        with compiled_bw.enable(**cfg):
            loss().backward()
    times: dict = {"eager": [], "cbw": []}
    for _ in range(steps):
        for mode in times:
            y = loss()
            t = time.thread_time()
            if mode == "cbw":
                with compiled_bw.enable(**cfg):
                    y.backward()
            else:
                y.backward()
            times[mode].append(time.thread_time() - t)
    return statistics.median(times["eager"]), statistics.median(times["cbw"]), compiled_bw.stats()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="custom_hooks", choices=sorted(models.MODELS))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--backend", default="inductor")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")     # module full backward hooks warn every step
    e, c, st = measure(args.model, args.steps, args.backend)
    print(f"{args.model}: eager {e * 1e6:.0f} us, compiled_bw ({args.backend}) {c * 1e6:.0f} us, "
          f"ratio {c / e:.3f}; captures {st.captures}, C++ hit path runs {st.native_runs}, "
          f"fallbacks {st.fallbacks}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
