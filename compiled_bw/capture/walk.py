"""Walk: run on every backward call, so it must stay cheap.

Consumes the root edges of one backward/grad call; produces a Walk: the reachable nodes in
a deterministic discovery order, their edges as indices, the flat list of this step's
saved tensors (future graph inputs), the leaves, and a hashable `signature` that holds
everything the traced graph bakes in (Note [What the signature holds]).  Iterative, never
recursive: graphs have 10^4+ nodes.
"""
from __future__ import annotations

import torch

from .nodes import LEAF, OPAQUE, TRACE, UNSUPPORTED, node_kind
from .saved import input_metadata, raw_saved, sequence_nr

# Note [What the signature holds]
# Per node, in discovery order: its class, its edges (child index, input_nr; -1 = invalid),
# every saved non-tensor value, the metadata of every saved tensor, its `_input_metadata`
# (the metadata that validate_outputs checks its parents' grads against), and its
# sequence_nr relative to the first root (execution order).  Per leaf: shape, stride, dtype,
# device, requires_grad.  Plus the roots and the call options (added by the caller).
# Hidden per-class state is handled by nodes.py (Note [Hidden saved state]).

_STRIDED = torch.strided


class WalkUnsupported(Exception):
    """The graph holds something we do not compile; the message is the fallback reason."""


def tensor_meta(t: torch.Tensor) -> tuple:
    if t.layout is not _STRIDED or t.is_nested:
        raise WalkUnsupported(f"non-strided tensor ({t.layout}) in the graph")
    cls = type(t)
    if cls is not torch.Tensor and cls is not torch.nn.Parameter:
        raise WalkUnsupported(f"tensor subclass {cls.__name__} in the graph")
    if t.dtype.is_complex:
        return (t.shape, t.stride(), t.dtype, t.device, t.is_conj(), t.is_neg())
    return (t.shape, t.stride(), t.dtype, t.device)


class Walk:
    __slots__ = ("nodes", "kinds", "edges", "in_meta", "saved", "saved_raw", "saved_node",
                 "leaves", "signature", "root_edges")

    def __init__(self) -> None:
        self.nodes: list = []          # autograd node objects, discovery order
        self.kinds: list = []          # NodeKind per node
        self.edges: list = []          # per node: tuple of (child index | -1, input_nr)
        self.in_meta: list = []        # per node: tuple of (shape, dtype, device) per input slot
        self.saved: list = []          # real saved tensors, flattened (graph inputs)
        self.saved_raw: list = []      # the SavedTensor objects, parallel to `saved`
        self.saved_node: list = []     # owning node index, parallel to `saved`
        self.leaves: dict = {}         # node index -> leaf tensor (AccumulateGrad.variable)
        self.signature: tuple = ()
        self.root_edges: list = []     # (node index, input_nr) per root


def walk_graph(root_edges: list) -> Walk:
    """root_edges: list of (node, input_nr) with node never None."""
    w = Walk()
    index: dict = {}
    nodes, kinds, edges, in_meta = w.nodes, w.kinds, w.edges, w.in_meta
    saved, saved_raw, saved_node = w.saved, w.saved_raw, w.saved_node
    sig: list = []
    base_seq = sequence_nr(root_edges[0][0])

    def visit(node) -> int:
        i = index.get(node)
        if i is None:
            i = index[node] = len(nodes)
            nodes.append(node)
            stack.append(i)
        return i

    stack: list = []
    for node, nr in root_edges:
        w.root_edges.append((visit(node), nr))
    # Discovery order: roots first, then DFS (stack pops last pushed); indices assigned on
    # first sight so the same structure always yields the same numbering.
    while stack:
        i = stack.pop()
        node = nodes[i]
        kind = node_kind(type(node))
        kinds.append(None)  # placeholder; filled below (indices != processing order)
        if kind.how == UNSUPPORTED:
            raise WalkUnsupported(kind.reason)
        nf = node.next_functions
        e = tuple((-1 if child is None else visit(child), nr) for child, nr in nf)
        meta = tuple((tuple(m.shape), m.dtype, m.device, m.is_nested_tensor) for m in input_metadata(node))
        if kind.how == LEAF:   # sequence_nr is UINT64_MAX for every AccumulateGrad
            entry: list = [i, kind.name, e, meta, -1]
        else:
            entry = [i, kind.name, e, meta, sequence_nr(node) - base_seq]
        if kind.how == LEAF:
            var = node.variable
            entry.append(tensor_meta(var) + (var.requires_grad,))
            w.leaves[i] = var
        else:
            for a in kind.value_attrs:
                v = getattr(node, "_saved_" + a)
                entry.append(tuple(v) if isinstance(v, list) else v)
            for a in kind.tensor_attrs:
                v = getattr(node, "_saved_" + a)   # unpack: eager's version-counter check
                if v is None:
                    entry.append(None)
                elif isinstance(v, torch.Tensor):
                    entry.append(tensor_meta(v))
                    saved.append(v)
                    saved_raw.append(raw_saved(node, a))
                    saved_node.append(i)
                else:                               # list of optional tensors
                    raws = raw_saved(node, a)
                    for t, r in zip(v, raws, strict=True):
                        if t is None:
                            entry.append(None)
                            continue
                        entry.append(tensor_meta(t))
                        saved.append(t)
                        saved_raw.append(r)
                        saved_node.append(i)
                    entry.append(len(v))
        sig.append(tuple(entry))
        edges.append((i, e))
        in_meta.append((i, meta))
        kinds[-1] = (i, kind)
    # Processing order differs from index order; sort the per-node lists by index.
    order = sorted(range(len(edges)), key=lambda k: edges[k][0])
    w.edges = [edges[k][1] for k in order]
    w.in_meta = [in_meta[k][1] for k in order]
    w.kinds = [kinds[k][1] for k in order]
    for i, kind in enumerate(w.kinds):
        if kind.needs_valid_edges and kind.how == TRACE and any(c < 0 for c, _ in w.edges[i]):
            w.kinds[i] = _as_opaque(kind)
    w.signature = tuple(sig)
    return w


_OPAQUE_VARIANTS: dict = {}


def _as_opaque(kind):
    import dataclasses

    v = _OPAQUE_VARIANTS.get(kind)
    if v is None:
        v = _OPAQUE_VARIANTS[kind] = dataclasses.replace(kind, how=OPAQUE)
    return v
