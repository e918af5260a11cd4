"""Opaque calls: one graph node that runs this step's real autograd node at run time.

Consumes a node index and its output spec (known at trace time from the input metadata of
the nodes its edges point to); produces a call to the custom op `compiled_bw::opaque`, whose
fake implementation makes outputs from that spec and whose real implementation calls the
node object of the step being run (runtime/run.py sets `current_step`).  Being a
torch.library op, any backend (Inductor included) keeps it as an extern call.
"""
from __future__ import annotations

import dataclasses
import threading

import torch

from .validate import validate_outputs


@dataclasses.dataclass
class OpaqueSite:
    node_index: int
    name: str
    edges: tuple           # (child | -1, input_nr) per output
    out_specs: tuple       # per output: None (dropped) or (shape, dtype, device)
    out_strides: tuple | None = None   # per kept output; Note [Opaque output layout]


# Note [Opaque output layout]
# Whatever consumes an opaque call's outputs was traced against the fake outputs, so the real
# outputs must have the fake ones' strides too: a traced `view` of a contiguous fake fails on
# a transposed real grad, and Inductor asserts and indexes extern outputs by their fake
# strides.  The first fake call (during the capture) fixes each output's strides, like
# TensorIterator would: those of a same-shaped, non-overlapping and dense incoming grad (eager
# `grad * 2` keeps the grad's layout), else contiguous.  Later fake calls (backend retraces)
# reuse them; the real call copies an output into them when the node produced others.
# Observable difference from eager: a grad() result made directly by an opaque node whose
# real layout differs from that guess comes out in the guessed layout.


def _dense(t: torch.Tensor) -> bool:
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return t.numel() > 0


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


def _guess_strides(specs, grads) -> tuple:
    out = []
    for shape, _, _ in (sp for sp in specs if sp is not None):
        like = next((g for g in grads if g is not None and tuple(g.shape) == tuple(shape)
                     and _dense(g)), None)
        out.append(tuple(like.stride()) if like is not None else _contiguous_strides(shape))
    return tuple(out)


def _same_layout(t: torch.Tensor, strides: tuple) -> bool:
    return all(size <= 1 or st == want for size, st, want in zip(t.shape, t.stride(), strides))


class StructureChanged(RuntimeError):
    """A real node returned an undefined grad where the traced graph expects a tensor."""


_tls = threading.local()


class current_step:
    """Context: what opaque calls read, on this thread: `step.sites` (the graph's OpaqueSites,
    indexed by the int the graph passes) and, at run time, `step.nodes` / `step.in_meta`."""

    def __init__(self, step) -> None:
        self.step = step

    def __enter__(self):
        self.prev = getattr(_tls, "step", None)
        _tls.step = self.step
        return self.step

    def __exit__(self, *exc) -> None:
        _tls.step = self.prev


def current_sites() -> list:
    """The OpaqueSites of the graph being traced, compiled or run on this thread."""
    step = getattr(_tls, "step", None)
    return [] if step is None else list(step.sites)


def register_site(site: OpaqueSite) -> int:
    """During a trace: add a site to the graph being traced; returns its graph-local id."""
    sites = _tls.step.sites
    sites.append(site)
    return len(sites) - 1


@torch.library.custom_op("compiled_bw::opaque", mutates_args=())
def opaque(site: int, grads: list[torch.Tensor | None]) -> list[torch.Tensor]:
    step = _tls.step
    s = step.sites[site]
    node = step.nodes[s.node_index]
    outs = node(*grads)
    outs = [outs] if isinstance(outs, torch.Tensor) or outs is None else list(outs)
    outs = validate_outputs(s.name, outs, s.edges, step.in_meta)
    res = []
    strides = iter(s.out_strides)
    for o, spec in zip(outs, s.out_specs, strict=True):
        if spec is None:
            continue
        if o is None:
            raise StructureChanged(f"{s.name} returned an undefined gradient where the "
                                   "captured graph expects a tensor")
        want = next(strides)
        # custom ops may not return (views of) their inputs; layout: Note [Opaque output layout]
        if not _same_layout(o, want) or any(
                g is not None and o.untyped_storage().data_ptr() == g.untyped_storage().data_ptr()
                for g in grads):
            o = torch.empty_strided(o.shape, want, dtype=o.dtype, device=o.device).copy_(o)
        res.append(o)
    return res


@opaque.register_fake
def _opaque_fake(site: int, grads: list[torch.Tensor | None]) -> list[torch.Tensor]:
    s = _tls.step.sites[site]
    if s.out_strides is None:
        s.out_strides = _guess_strides(s.out_specs, grads)
    specs = (sp for sp in s.out_specs if sp is not None)
    return [torch.empty_strided(shape, strides, dtype=dtype, device=device)
            for (shape, dtype, device), strides in zip(specs, s.out_strides, strict=True)]
