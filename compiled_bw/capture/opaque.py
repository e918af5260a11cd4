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
    for o, spec in zip(outs, s.out_specs, strict=True):
        if spec is None:
            continue
        if o is None:
            raise StructureChanged(f"{s.name} returned an undefined gradient where the "
                                   "captured graph expects a tensor")
        if any(g is not None and o.untyped_storage().data_ptr() == g.untyped_storage().data_ptr()
               for g in grads):
            o = o.clone()   # custom ops may not return (views of) their inputs
        res.append(o)
    return res


@opaque.register_fake
def _opaque_fake(site: int, grads: list[torch.Tensor | None]) -> list[torch.Tensor]:
    s = _tls.step.sites[site]
    return [torch.empty(shape, dtype=dtype, device=device)
            for shape, dtype, device in (sp for sp in s.out_specs if sp is not None)]
