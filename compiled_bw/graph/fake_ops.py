"""Ops whose torch meta kernel rejects what their CPU kernel computes, as compiled_bw ops whose
fake kernels take it: what a trace on fake tensors calls instead.

Consumes `torch._grouped_mm` calls of traces on fake tensors (GroupedMmBackward0's formula,
trace/grouped_mm.py; a checkpointed region's recomputation, checkpoint/recompute.py); produces
`compiled_bw::grouped_mm` (torch._grouped_mm, its fake kernel taking every dtype), NotOurs,
and GroupedMmOnFakes, a dispatch mode that routes a forward's `_grouped_mm` to that op.

Note [Grouped mm on fake tensors]
Hugging Face's MoE experts (Mixtral, Qwen2-MoE, ...) call `torch._grouped_mm(x, w, offs)`:
x (tokens sorted by expert, 2-D), w (experts' weights, 3-D, often a transposed view) and offs
(cumulative token counts).  On the CPU the kernel takes float32, but torch's meta kernel
demands bf16 (torch 2.13), so a trace on fake tensors raised: GroupedMmBackward0's formula (the
node ran opaquely: trace/grouped_mm.py has our copy of it), and the recomputation of a
checkpointed MoE layer (the whole region ran hooked, node by node).  `compiled_bw::grouped_mm`
is torch._grouped_mm (its real kernel calls it) for the 2-D x 3-D, 2-D x 2-D and 3-D x 2-D
cases with offsets, no bias and no out_dtype; its fake kernel gives the output's shape in the
operands' dtype.  It returns torch._grouped_mm's output made contiguous (it is: one block per
group), the layout the fake kernel promises, so Inductor, which calls it as an extern kernel,
reads it as it is.  In a recomputation GroupedMmOnFakes routes such a `_grouped_mm` (below
autograd: the node the forward records is eager's) to it where the operands are not bf16; the
values are eager's kernel's, bit for bit.
"""
from __future__ import annotations

import torch

from ..torchapi.dynamo import TorchDispatchMode

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("grouped_mm(Tensor a, Tensor b, Tensor offs) -> Tensor")


class NotOurs(Exception):
    """Our copy of a formula does not cover this node; the message says why."""


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


GROUPED_MM = torch.ops.compiled_bw.grouped_mm.default
_ATEN_GROUPED_MM = torch.ops.aten._grouped_mm.default


def _routed(a, b, offs=None, bias=None, out_dtype=None):
    """compiled_bw::grouped_mm's result for an aten._grouped_mm call it covers, else None."""
    if offs is None or bias is not None or a.dtype == torch.bfloat16 or b.dtype != a.dtype \
            or out_dtype not in (None, a.dtype) or (a.dim(), b.dim()) != (2, 3):
        return None
    return GROUPED_MM(a, b, offs)


class GroupedMmOnFakes(TorchDispatchMode):
    """Inside a trace on fake tensors: a forward's torch._grouped_mm that torch's meta kernel
    would reject runs as compiled_bw::grouped_mm (Note [Grouped mm on fake tensors])."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _ATEN_GROUPED_MM:
            out = _routed(*args, **kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)
