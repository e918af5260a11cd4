"""Traceable saved-tensor hooks: an unpack that is a pure tensor function, traced into the graph.

Consumes the user's (pack, unpack) pair given to `traceable_saved_tensors_hooks` (a context
manager with `torch.autograd.graph.saved_tensors_hooks`'s contract; either may be a
`torch.fx.GraphModule`) and, at walk time, the autograd nodes whose saved tensors it packed.
Produces, per such node, its signature part (the unpack's identity, the packed object's pytree
structure, its non-tensor leaves and its tensors' metadata), its packed tensors as Box inputs
(`PackedLeafSlot`s), and, while tracing, the unpack's ops in the graph right where the node's
formula first reads the saved tensor.

Note [Traceable saved-tensor hooks]
Inside the context, each saved tensor is packed by the user's pack into any pytree of tensors
and plain values, held by a `_Packed`; the SavedVariable's unpack hook is a `TraceableUnpack`.
Outside compiled_bw (eager autograd, or a step that falls back) unpacking calls the user's
unpack on the packed object, as `saved_tensors_hooks` would.  Under compiled_bw the node is
traced like one without hooks: its packed tensors are graph inputs, and when its formula
unpacks the SavedVariable during the trace, the user's unpack runs on their placeholders, so
its ops (e.g. a dequantize) land in the graph next to their consumer, where Inductor fuses them.
The contract, which marking a pair traceable states: the unpack's result depends only on the
packed object (no Python side effect, no state read that can change between steps); it runs
once per capture, not per step.  The unpack function object is in the cache key (a new
function object is a new graph), with what it reads that a trace would bake in (closure cells,
defaults, globals: custom.py Note [What a traced function may read]; a value the key cannot
follow makes the node an opaque call), as are the packed object's structure and plain values
(numbers, strings, None, dtypes, devices, sizes and tuples/lists of them, keyed with their
type: 1, 1.0 and True differ).  A packed object holding any other non-tensor (a user object
whose attributes could change between steps unseen by the key) makes that node one opaque
call of the real node, which calls the unpack each step as eager does.
The traced unpack must return a tensor of the packed tensor's dtype, device and shape
(`_checked`); anything else fails the trace, and eager autograd runs that backward with its own
error or result.
With retain_graph=False the packed object is dropped after the run and a second backward
raises eager's "backward through the graph a second time".
Nodes of custom Functions and AOT backwards keep running as one opaque call of the real node
(nodes.py Note [Hooked saved tensors]), which calls the unpack as eager does.
While any packed object is alive, backwards use the Python walk (fastwalk.walk): the C++ walk
cannot read them.
"""
from __future__ import annotations

import contextlib

import torch

from ..torchapi.dynamo import pytree
from .custom import NOT_PLAIN, function_key, plain_key
from .saved import ERR_BACKWARD_TWICE, raw_saved

_LIVE = [0]     # live _Packed objects


def live() -> bool:
    return _LIVE[0] > 0


class _Packed:
    """What the SavedVariable holds: the user's packed object, and while tracing the
    placeholders of its tensor leaves and the traced unpack."""
    __slots__ = ("leaf_phs", "meta", "payload", "released", "unpacked")

    def __init__(self, payload, meta: tuple) -> None:
        self.payload = payload
        self.meta = meta            # (dtype, device, shape) of the tensor packed
        self.released = False
        self.leaf_phs = None
        self.unpacked = None
        _LIVE[0] += 1

    def __del__(self) -> None:
        try:
            _LIVE[0] -= 1
        except TypeError:       # interpreter shutdown: module globals already cleared
            pass


class TraceableUnpack:
    """The unpack hook the SavedVariable carries (marks the pair traceable)."""
    __slots__ = ("unpack",)

    def __init__(self, unpack) -> None:
        self.unpack = unpack

    def __call__(self, p: _Packed):
        if p.leaf_phs is not None:          # tracing: the unpack's ops go into the graph
            if p.unpacked is None:
                leaves, spec = pytree.tree_flatten(p.payload)
                it = iter(p.leaf_phs)
                leaves = [next(it) if isinstance(x, torch.Tensor) else x for x in leaves]
                p.unpacked = _checked(self.unpack(pytree.tree_unflatten(leaves, spec)), p.meta)
            return p.unpacked
        if p.released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        return self.unpack(p.payload)


