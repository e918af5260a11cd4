"""Tensor subclasses at the graph boundary: flattened to dense inner tensors, rebuilt after.

Consumes traceable wrapper subclasses (`is_traceable_wrapper_subclass`: `__tensor_flatten__`,
`__tensor_unflatten__`, a `__torch_dispatch__`; e.g. TwoTensor) met as saved tensors, root
grads, leaves and graph outputs.  Produces
  - `layout_of(t)`: a hashable Layout (type, flatten ctx, outer size/stride/dtype/device, the
    inner tensors' layouts, recursively), for the signature and as the rebuild plan;
  - `flatten(ts)`: the dense inner tensors, depth first (torch's own `get_plain_tensors`);
  - `rebuild(layouts, flat)`: the tensors again, subclasses made by `__tensor_unflatten__`.

Note [Subclasses stay outside the graph]
The captured graph is dense, as AOTAutograd's is (subclass_utils.py: unwrap_tensor_subclasses on
entry, wrap_tensor_subclasses on exit).  A subclass input (saved tensor, root grad) becomes one
placeholder per inner tensor; at trace time the subclass is rebuilt from those placeholders with
`__tensor_unflatten__`, so node formulas run under make_fx desugar through its
`__torch_dispatch__` into aten ops on the inners.  A subclass output is flattened into its
inners as graph outputs; runtime/run.py rebuilds it from the Layout recorded at trace time.
(Subclass constructors are not graph nodes: keeping them at the boundary is what AOTAutograd
does, and keeps the graph compilable by any backend.)  What the trace bakes in --
the subclass's dispatch decisions on its ctx and inner metadata -- is in the signature through
the Layout.  Subclass dispatch that depends on anything else (global state) is not seen: the
same limit as torch.compile's.  Opaque calls never see a subclass (trace.py falls back).
"""
from __future__ import annotations

import torch

from ..torchapi import autograd as torch_autograd
from ..torchapi.dynamo import FakeTensor, get_plain_tensors, is_traceable_wrapper_subclass, pytree


class SubclassUnsupported(Exception):
    """A subclass compiled_bw cannot flatten; the message is the fallback reason."""


class Layout:
    """One subclass tensor's structure: `cls.__tensor_unflatten__(inners, ctx, size, stride)`
    rebuilds it.  `inners`: per attr, (attr, Layout | dense tensor metadata tuple)."""
    __slots__ = ("_hash", "cls", "ctx", "device", "dtype", "inners", "n_flat", "size", "stride")

    def __init__(self, cls, ctx, size, stride, dtype, device, inners: tuple) -> None:
        self.cls, self.ctx, self.size, self.stride = cls, ctx, size, stride
        self.dtype, self.device, self.inners = dtype, device, inners
        self.n_flat = sum(m.n_flat if type(m) is Layout else 1 for _, m in inners)
        try:
            self._hash = hash((cls, ctx, size, stride, dtype, device, inners))
        except TypeError as e:
            raise SubclassUnsupported(
                f"tensor subclass {cls.__name__}: its __tensor_flatten__ ctx "
                f"({type(ctx).__name__}) is not hashable ({e}), so it cannot be part of the "
                "cache key; make the ctx hashable (e.g. a tuple) to compile it") from None

    def _key(self) -> tuple:
        return (self.cls, self.ctx, self.size, self.stride, self.dtype, self.device, self.inners)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return type(other) is Layout and self._hash == other._hash and self._key() == other._key()

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}={m!r}" for a, m in self.inners)
        return (f"{self.cls.__name__}({list(self.size)}, stride={self.stride}, "
                f"ctx={self.ctx!r}, {inner})")


