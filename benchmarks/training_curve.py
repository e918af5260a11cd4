"""200 training steps of a small MLP with compressed saved activations, under compiled_bw.

Consumes a fixed synthetic task (seed 0: inputs x ~ N(0, 1) of width 64, 2048 samples; target
a fixed random teacher MLP's output plus N(0, 0.1^2) noise) and a student MLP (64 -> 256 GELU ->
256 Tanh -> 8), trained with Adam (lr 3e-3, batch 256, the same batch order in every run)
for 200 steps; each step's forward runs inside compiled_bw.compress_activations(fmt,
min_bytes=0, granularity="row") -- every floating saved activation compressed -- and its
backward under compiled_bw.enable(backend, strict=True).  Produces a markdown table: the
training loss (MSE, mean of the step's batch) at steps 1, 50, 100, 150, 200 and the mean of the
last 10 steps, per format (none, fp8 e4m3, int8, bf16), and the last-10 mean's relative
difference to uncompressed (goal: within 2%).
Run: python -m benchmarks.training_curve [--backend eager|inductor] [--steps 200]
"""
from __future__ import annotations

import argparse
import contextlib
import sys

import torch
from torch import nn

import compiled_bw

FORMATS = {"none": None, "fp8": torch.float8_e4m3fn, "int8": torch.int8, "bf16": torch.bfloat16}
REPORT_AT = (1, 50, 100, 150, 200)


def _task(n: int = 2048):
    g = torch.Generator().manual_seed(0)
    teacher = [torch.randn(64, 64, generator=g) / 8, torch.randn(64, 8, generator=g) / 8]
    x = torch.randn(n, 64, generator=g)
    y = torch.tanh(x @ teacher[0]) @ teacher[1] * 4 + 0.1 * torch.randn(n, 8, generator=g)
    return x, y


def train(dtype, steps: int = 200, backend: str = "eager", batch: int = 256) -> list[float]:
    """The per-step training losses of one run (same init, data and batch order for every dtype)."""
    x, y = _task()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.Tanh(),
                          nn.Linear(256, 8))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    compiled_bw.reset()
    for step in range(steps):
        i = (step * batch) % x.shape[0]
        xb, yb = x[i:i + batch], y[i:i + batch]
        opt.zero_grad(set_to_none=True)
        ctx = (contextlib.nullcontext() if dtype is None
               else compiled_bw.compress_activations(dtype, min_bytes=0, granularity="row"))
        with ctx:
            loss = (model(xb) - yb).pow(2).mean()
        with compiled_bw.enable(backend=backend, strict=True):
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def table(curves: dict) -> str:
    ref = sum(curves["none"][-10:]) / 10
    head = "| format | " + " | ".join(f"step {s}" for s in REPORT_AT) + " | last 10 mean | vs none |"
    rows = [head, "|" + "---|" * (len(REPORT_AT) + 3)]
    for fmt, losses in curves.items():
        last = sum(losses[-10:]) / 10
        cells = " | ".join(f"{losses[s - 1]:.4f}" if s <= len(losses) else "" for s in REPORT_AT)
        rows.append(f"| {fmt} | {cells} | {last:.4f} | {100 * (last / ref - 1):+.2f}% |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.training_curve", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="eager", choices=("eager", "inductor"))
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    curves = {fmt: train(dt, a.steps, a.backend) for fmt, dt in FORMATS.items()}
    print(f"compiled_bw backend={a.backend}, {a.steps} steps, torch {torch.__version__}\n")
    print(table(curves))
    return 0


if __name__ == "__main__":
    sys.exit(main())
