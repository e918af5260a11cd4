"""Peak bytes of live tensors during the backward: eager autograd vs compiled_bw vs the anchor.

Consumes the benchmark models (benchmarks/models.py, plus act8 and mlp8: activation-dominated,
and transformer: 2 pre-norm layers with SDPA attention, not checkpointed) and modes (eager,
cbw-eager, cbw-inductor, torch-ca = torch compiled autograd, hooks = eager autograd under plain
torch.autograd.graph.saved_tensors_hooks; any of them +fp8, +int8 or +bf16: the forward runs
inside compiled_bw.compress_activations with that format, per row, min_bytes 64 KiB; hooks+fmt
installs the same pack / unpack as plain Python hooks); produces, per model and mode, the peak
live bytes during forward + backward and during the backward, the bytes the forward left saved
for the backward, their ratios to eager autograd's, and the median time of a forward + backward step.
Run: python -m benchmarks.memory [--models act8,gemm] [--modes eager,cbw-eager,cbw-inductor]
     python -m benchmarks.memory --models pointwise,transformer,cnn --modes eager,hooks+fp8,eager+fp8,cbw-inductor+fp8

Method (CPU has no torch.cuda.max_memory_allocated): torch.profiler with profile_memory=True
makes the CPU allocator report every allocation and free; `_allocations` keeps the running
total of the bytes live among the blocks allocated within the profile.  The forward and
backward of one warmed-up step run under the profiler, so the forward's activations are
counted and their frees seen; a marker allocation of odd size separates forward from backward.
Peak = max running total after the marker (the total starts at 0 with the profile, before
the forward); fwd+bwd peak = the same max over the whole step; saved = the running total at
the marker (the forward's output and the tensors it left for the backward).
This counts every CPU tensor allocation (Inductor's buffers included), not Python objects.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import compiled_bw

from .models import MODELS

_MARKER = 12347   # bytes; an allocation of this size marks the start of the backward


class Activations(nn.Module):
    """8 layers of large pointwise activations, each with a weight of the activation's shape:
    the saved activations dominate, and each layer's weight grad appears during the backward,
    so freeing activations as their layer finishes is what keeps the peak at eager's."""

    def __init__(self, layers: int = 8, n: int = 256 * 1024) -> None:
        super().__init__()
        self.ws = nn.ParameterList(nn.Parameter(torch.rand(n) + 0.5) for _ in range(layers))

    def forward(self, x):
        for w in self.ws:
            x = torch.tanh(x * w)
        return x


def act8(n: int = 256 * 1024):
    return Activations(8, n), torch.randn(n)


def mlp8(d: int = 512, batch: int = 256):
    """8 x (Linear(d, d) + tanh): GEMMs separate the layers, so no fused kernel spans two;
    each layer frees its activations (0.5 MB) and allocates its weight grad (1 MB)."""
    return nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(d, d), nn.Tanh())]), \
        torch.randn(batch, d)


def transformer(layers: int = 2, d: int = 256, tokens: int = 256, batch: int = 4):
    """`layers` pre-norm transformer layers (LayerNorm, SDPA causal attention, GELU MLP;
    benchmarks/models.PreNormLayer), not checkpointed: every activation saved."""
    from .models import PreNormLayer
    return nn.Sequential(*[PreNormLayer(d) for _ in range(layers)]), torch.randn(batch, tokens, d)


MEMORY_MODELS = {"act8": act8, "mlp8": mlp8, "transformer": transformer, **MODELS}


def _compiled_autograd():
    from torch._dynamo import compiled_autograd
    return compiled_autograd._enable(torch.compile(backend="inductor"))


MODES = {
    "eager": contextlib.nullcontext,
    "cbw-eager": lambda: compiled_bw.enable(backend="eager", strict=True),
    "cbw-inductor": lambda: compiled_bw.enable(backend="inductor", strict=True),
    "torch-ca": _compiled_autograd,
    "hooks": contextlib.nullcontext,    # the backward is eager's; "+fmt" packs in plain hooks
}


COMPRESSION = {"fp8": torch.float8_e4m3fn, "int8": torch.int8, "bf16": torch.bfloat16}


def mode_contexts(mode) -> tuple:
    """(forward context factory, backward context factory) of a mode name ("cbw-inductor+fp8")
    or of a backward context factory."""
    if not isinstance(mode, str):
        return contextlib.nullcontext, mode
    base, _, fmt = mode.partition("+")
    if not fmt:
        fwd = contextlib.nullcontext
    elif base == "hooks":
        fwd = functools.partial(_plain_hooks, COMPRESSION[fmt])
    else:
        fwd = functools.partial(compiled_bw.compress_activations, COMPRESSION[fmt],
                                min_bytes=1 << 16, granularity="row")
    return fwd, MODES[base]


def _plain_hooks(dtype):
    """compress_activations' pack and unpack as torch's own saved_tensors_hooks (no compiled_bw
    context: what a user writes without compiled_bw)."""
    from compiled_bw.compress import pack_activation, unpack_activation
    return torch.autograd.graph.saved_tensors_hooks(
        functools.partial(pack_activation, dtype=dtype, min_bytes=1 << 16, granularity="row"),
        unpack_activation)


