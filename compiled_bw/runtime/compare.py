"""How a grad differs from a reference grad, in words (runtime/verify.py and the repro scripts
of runtime/repro.py compare with it).

Consumes two tensors (or Nones); produces None when they are equal within TOL of their dtype,
else one sentence naming the first difference (None-ness, dtype, shape, layout, strides,
values).
"""
from __future__ import annotations

import torch

# per dtype: (rtol, atol) of a value comparison
TOL = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5),
       torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3),
       torch.complex64: (1e-4, 1e-5), torch.complex128: (1e-7, 1e-7)}


def differs(ref, ours, where: str, them: str = "eager autograd's", meta=None) -> str | None:
    """The first way `ours` differs from `ref` (a reference grad), in words; None: equal.
    meta: the tensor whose dtype, shape and strides are the reference's (default: ref)."""
    if (ref is None) != (ours is None):
        return (f"{where} is {'None' if ours is None else 'a tensor'}; {them} is "
                f"{'None' if ref is None else 'a tensor'}")
    if ref is None:
        return None
    m = ref if meta is None else meta
    where = f"{where} ({m.dtype} {list(m.shape)})"
    for name in ("dtype", "shape", "layout"):
        if getattr(m, name) != getattr(ours, name):
            return f"{where} has {name} {getattr(ours, name)}; {them} has {getattr(m, name)}"
    if m.layout == torch.strided and m.stride() != ours.stride():
        return f"{where} has strides {ours.stride()}; {them} has {m.stride()}"
    a, b = (ref.to_dense(), ours.to_dense()) if ref.layout != torch.strided else (ref, ours)
    rtol, atol = TOL.get(ref.dtype, (0.0, 0.0))
    if (a.dtype.is_floating_point or a.dtype.is_complex) and type(a) is torch.Tensor and \
            torch.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True):
        return None     # (assert_close, for the message only: ~0.3 ms a tensor)
    try:
        torch.testing.assert_close(b, a, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if "difference" in ln.lower()]
        return f"{where} differs from {them} ({'; '.join(lines[:2]) or 'values'})"
    return None