def layout_of(t: torch.Tensor, dense_meta) -> Layout:
    """t: a tensor whose type is not torch.Tensor / Parameter.  dense_meta(inner) gives a
    plain inner tensor's metadata (walk.tensor_meta).  Raises SubclassUnsupported."""
    cls = type(t)
    if not is_traceable_wrapper_subclass(t):
        raise SubclassUnsupported(
            f"tensor subclass {cls.__name__} in the graph is not a traceable wrapper subclass "
            "(it needs __tensor_flatten__ / __tensor_unflatten__, see "
            "torch.utils._python_dispatch.TraceableWrapperSubclass)")
    attrs, ctx = t.__tensor_flatten__()
    if ctx is not None and any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(ctx)):
        raise SubclassUnsupported(
            f"tensor subclass {cls.__name__}: its __tensor_flatten__ ctx holds a tensor, which "
            "a captured graph would bake in; return it as an inner attribute instead")
    inners = []
    for a in attrs:
        x = getattr(t, a)
        if not isinstance(x, torch.Tensor):
            raise SubclassUnsupported(
                f"tensor subclass {cls.__name__}: inner attribute {a!r} is a "
                f"{type(x).__name__}, not a tensor (only tensor inners are flattened)")
        inners.append((a, dense_meta(x)))
    return Layout(cls, ctx, t.shape, t.stride(), t.dtype, t.device, tuple(inners))


def flatten(ts) -> list:
    """Defined tensors, each subclass replaced by its dense inner tensors (depth first)."""
    out: list = []
    for t in ts:
        if type(t) is torch.Tensor or not is_traceable_wrapper_subclass(t):
            out.append(t)
        else:
            get_plain_tensors(t, out=out)
    return out


def _build(lay: Layout, flat, k: int):
    inner = {}
    for a, m in lay.inners:
        if type(m) is Layout:
            inner[a], k = _build(m, flat, k)
        else:
            inner[a] = flat[k]
            k += 1
    t = lay.cls.__tensor_unflatten__(inner, lay.ctx, lay.size, lay.stride)
    if t.shape != lay.size or t.stride() != lay.stride:
        raise RuntimeError(
            f"compiled_bw: {lay.cls.__name__}.__tensor_unflatten__ returned shape "
            f"{list(t.shape)} stride {t.stride()}, expected {list(lay.size)} {lay.stride}")
    return t, k


def rebuild(layouts: tuple, flat) -> list:
    """layouts: per tensor, None (one dense tensor of `flat`) or a Layout (its n_flat inners)."""
    out = []
    k = 0
    for lay in layouts:
        if lay is None:
            out.append(flat[k])
            k += 1
        else:
            t, k = _build(lay, flat, k)
            out.append(t)
    assert k == len(flat), f"rebuild: {len(flat)} tensors for layouts needing {k}"
    return out


def _dense_meta(t: torch.Tensor):
    if type(t) is torch.Tensor or type(t) is FakeTensor:
        return (t.shape, t.stride(), t.dtype, t.device)
    return layout_of(t, _dense_meta)


def layouts_of(ts) -> tuple | None:
    """Per tensor of `ts` (real graph inputs, or trace-time graph outputs: fake tensors or
    subclasses of fake tensors): None (dense) or its Layout.  None overall when all are dense,
    the common case, so dense graphs carry no per-step work.  Raises SubclassUnsupported."""
    lays = tuple(None if type(t) in _DENSE else layout_of(t, _dense_meta) for t in ts)
    return lays if any(lay is not None for lay in lays) else None


PLAIN = (torch.Tensor, torch.nn.Parameter)     # tensor types that are not subclasses here
_DENSE = (*PLAIN, FakeTensor)
_PLAIN_OR_FAKE = (torch.Tensor, FakeTensor)
_PYTHON_KEY = torch_autograd.DispatchKey.Python


def python_dispatch(t: torch.Tensor) -> bool:
    """t is a `__torch_dispatch__` subclass (a fake tensor is not): eager's `is_python_dispatch`."""
    return type(t) not in _PLAIN_OR_FAKE and torch_autograd.dispatch_keys(t).has(_PYTHON_KEY)