def _allocations(prof) -> list:
    """(time, size, running total) of every CPU allocation (+) and free (-) in the profile, in
    time order; the total counts the blocks allocated within this profile only.

    Not the allocator's own `total_allocated`: it counts every block allocated while any
    profile ran, in this process, since it started, so an earlier profile's block freed in
    this window (an earlier test's leftovers, collected now) lowered it: ckpt4's eager peak
    read 1.02 MB instead of 3.16 and fp8's 0.38 MB instead of 8.4, in full test runs only."""
    alloc = torch._C._profiler._EventType.Allocation
    raw, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == alloc:
            f = e.extra_fields
            raw.append((e.start_time_ns, f.alloc_size, f.ptr))
    raw.sort(key=lambda r: (r[0], r[1] < 0))   # at one time stamp, an allocation before a free
    out, live, total = [], {}, 0
    for t, size, ptr in raw:
        if size >= 0:
            live[ptr] = size
        elif live.pop(ptr, None) is None:
            continue                     # allocated before this profile
        total += size
        out.append((t, size, total))
    return out


def _step(model, x, ctx_factory, loss_fn, marker: bool, fwd=contextlib.nullcontext):
    model.zero_grad(set_to_none=True)
    with fwd():
        loss = loss_fn(model(x))
    m = torch.empty(_MARKER, dtype=torch.uint8) if marker else None
    with ctx_factory():
        loss.backward()
    del loss, m


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto's C++ side writes `USDT: ... profiler_start` / `profiler_stop` lines straight to
    file descriptor 2 whenever a profile starts or stops (no switch turns them off): point fd 2
    at /dev/null around those two calls only, so the harness's output is its own."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_backward_bytes(model, x, mode, warmup: int = 2,
                        loss_fn=lambda y: y.float().pow(2).mean()) -> int:
    """Peak live tensor bytes during one steady-state backward, above what was live before
    its forward (so: the forward's saved activations + everything the backward allocates).
    mode: a name in MODES (+fp8/int8/bf16: compressed saved activations) or a context factory."""
    return step_bytes(model, x, mode, warmup, loss_fn)["backward"]


def step_bytes(model, x, mode, warmup: int = 2,
               loss_fn=lambda y: y.float().pow(2).mean()) -> dict:
    """One steady-state step's live tensor bytes above what was live before its forward:
    {"step": peak over forward + backward, "backward": peak during the backward,
     "saved": live when the backward starts (what the forward left for it)}."""
    fwd, ctx_factory = mode_contexts(mode)
    for _ in range(warmup):             # captures and compiles happen here
        _step(model, x, ctx_factory, loss_fn, marker=False, fwd=fwd)
    compiled_bw.wait_for_compiles()     # steady state: the compiled callables are in use
    model.zero_grad(set_to_none=True)
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        with compiled_bw.profile_compiled():    # else it runs eager autograd (Note [Profiler])
            _step(model, x, ctx_factory, loss_fn, marker=True, fwd=fwd)
    finally:
        with _quiet_stderr():
            prof.stop()
    events = _allocations(prof)
    assert events, "the profiler reported no allocations"
    start = next((k for k, (_, size, _) in enumerate(events) if size == _MARKER), None)
    assert start is not None, "marker allocation not found in the profile"
    peak = max(total for _, _, total in events[start:])
    return {"step": max(total for _, _, total in events) - _MARKER,
            "backward": peak - _MARKER,
            "saved": events[start][2] - _MARKER}


def peak_backward_bytes_cuda(model, x, mode, warmup: int = 2,
                             loss_fn=lambda y: y.float().pow(2).mean()) -> int:
    """On a GPU: torch.cuda.max_memory_allocated over one steady-state forward + backward,
    above what was allocated before its forward (the CPU method's quantity)."""
    fwd, ctx_factory = mode_contexts(mode)
    for _ in range(warmup):
        _step(model, x, ctx_factory, loss_fn, marker=False, fwd=fwd)
    compiled_bw.wait_for_compiles()
    _step(model, x, ctx_factory, loss_fn, marker=False, fwd=fwd)     # loads what the compiles made
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(x.device)
    base = torch.cuda.memory_allocated(x.device)
    torch.cuda.reset_peak_memory_stats(x.device)
    _step(model, x, ctx_factory, loss_fn, marker=False, fwd=fwd)
    torch.cuda.synchronize(x.device)
    return torch.cuda.max_memory_allocated(x.device) - base


def step_seconds(model, x, mode, steps: int = 5, loss_fn=lambda y: y.float().pow(2).mean()) -> float:
    """Median wall time of one steady-state forward + backward step (after peak_backward_bytes
    warmed the mode up)."""
    fwd, ctx_factory = mode_contexts(mode)
    times = []
    for _ in range(steps):
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        t = time.perf_counter()
        _step(model, x, ctx_factory, loss_fn, marker=False, fwd=fwd)
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MEMORY_MODELS))
    ap.add_argument("--modes", default=",".join(MODES))
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    modes = a.modes.split(",")
    print(f"{'model':11} {'mode':17} {'bwd peak MB':>11} {'vs eager':>8} {'f+b peak MB':>11} "
          f"{'vs eager':>8} {'saved MB':>8} {'vs eager':>8} {'step ms':>8}")
    for name in a.models.split(","):
        base = None
        for mode in modes:
            torch.manual_seed(0)
            model, x = MEMORY_MODELS[name]()
            compiled_bw.reset()
            try:
                got = step_bytes(model, x, mode)
                ms = step_seconds(model, x, mode) * 1e3
            except Exception as e:  # noqa: BLE001 -- one failing cell never stops the report
                print(f"{name:11} {mode:17} n/a ({type(e).__name__}: {str(e)[:80]})")
                continue
            base = got if mode == "eager" else base
            cells = [f"{got[k] / 2**20:{w}.2f} " + (f"{got[k] / base[k]:8.3f}" if base else f"{'':8}")
                     for k, w in (("backward", 11), ("step", 11), ("saved", 8))]
            print(f"{name:11} {mode:17} {' '.join(cells)} {ms:8.2f}", flush=True)
            if mode.startswith("torch-ca"):
                torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
