"""validate_outputs (ENGINE.md 3), for our engine: trace time (fake tensors) and run time.

Consumes one node's output grads and the input metadata of the nodes its edges point to;
produces the grads the eager engine would pass on: invalid-edge grads unchecked, broadcast
shapes `sum_to`'d, dtypes cast.  Anything eager would reject raises ValidateError with
eager's message (the trace turns that into a fallback, so eager raises it for real).
"""
from __future__ import annotations

import torch

from .subclass import python_dispatch


class ValidateError(RuntimeError):
    pass


def _expandable(expected: torch.Size, got: torch.Size) -> bool:
    if len(expected) > len(got):
        return False
    for s, t in zip(reversed(expected), reversed(got), strict=False):
        if s != 1 and s != t:
            return False
    return True


def validate_outputs(name: str, outs, edges, in_meta) -> list:
    """edges: tuple of (child index | -1, input_nr); in_meta: per node, per slot metadata."""
    if len(outs) != len(edges):
        raise ValidateError(
            f"Function {name} returned an invalid number of gradients - expected "
            f"{len(edges)}, but got {len(outs)}")
    return validate_metas(name, outs, [None if c < 0 else in_meta[c][nr] for c, nr in edges])


def validate_metas(name: str, outs, metas) -> list:
    """metas: per output, the input metadata of the slot its edge points to, None for an
    invalid edge (what an opaque call's site holds: the signature fixes it)."""
    if len(outs) != len(metas):
        raise ValidateError(
            f"Function {name} returned an invalid number of gradients - expected "
            f"{len(metas)}, but got {len(outs)}")
    res = []
    for i in range(len(outs)):
        g, meta = outs[i], metas[i]
        if meta is None or g is None:   # 3.2: unchecked; post-hooks still see it (not sent on)
            res.append(g)
            continue
        shape, dtype, device = meta[0], meta[1], meta[2]
        # (ranks first: torch.Size compares elements before lengths, and with symbolic sizes
        # each comparison is a guard of the graph -- [s0*s1, 64] vs (64,) would guard
        # s0*s1 == 64 where the two were equal by chance)
        same_shape = g.dim() == len(shape) and g.shape == shape
        if len(meta) == 3 and g.dtype == dtype and g.device == device and same_shape:
            res.append(g)           # nothing to check or change (the common case)
            continue
        if not same_shape:
            if not _expandable(shape, g.shape):
                raise ValidateError(
                    f"Function {name} returned an invalid gradient at index {i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(shape)}")
            g = g.sum_to_size(shape)
        if g.dtype != dtype and not (g.dtype.is_floating_point or
                                     dtype.is_complex == g.dtype.is_complex):
            raise ValidateError(f"Function {name} returned an invalid gradient at index {i}"
                                f" - dtype {g.dtype} cannot be cast to {dtype}")
        want = meta[3] if len(meta) > 3 else dtype     # a leaf's grad_dtype (saved.input_meta)
        if want is not None and g.dtype != want:
            g = g.to(want)
        # eager skips the check for a __torch_dispatch__ subclass grad or input (ENGINE.md 3.6);
        # `_input_metadata` does not say in Python whether the input was one (docs/semantics.md: a 0-dim
        # dense grad on another device than a subclass input is moved; eager does not)
        if g.device != device and not python_dispatch(g):
            if g.dim() == 0:
                g = g.to(device)
            else:
                raise ValidateError(
                    f"Function {name} returned an invalid gradient at index {i} - expected "
                    f"device {device} but got {g.device}")
        res.append(g)
    return res
