"""What one opaque call costs: a chain of N trivial custom autograd.Functions (traced), of N
custom Functions compiled_bw must call (`compiled_bw_traceable = False`), of N tensor hooks,
or of N node pre-hooks (`grad_fn.register_prehook`), backward under eager autograd and under
compiled_bw (eager and Inductor backends, cache hits).

Consumes --n, --steps; prints per mode the median backward time for N and for 0 opaque calls
(the same chain of built-in ops without them), and the difference per call in µs -- next to
eager's own per-PyNode / per-hook cost measured the same way, interleaved in one process --
then eager's whole cost of a PyNode (against the chain without the node at all).
`--profile` adds the top functions (cProfile, cumulative) of compiled_bw's cache-hit step;
`--cpu` times the backward's thread CPU time instead of wall clock (on a shared machine).
Run: python -m benchmarks.opaque_cost [--n 64] [--steps 200] [--profile] [--cpu]
[--kinds function,opaque_function,hook,node_hook]
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import sys
import time

import torch

import compiled_bw


class Ident(torch.autograd.Function):
    """The cheapest custom Function: forward x * 1, backward passes the grad through."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g


class OpaqueIdent(Ident):
    """Ident that compiled_bw must call (never traced): the cost of an opaque Function call."""
    compiled_bw_traceable = False


def _program(kind: str, n: int):
    w = torch.randn(16, requires_grad=True)

    def loss():
        x = w * 2
        for _ in range(n):
            if kind == "function":
                x = Ident.apply(x)
            elif kind == "opaque_function":
                x = OpaqueIdent.apply(x)
            elif kind == "hook":
                x = x * 1
                x.register_hook(lambda g: g)
            elif kind == "node_hook":
                x = x * 1
                x.grad_fn.register_prehook(lambda gs: None)
            elif kind == "plain":   # the same chain without opaque calls
                x = x * 1
            # "bare": the chain of sin alone (eager's whole cost of a PyNode: pynode_cost)
            x = x.sin()
        return x.sum()
    return w, loss


MODES = {
    "eager": contextlib.nullcontext,
    "cbw-eager": lambda: compiled_bw.enable(backend="eager", strict=True),
    "cbw-inductor": lambda: compiled_bw.enable(backend="inductor", strict=True,
                                               background_compile=False),
}


def measure(kind: str, n: int, steps: int, clock=time.perf_counter) -> dict:
    progs = {k: _program(kind if k else "plain", n) for k in (True, False)}
    times: dict = {(m, k): [] for m in MODES for k in progs}
    for ctx in MODES.values():              # captures and compiles, then warm
        for _, loss in progs.values():
            for _ in range(3):
                with ctx():
                    loss().backward()
    for _ in range(steps):
        for m, ctx in MODES.items():
            for k, (w, loss) in progs.items():
                w.grad = None
                lo = loss()
                with ctx():
                    t0 = clock()
                    lo.backward()
                    times[(m, k)].append(clock() - t0)
    out = {}
    for m in MODES:
        with_, without = (statistics.median(times[(m, k)]) * 1e6 for k in (True, False))
        out[m] = (with_, without, (with_ - without) / n)
    return out


def pynode_cost(n: int, steps: int, clock=time.perf_counter) -> tuple:
    """Eager autograd's whole cost of one PyNode: the chain with N Ident Functions against the
    chain of sin alone (not against the MulBackward0 an Ident replaces), interleaved; and of
    one tensor hook the same way.  Returns (µs per PyNode, µs per tensor hook)."""
    progs = {k: _program(k, n) for k in ("function", "hook", "bare")}
    times: dict = {k: [] for k in progs}
    for _ in range(3):
        for _, loss in progs.values():
            loss().backward()
    for _ in range(steps):
        for k, (w, loss) in progs.items():
            w.grad = None
            lo = loss()
            t0 = clock()
            lo.backward()
            times[k].append(clock() - t0)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    return ((med["function"] - med["bare"]) / n, (med["hook"] - med["bare"]) / n)


def profile(kind: str, n: int, steps: int = 300) -> str:
    _w, loss = _program(kind, n)
    for _ in range(3):
        with MODES["cbw-eager"]():
            loss().backward()
    pr = cProfile.Profile()
    for _ in range(steps):
        lo = loss()
        with MODES["cbw-eager"]():
            pr.enable()
            lo.backward()
            pr.disable()
    s = pstats.Stats(pr)
    s.sort_stats("tottime")
    import io
    buf = io.StringIO()
    s.stream = buf
    s.print_stats(14)
    return buf.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.opaque_cost",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--kinds", default="function,opaque_function,hook,node_hook")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'opaque kind':12} {'mode':13} {'N calls µs':>11} {'0 calls µs':>11} {'µs per call':>12}")
    for kind in a.kinds.split(","):
        for m, (w, wo, per) in measure(kind, a.n, a.steps,
                                                time.thread_time if a.cpu else time.perf_counter).items():
            print(f"{kind:12} {m:13} {w:11.1f} {wo:11.1f} {per:12.2f}", flush=True)
        if a.profile:
            print(profile(kind, a.n))
    node, hook = pynode_cost(a.n, a.steps, time.thread_time if a.cpu else time.perf_counter)
    print(f"eager, whole cost against the chain of sin alone: {node:.2f} µs a PyNode (Ident), "
          f"{hook:.2f} µs a mul + tensor hook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
