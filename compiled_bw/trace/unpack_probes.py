"""Unpack calls placed while a node's formula is traced (unpacked.py Note [Unpack calls]).

Consumes the walk, the node being traced (its hooked saved tensors: walk.unpack) and its grads
buffer; produces, while the formula runs under make_fx, one `compiled_bw::opaque` call (site
kind "unpack", calls/opaque.py) per saved tensor where the formula unpacks it, in that order,
each returning the tensor the formula is traced on.  trace/trace.py uses it; at run time
those calls are calls/unpacked.py's run_unpack.
"""
from __future__ import annotations

import torch

from ..calls.opaque import OpaqueSite, dense, label, opaque, register_site
from ..calls.unpacked import ext
from ..graph.nodes import NodeKind
from ..graph.saved import raw_saved


class Probes:
    """While node i's formula is traced: its hooked saved tensors swapped for ones whose unpack
    places an unpack call in the graph (once per tensor) and returns its output."""

    def __init__(self, w, i: int, kind: NodeKind, buf: list, df) -> None:
        self.w, self.i, self.name = w, i, kind.name
        self.buf, self.df = buf, df
        self.attrs = tuple(a for j, a in w.unpack[1] if j == i)
        self.out_meta = tuple(None if c < 0 else w.in_meta[c][nr] for c, nr in w.edges[i])
        self.sites: list = []
        self.outs: dict = {}
        self.handles: list = []

    def __enter__(self):
        w, i = self.w, self.i
        node = w.nodes[i]
        x = ext()
        metas = w.unpack[1]
        try:
            for (j, a), m in metas.items():
                if j == i:
                    self.handles.append(x.swap_saved(raw_saved(node, a), self._probe(a, m)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        x = ext()
        for h in self.handles:
            x.unswap_saved(h)
        self.handles = []

    def _probe(self, a: str, m: tuple):
        def unpack():
            t = self.outs.get(a)
            if t is None:
                shape, stride, dtype, device = m
                like = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
                if not dense(like):     # an expanded tensor: no copy can take its layout,
                    stride = like.contiguous().stride()  # so traced on a contiguous one
                defined = tuple(self.df.of(g) for g in self.buf)
                metas = _grad_metas(self.buf)
                site = OpaqueSite(self.i, self.name, "unpack", (), ((shape, dtype, device),),
                                  out_strides=(stride,), attr=a,
                                  in_defined=defined if metas is None else (),
                                  out_meta=self.out_meta,
                                  observe=(self.w.unpack[0], m, not self.sites, self.attrs),
                                  grad_metas=metas,
                                  grad_defined=() if metas is None else defined)
                sid = register_site(site)
                self.sites.append(site)
                ins = list(self.buf) if metas is None else []
                t = self.outs[a] = opaque(sid, ins, label(site))[0]
            return t
        return unpack


def _grad_metas(buf: list) -> tuple | None:
    """Note [Unpack calls]: the grads' metadata, which the call's error path builds them
    from, so the call does not take them; None (it takes them) where a size is symbolic."""
    out = []
    for g in buf:
        if g is None:
            out.append(None)
            continue
        shape, stride = tuple(g.shape), tuple(g.stride())
        if not all(type(d) is int for d in (*shape, *stride)):
            return None
        out.append((shape, stride, g.dtype, g.device))
    return tuple(out)