def _checked(out, meta: tuple):
    """The traced unpack's result, if it has the dtype, device and shape of the tensor packed.
    Else raises: the trace fails and eager autograd runs this backward, so the formula's own
    error (eager's text) or result is eager's -- a graph traced on it would raise a different
    error under Inductor, or compute on a tensor eager's formula never saw this way."""
    dtype, device, shape = meta
    if isinstance(out, torch.Tensor) and out.dtype == dtype and out.device == device \
            and out.dim() == len(shape) and all(
                not isinstance(d, int) or d == e for d, e in zip(out.shape, shape, strict=True)):
        return out
    found = (f"{out.dtype}, {out.device}, {tuple(out.shape)}" if isinstance(out, torch.Tensor)
             else type(out).__name__)
    raise RuntimeError(f"traceable_saved_tensors_hooks: the unpack hook returned {found}, "
                       f"expected the packed tensor's {dtype}, {device}, {shape}; this "
                       "backward runs in eager autograd (fix the unpack to return the tensor "
                       "it was given, or use torch.autograd.graph.saved_tensors_hooks)")


@contextlib.contextmanager
def traceable_saved_tensors_hooks(pack_hook, unpack_hook):
    """`torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook)`, with the unpack
    marked traceable: under compiled_bw its body is traced into the compiled backward (Note
    [Traceable saved-tensor hooks]).  unpack_hook must be a pure function of the packed object
    (tensor ops only, no side effect); pack_hook may return any pytree of tensors and plain
    values.  Either may be a torch.fx.GraphModule."""
    if not callable(pack_hook) or not callable(unpack_hook):
        raise TypeError("traceable_saved_tensors_hooks: pack_hook and unpack_hook must be "
                        f"callable, got {type(pack_hook).__name__} and "
                        f"{type(unpack_hook).__name__}")

    def pack(t):
        return _Packed(pack_hook(t), (t.dtype, t.device, tuple(t.shape)))

    with torch.autograd.graph.saved_tensors_hooks(pack, TraceableUnpack(unpack_hook)):
        yield


class PackedLeafSlot:
    """The Slot (saved.py Note [Slots]) of one tensor leaf of a packed object: setting its
    placeholder makes the next unpack trace the user's unpack; release drops the packed
    object (eager frees it with the node's saved variables)."""
    __slots__ = ("j", "n", "packed")

    def __init__(self, packed: _Packed, j: int, n: int) -> None:
        self.packed, self.j, self.n = packed, j, n

    @property
    def placeholder(self):
        phs = self.packed.leaf_phs
        return None if phs is None else phs[self.j]

    @placeholder.setter
    def placeholder(self, ph) -> None:
        p = self.packed
        if ph is None:
            p.leaf_phs = p.unpacked = None
            return
        if p.leaf_phs is None:
            p.leaf_phs = [None] * self.n
        p.leaf_phs[self.j] = ph

    def release(self) -> None:
        p = self.packed
        p.payload = None
        p.released = True


def _raws(node, attrs) -> list:
    """(attr, list position or -1, SavedTensor) of the node's saved tensors."""
    out = []
    for a in attrs:
        r = raw_saved(node, a)
        if isinstance(r, (list, tuple)):
            out.extend((a, k, x) for k, x in enumerate(r))
        else:
            out.append((a, -1, r))
    return out


def traceable_entry(w, i: int, node, attrs, entry: list, tensor_meta) -> bool:
    """If every saved tensor of built-in node i was packed by traceable hooks: its signature
    part into `entry`, its packed tensors into w.saved (keys (i, attr, (pos, j, n))), True.
    Else False, having added nothing."""
    parts, saved, keys = [], [], []
    for a, pos, raw in _raws(node, attrs):
        if raw is None:
            parts.append(None)
            continue
        hook = raw.unpack_hook
        p = raw.data
        if hook is None and p is None:      # an undefined saved tensor (unpacks to None)
            parts.append(None)
            continue
        if type(hook) is not TraceableUnpack:
            return False
        if type(p) is not _Packed:
            return False
        if p.released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        leaves, spec = pytree.tree_flatten(p.payload)
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        plain = tuple(None if isinstance(x, torch.Tensor) else plain_key(x) for x in leaves)
        if any(x is NOT_PLAIN for x in plain):    # its contents could change unseen: a call
            return False
        unpack = function_key(hook.unpack)
        if unpack is NOT_PLAIN:     # it reads state the key cannot follow: a call
            return False
        parts.append((unpack, spec, plain, tuple(tensor_meta(t) for t in tensors)))
        for j, t in enumerate(tensors):
            saved.append(t)
            keys.append((i, a, (pos, j, len(tensors))))
    entry.append(("packed", tuple(parts)))
    w.saved.extend(saved)
    w.saved_node.extend(keys)
    return True


def packed_slot(node, attr: str, pos: tuple) -> PackedLeafSlot:
    lpos, j, n = pos
    raw = raw_saved(node, attr)
    if lpos >= 0:
        raw = raw[lpos]
    return PackedLeafSlot(raw.data, j, n)
