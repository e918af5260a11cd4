"""GroupedMmBackward0's formula on fake tensors of any dtype: the grads of a mixture of experts.

Consumes a GroupedMmBackward0 node's grad, its saved sizes/strides and saved tensors (self,
mat2, offs: placeholders of the trace); produces its two grads, traced as calls of
`compiled_bw::grouped_mm` (torch._grouped_mm, whose fake kernel takes every dtype), or raises
NotOurs where our copy does not hold (the node then runs as before: the real node's formula,
or an opaque call of the real node).

Note [Grouped mm on fake tensors]
Hugging Face's MoE experts (Mixtral, Qwen2-MoE, ...) call `torch._grouped_mm(x, w, offs)`:
x (tokens sorted by expert, 2-D), w (experts' weights, 3-D, often a transposed view) and offs
(cumulative token counts).  On the CPU the kernel takes float32, but torch's meta kernel
demands bf16, so the real node's formula raised on fake tensors and the node ran opaquely:
an opaque call, and a graph whose sizes could never become symbolic (the token count per
expert changes with every batch).  This is a copy of derivatives.yaml's formula
(`_grouped_mm_mat1_backward` / `_grouped_mm_mat2_backward`) for the 2-D self, 3-D mat2 with
offsets case: grad_self = grouped_mm(grad, mat2ᵀ), grad_mat2 = grouped_mm(selfᵀ, grad) (one
(K, N) block per group), and an operand that was column-major (a transposed contiguous
tensor: `w.transpose(-2, -1)`) gets its grad column-major, computed as the transpose of the
transposed product, as the C++ formula does.  Checked bitwise, values and strides, against
the real node for both layouts of both operands (tests/test_core.py).  Any other case --
another rank, no offsets, an out_dtype (the grad's dtype differs from self's), a layout that
is neither plainly row- nor column-major -- is NotOurs.
The op returns torch._grouped_mm's output made contiguous (it is: one block per group), the
layout its fake kernel promises, so Inductor, which calls it as an extern kernel, reads it
as it is.
"""
from __future__ import annotations

import torch

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("grouped_mm(Tensor a, Tensor b, Tensor offs) -> Tensor")


class NotOurs(Exception):
    """Our copy of the formula does not cover this node; the message says why."""


def _grouped_mm_impl(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten._grouped_mm.default(a, b, offs).contiguous()


_LIB.impl("grouped_mm", _grouped_mm_impl, "CompositeExplicitAutograd")


@torch.library.register_fake("compiled_bw::grouped_mm", lib=_LIB)
def _grouped_mm_fake(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    if a.dim() == 2 and b.dim() == 3:       # (M, K) x (G, K, N) -> (M, N)
        shape = (a.shape[0], b.shape[2])
    elif a.dim() == 2 and b.dim() == 2:     # (K, M) x (M, N) -> (G, K, N)
        shape = (offs.shape[0], a.shape[0], b.shape[1])
    elif a.dim() == 3 and b.dim() == 2:     # (G, K, N) x (N, M) -> (K, M)
        shape = (a.shape[1], b.shape[1])
    else:
        raise NotOurs(f"grouped_mm of a {a.dim()}-D and a {b.dim()}-D operand")
    return a.new_empty(shape)


def _contiguous(sizes) -> list:
    out, step = [], 1
    for n in reversed(sizes):
        out.append(step)
        step = step * max(n, 1)
    return out[::-1]


def _layout(sizes, strides, what: str) -> bool:
    """True for a column-major (transposed contiguous) operand, False for a row-major one."""
    sizes, strides = tuple(sizes), tuple(strides)
    if strides == tuple(_contiguous(sizes)):
        return False
    col = _contiguous((*sizes[:-2], sizes[-1], sizes[-2]))
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
    op = torch.ops.compiled_bw.grouped_mm.default
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
