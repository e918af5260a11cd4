"""Dequantize what quantize_absmax.py made: x = q.float() * scale[group], in the caller's dtype.

Consumes q (float8_e4m3fn or int8, any shape, contiguous), scale (float32, one per group of
G contiguous elements of q), G and the dtype to produce (the activation's original dtype).
Produces a contiguous tensor of q's shape in that dtype.  One program per BLOCK elements
(a group may span programs: each element loads its group's scale), so it runs at memory speed
whatever G is.  Exact: e4m3 and int8 values are exact in float32, so the only rounding is the
product's (float32) and the cast to the output dtype; kernel and reference agree bit for bit.
For bf16 output the kernel rounds in float32 bits before its cast: Triton's interpreter
(triton 3.9) truncates float32 -> bf16 where torch rounds half to even.

Run: `TRITON_INTERPRET=1 python -m kernels test` (CPU) or `python -m kernels bench` (GPU).
"""
from __future__ import annotations

import torch

from . import TRITON, launchable, path_for

BLOCK = 1024


def dequantize_reference(q: torch.Tensor, scale: torch.Tensor, group: int, dtype: torch.dtype):
    """x in plain torch: what the kernel computes, bit for bit."""
    n = q.numel()
    ng = scale.numel()
    flat = q.contiguous().view(-1).float()
    if ng * group != n:                     # a short last group: pad it (no int64 index)
        flat = torch.nn.functional.pad(flat, (0, ng * group - n))
    out = (flat.view(ng, group) * scale[:, None]).view(-1)[:n]
    return out.to(dtype).view(q.shape)


if TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def dequantize_absmax_kernel(q_ptr, scale_ptr, out_ptr, n, group, OUT_BF16: tl.constexpr,
                                 BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = idx < n
        q = tl.load(q_ptr + idx, mask=m).to(tl.float32)
        s = tl.load(scale_ptr + idx // group, mask=m, other=0.0)
        x = q * s
        if OUT_BF16:    # round to bf16 in float32 bits (half to even): the cast is then exact
            b = x.to(tl.int32, bitcast=True)
            b = (b + 0x7FFF + ((b >> 16) & 1)) & -65536
            x = b.to(tl.float32, bitcast=True)
        tl.store(out_ptr + idx, x.to(out_ptr.dtype.element_ty), mask=m)

    from torch.library import triton_op

    @triton_op("compiled_bw_kernels::dequantize_absmax", mutates_args={})
    def dequantize_absmax(q: torch.Tensor, scale: torch.Tensor, group: int,
                          dtype: torch.dtype) -> torch.Tensor:
        """The op: the kernel where Triton runs for q's device, else the reference."""
        if path_for(q.device) == "torch":
            return dequantize_reference(q, scale, group, dtype)
        qc = q.contiguous()
        n = qc.numel()
        out = torch.empty(q.shape, dtype=dtype, device=q.device)
        launchable(dequantize_absmax_kernel)[(triton.cdiv(n, BLOCK),)](
            qc, scale, out, n, group, OUT_BF16=dtype == torch.bfloat16, BLOCK=BLOCK)
        return out
else:
    @torch.library.custom_op("compiled_bw_kernels::dequantize_absmax", mutates_args=())
    def dequantize_absmax(q: torch.Tensor, scale: torch.Tensor, group: int,
                          dtype: torch.dtype) -> torch.Tensor:
        """The op without triton: the reference."""
        return dequantize_reference(q, scale, group, dtype)

    @dequantize_absmax.register_fake
    def _(q, scale, group, dtype):
        return q.new_empty(q.shape, dtype=dtype)


def test(device: str = "cpu") -> None:
    """Kernel vs reference, bit for bit, for each quantized dtype and output dtype, rows,
    blocks with a short last one, groups longer than BLOCK; and the round trip's bound."""
    from .quantize_absmax import QMAX, quantize_absmax
    torch.manual_seed(0)
    for shape, group in (((4, 100), 100), ((1000,), 128), ((3, 1500), 1500), ((7, 5), 35), ((0, 3), 3)):
        x = torch.randn(shape, device=device)
        for qdtype in QMAX:
            q, s = quantize_absmax(x, group, qdtype)
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                out = dequantize_absmax(q, s, group, dtype)
                ref = dequantize_reference(q, s, group, dtype)
                assert out.dtype == dtype and out.shape == q.shape
                assert torch.equal(out, ref), f"dequantize_absmax {shape} {qdtype}->{dtype} differs"
            back = dequantize_absmax(q, s, group, torch.float32)
            scale = s[torch.arange(x.numel(), device=device) // group].view(shape)
            bound = scale / 2 if qdtype == torch.int8 else 2**-4 * x.abs() + 2**-10 * scale
            assert ((back - x).abs() <= bound * (1 + 1e-6)).all(), f"round trip {qdtype} over its bound"


def bench(device: str = "cuda") -> list:
    """GB/s of the kernel and of the reference (read + write), rows of 4096, bf16 out."""
    from .quantize_absmax import QMAX, _time_ms, quantize_absmax
    rows = []
    for m in (1024, 8192, 32768):
        x = torch.randn(m, 4096, device=device, dtype=torch.bfloat16)
        for qdtype in QMAX:
            q, s = quantize_absmax(x, 4096, qdtype)
            moved = q.numel() * 3 + s.numel() * 4
            for name, fn in (("triton", dequantize_absmax), ("torch", dequantize_reference)):
                ms = _time_ms(lambda fn=fn, q=q, s=s: fn(q, s, 4096, torch.bfloat16), device)
                rows.append(("dequantize_absmax", name, m, str(qdtype), ms, moved / ms / 1e6))
    return rows
