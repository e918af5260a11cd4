"""The effect of compress_activations on grads: relative error per parameter vs uncompressed.

Consumes the activation-heavy benchmark models (pointwise, transformer, cnn: built by
benchmarks/models.py and benchmarks/memory.py, or the small ones below for the tests) and
the formats fp8 e4m3 / int8 (absmax per row) / bf16; produces, per model and format, the
largest and the median over parameters of ||g - g_ref|| / ||g_ref||, where g is the grad of
one backward under compiled_bw (eager backend, strict) with every floating saved activation
compressed (min_bytes 0: the worst case) and g_ref the grad of uncompressed eager autograd.
Skipped: parameters whose reference grad norm is below 1e-6 x the largest one's (a conv bias
in front of a training-mode BatchNorm: its true grad is 0, its computed one rounding noise).
Also: the largest relative difference to eager autograd with the same compression (what
compiled_bw itself adds: float reassociation only, ~1e-7).
Run: python -m benchmarks.grad_error [--models pointwise,transformer,cnn]  (a markdown table)
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys

import torch
from torch import nn

import compiled_bw

FORMATS = {"fp8": torch.float8_e4m3fn, "int8": torch.int8, "bf16": torch.bfloat16}
# The stated bounds (docs/guide.md "Compressed activations"), per parameter, every activation compressed;
# a CNN's int8 rows are short (a row is an image row: 16 values here) -- its own bound.
GRAD_BOUND = {torch.float8_e4m3fn: 4e-2, torch.int8: 1.5e-2, torch.bfloat16: 4e-3}
CNN_GRAD_BOUND = {**GRAD_BOUND, torch.int8: 3e-2}


def bound(model: str, dtype: torch.dtype) -> float:
    """The stated bound for a model kind (no bound for a CNN with training-mode BatchNorm)."""
    if model == "cnn_bn":
        return float("inf")
    return (CNN_GRAD_BOUND if model.startswith("cnn") else GRAD_BOUND)[dtype]


def small_pointwise():
    from .models import PointwiseBlock
    return nn.Sequential(*[PointwiseBlock(32) for _ in range(2)]), torch.randn(256, 32)


def small_transformer():
    from .models import PreNormLayer
    return nn.Sequential(PreNormLayer(64), PreNormLayer(64)), torch.randn(2, 32, 64)


def small_cnn(batchnorm: bool = False):
    """benchmarks/models.cnn at 8/16 channels and 16x16 images; without its BatchNorms unless
    asked (see docs/guide.md: training-mode BatchNorm amplifies the saved input's error)."""
    bn = nn.BatchNorm2d if batchnorm else (lambda c: nn.Identity())
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), bn(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 16, 3, padding=1), bn(16), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return m, torch.randn(4, 3, 16, 16)


SMALL = {"pointwise": small_pointwise, "transformer": small_transformer, "cnn": small_cnn,
         "cnn_bn": lambda: small_cnn(batchnorm=True)}


def _grads(factory, dtype, backend: str):
    torch.manual_seed(0)
    m, x = factory()
    ctx = (compiled_bw.compress_activations(dtype, min_bytes=0, granularity="row")
           if dtype is not None else contextlib.nullcontext())
    with ctx as c:
        loss = m(x).float().pow(2).mean()
    compiled_bw.reset()     # a new model each call: no cache entries of the last one's
    with contextlib.nullcontext() if backend is None else compiled_bw.enable(backend=backend, strict=True):
        loss.backward()
    return [(n, p.grad) for n, p in m.named_parameters()], c


def _rel(got, ref) -> dict:
    top = max(r.norm() for _, r in ref)
    return {name: ((g - r).norm() / r.norm()).item()
            for (name, g), (_, r) in zip(got, ref, strict=True) if r.norm() > 1e-6 * top}


def grad_errors(factory, dtype, backend: str = "eager") -> tuple[dict, dict, object]:
    """({parameter name: relative L2 grad error} of one compressed backward under compiled_bw
    vs uncompressed eager, the same vs eager with the same compression, the compressed run's
    Compression (its counts))."""
    ref, _ = _grads(factory, None, None)
    same, _ = _grads(factory, dtype, None)
    got, c = _grads(factory, dtype, backend)
    return _rel(got, ref), _rel(got, same), c


def main(argv=None) -> int:
    from .memory import MEMORY_MODELS
    ap = argparse.ArgumentParser(prog="python -m benchmarks.grad_error", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="pointwise,transformer,cnn")     # --small: also cnn_bn
    ap.add_argument("--small", action="store_true", help="the tests' small models instead")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    print("| model | format | compressed / saved tensors | max rel. grad error | median | bound "
          "| max vs eager + same compression |")
    print("|---|---|---|---|---|---|---|")
    for name in a.models.split(","):
        factory = SMALL[name] if a.small else MEMORY_MODELS[name]
        for fmt, dtype in FORMATS.items():
            errs, own, c = grad_errors(factory, dtype)
            print(f"| {name} | {fmt} | {c.compressed} / {c.packs} | {max(errs.values()):.2e} | "
                  f"{statistics.median(errs.values()):.2e} | {bound(name, dtype):.1e} | "
                  f"{max(own.values()):.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
