"""Opaque calls: one graph node that runs this step's real autograd node at run time.

Consumes a node index and its output spec (known at trace time from the input metadata of
the nodes its edges point to); produces a call to the custom op `compiled_bw::opaque`, whose
fake implementation makes outputs from that spec and whose real implementation calls the
node object of the step being run (runtime/run.py sets `current_step`).  Being a
torch.library op, any backend (Inductor included) keeps it as an extern call.
"""
from __future__ import annotations

import dataclasses
import itertools
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


_SITES: dict[int, OpaqueSite] = {}
_next_site = itertools.count()
_tls = threading.local()


def register_site(site: OpaqueSite) -> int:
    sid = next(_next_site)
    _SITES[sid] = site
    return sid


def forget_sites(ids) -> None:
    for sid in ids:
        _SITES.pop(sid, None)


class current_step:
    """Context: the Step (nodes, input metadata) that opaque calls read at run time."""

    def __init__(self, step) -> None:
        self.step = step

    def __enter__(self):
        self.prev = getattr(_tls, "step", None)
        _tls.step = self.step
        return self.step

    def __exit__(self, *exc) -> None:
        _tls.step = self.prev


@torch.library.custom_op("compiled_bw::opaque", mutates_args=())
def opaque(site: int, grads: list[torch.Tensor | None]) -> list[torch.Tensor]:
    s = _SITES[site]
    step = _tls.step
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
    s = _SITES[site]
    return [torch.empty(shape, dtype=dtype, device=device)
            for shape, dtype, device in (sp for sp in s.out_specs if sp is not None)]
