"""GroupedMmBackward0's formula on fake tensors of any dtype: the grads of a mixture of experts.

Consumes a GroupedMmBackward0 node's grad, its saved sizes/strides and saved tensors (self,
mat2, offs: placeholders of the trace); produces its two grads, traced as calls of
`compiled_bw::grouped_mm` (torch._grouped_mm, whose fake kernel takes every dtype), or raises
NotOurs where our copy does not hold (the node then runs as before: the real node's formula,
or an opaque call of the real node).

Our copy of derivatives.yaml's formula (`_grouped_mm_mat1_backward` /
`_grouped_mm_mat2_backward`) for the 2-D self, 3-D mat2 with offsets case (graph/fake_ops.py
Note [Grouped mm on fake tensors]: torch's meta kernel rejects float32): grad_self =
grouped_mm(grad, mat2ᵀ), grad_mat2 = grouped_mm(selfᵀ, grad) (one (K, N) block per group), and
an operand that was column-major (a transposed contiguous tensor: `w.transpose(-2, -1)`) gets
its grad column-major, computed as the transpose of the transposed product, as the C++ formula
does.  Checked bitwise, values and strides, against the real node for both layouts of both
operands (tests/test_core.py).  Any other case -- another rank, no offsets, an out_dtype (the
grad's dtype differs from self's), a layout that is neither plainly row- nor column-major -- is
NotOurs.
"""
from __future__ import annotations

from ..calls.opaque import contiguous_strides
from ..graph.fake_ops import GROUPED_MM, NotOurs

__all__ = ["NotOurs", "grads"]


def _layout(sizes, strides, what: str) -> bool:
    """True for a column-major (transposed contiguous) operand, False for a row-major one."""
    sizes, strides = tuple(sizes), tuple(strides)
    if strides == contiguous_strides(sizes):
        return False
    col = list(contiguous_strides((*sizes[:-2], sizes[-1], sizes[-2])))
    col[-2], col[-1] = col[-1], col[-2]
    if strides == tuple(col):
        return True
    raise NotOurs(f"{what} is neither row- nor column-major (strides {strides})")


def grads(g, values: dict, saved, need) -> list:
    """[grad of self, grad of mat2, None, None] (offs and bias have none); saved(attr) gives
    the saved tensor attr."""
    a_sizes, a_strides = values["self_sym_sizes"], values["self_sym_strides"]
    b_sizes, b_strides = values["mat2_sym_sizes"], values["mat2_sym_strides"]
    if len(a_sizes) != 2 or len(b_sizes) != 3:
        raise NotOurs(f"a {len(a_sizes)}-D self and {len(b_sizes)}-D mat2 (only 2-D x 3-D)")
    # (eager saves mat2 only where self needs a grad, self only where mat2 does)
    offs = saved("offs")
    a = saved("self") if need[1] else None
    b = saved("mat2") if need[0] else None
    if any(t is not None and t.dtype != g.dtype for t in (a, b)):
        raise NotOurs(f"an operand's dtype is not the grad's {g.dtype} (an out_dtype)")
    out: list = [None] * len(need)
    op = GROUPED_MM
    if need[0]:
        if _layout(a_sizes, a_strides, "self"):
            out[0] = op(b, g.transpose(-2, -1), offs).transpose(-2, -1)
        else:
            out[0] = op(g, b.transpose(-2, -1), offs)
    if need[1]:
        if _layout(b_sizes, b_strides, "mat2"):
            out[1] = op(g.transpose(-2, -1), a, offs).transpose(-2, -1)
        else:
            out[1] = op(a.transpose(-2, -1), g, offs)
    return out
