"""Absmax-scaled quantize to fp8 e4m3 or int8, per group of G contiguous elements, one launch.

Consumes a tensor x (any float dtype, any shape; read in memory order of `x.contiguous()`),
a group size G (a row: G = x.shape[-1]; a block: any G; the whole tensor: G = x.numel()) and a
target dtype (torch.float8_e4m3fn or torch.int8).  Produces q (x's shape, the target dtype) and
scale (float32, one per group, ceil(numel / G) of them) with x ~= q.float() * scale[group]:

    scale = absmax(group) / QMAX        (QMAX: 448 for e4m3, 127 for int8; a zero group: 0)
    q     = round(clamp(x / scale, -QMAX, QMAX))    (round half to even, as torch's casts)

One program per group: a first loop over the group finds its absmax, a second casts (the group
is read twice, from cache for rows and blocks).  Error bound (tests): |x - deq(q)| <=
scale / 2 for int8 (half a step), and <= 2**-4 * |x| + 2**-10 * scale for e4m3 (3 mantissa bits:
half an ulp relative; the second term: its subnormals).  Non-finite inputs are not represented:
a group holding inf or nan comes back as nan (never as a finite wrong value).

The kernel rounds in float32 before its cast (integer round-to-nearest-even on the bits for
e4m3), so the cast itself is exact: Triton's interpreter (triton 3.9) drops the carry when a
float32 -> e4m3 rounding crosses a power of two (1.99 -> 1.0), and with this the kernel gives
bit-identical results to the reference on every path.

Run: `TRITON_INTERPRET=1 python -m kernels test` (CPU) or `python -m kernels bench` (GPU).
"""
from __future__ import annotations

import torch

from . import TRITON, launchable, path_for

QMAX = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}
BLOCK = 1024


def _group_count(n: int, group: int) -> int:
    return max(1, -(-n // group))


def _check(x: torch.Tensor, group: int, dtype: torch.dtype) -> None:
    if dtype not in QMAX:
        raise ValueError(f"quantize_absmax: dtype {dtype} not supported (expected one of {list(QMAX)})")
    if group < 1:
        raise ValueError(f"quantize_absmax: group size {group} must be >= 1")
    if not x.is_floating_point():
        raise ValueError(f"quantize_absmax: x has dtype {x.dtype}; expected a floating dtype")


# --- the torch reference -----------------------------------------------------------------
def quantize_reference(x: torch.Tensor, group: int, dtype: torch.dtype):
    """(q, scale) in plain torch: what the kernel computes, bit for bit."""
    _check(x, group, dtype)
    n = x.numel()
    ng = _group_count(n, group)
    flat = x.contiguous().view(-1).float()
    pad = ng * group - n
    g = (torch.nn.functional.pad(flat, (0, pad)) if pad else flat).view(ng, group)
    amax = g.abs().amax(dim=1)
    qmax = QMAX[dtype]
    scale = amax / qmax
    inv = torch.where(amax > 0, qmax / amax, torch.zeros_like(amax))
    y = (g * inv[:, None]).clamp(-qmax, qmax)
    q = y.round() if dtype == torch.int8 else y
    q = q.to(dtype).view(-1)[:n].view(x.shape)
    return q, scale


# --- the Triton kernel ---------------------------------------------------------------------
if TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _rne(y):
        """Round half to even (floor(y + 0.5) is exact for |y| < 2**22)."""
        r = tl.floor(y + 0.5)
        tie = (r - y) == 0.5
        odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
        return tl.where(tie & odd, r - 1.0, r)

    @triton.jit
    def _round_e4m3(y):
        """y (float32, |y| <= 448) rounded to the nearest e4m3 value, half to even."""
        b = y.to(tl.int32, bitcast=True)
        lsb = (b >> 20) & 1
        b = (b + 0x7FFFF + lsb) & -1048576          # keep 3 of 23 mantissa bits
        normal = b.to(tl.float32, bitcast=True)
        sub = _rne(tl.abs(y) * 512.0) * (1.0 / 512.0)  # e4m3 subnormals: steps of 2**-9
        sub = (sub.to(tl.int32, bitcast=True) | (b & -2147483648)).to(tl.float32, bitcast=True)
        return tl.where(tl.abs(y) < 0.015625, sub, normal)     # (the sign kept: -0.0 too)

    @triton.jit
    def quantize_absmax_kernel(x_ptr, q_ptr, scale_ptr, n, group,
                               QMAX: tl.constexpr, IS_INT: tl.constexpr, BLOCK: tl.constexpr):
        g = tl.program_id(0)
        start = g.to(tl.int64) * group
        lanes = tl.arange(0, BLOCK)
        amax = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, group, BLOCK):
            idx = start + off + lanes
            m = (off + lanes < group) & (idx < n)
            v = tl.load(x_ptr + idx, mask=m, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(v), propagate_nan=tl.PropagateNan.ALL)
        a = tl.max(amax, axis=0)
        a = tl.where(tl.sum((amax != amax).to(tl.int32), axis=0) > 0, float("nan"), a)  # nan stays
        tl.store(scale_ptr + g, a / QMAX)
        inv = tl.where(a > 0, QMAX / tl.where(a > 0, a, 1.0), 0.0)
        for off in range(0, group, BLOCK):
            idx = start + off + lanes
            m = (off + lanes < group) & (idx < n)
            v = tl.load(x_ptr + idx, mask=m, other=0.0).to(tl.float32) * inv
            v = tl.minimum(tl.maximum(v, -QMAX), QMAX)
            if IS_INT:
                v = _rne(v)
            else:
                v = _round_e4m3(v)
            tl.store(q_ptr + idx, v.to(q_ptr.dtype.element_ty), mask=m)

    from torch.library import triton_op

    @triton_op("compiled_bw_kernels::quantize_absmax", mutates_args={})
    def quantize_absmax(x: torch.Tensor, group: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The op: the kernel where Triton runs for x's device, else the reference."""
        if path_for(x.device) == "torch":
            return quantize_reference(x, group, dtype)
        _check(x, group, dtype)
        xc = x.contiguous()
        n = xc.numel()
        ng = _group_count(n, group)
        q = torch.empty(x.shape, dtype=dtype, device=x.device)
        scale = torch.empty(ng, dtype=torch.float32, device=x.device)
        block = min(BLOCK, triton.next_power_of_2(max(1, min(group, n))))
        launchable(quantize_absmax_kernel)[(ng,)](
            xc, q, scale, n, group, QMAX=QMAX[dtype], IS_INT=dtype == torch.int8, BLOCK=block)
        return q, scale
else:
    @torch.library.custom_op("compiled_bw_kernels::quantize_absmax", mutates_args=())
    def quantize_absmax(x: torch.Tensor, group: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The op without triton: the reference."""
        return quantize_reference(x, group, dtype)

    @quantize_absmax.register_fake
    def _(x, group, dtype):
        ng = _group_count(x.numel(), group)
        return x.new_empty(x.shape, dtype=dtype), x.new_empty(ng, dtype=torch.float32)


# --- the test ------------------------------------------------------------------------------
CASES = [((4, 100), 100), ((3, 7, 33), 33), ((1000,), 128), ((5, 2000), 2000), ((2, 9), 18),
         ((0, 4), 4)]


def test(device: str = "cpu") -> None:
    """Kernel vs reference, bit for bit (q and scale), on rows, blocks (with a short last
    block), whole tensors, groups longer than BLOCK, an all-zero group and fp16/bf16 inputs."""
    torch.manual_seed(0)
    for shape, group in CASES:
        for in_dtype in (torch.float32, torch.bfloat16):
            x = (torch.randn(shape) * torch.logspace(-3, 3, shape[-1])).to(device, in_dtype) \
                if shape[-1] else torch.randn(shape, device=device, dtype=in_dtype)
            if x.numel():
                x.view(-1)[:group] = 0.0                 # a zero group
            for dtype in QMAX:
                q, s = quantize_absmax(x, group, dtype)
                rq, rs = quantize_reference(x, group, dtype)
                assert q.dtype == dtype and q.shape == x.shape, (q.dtype, q.shape)
                torch.testing.assert_close(s, rs, rtol=0, atol=0)
                assert torch.equal(q.view(torch.uint8) if dtype != torch.int8 else q,
                                   rq.view(torch.uint8) if dtype != torch.int8 else rq), \
                    f"quantize_absmax {shape} group {group} {in_dtype}->{dtype}: q differs from the reference"
    for bad in (float("nan"), float("inf"), -float("inf")):     # a non-finite group: all nan back
        x = torch.randn(3, 40, device=device)
        x[1, 5] = bad
        for dtype in QMAX:
            q, s = quantize_absmax(x, 40, dtype)
            assert s[1].isinf() or s[1].isnan(), (bad, dtype, s)
            assert s[0].isfinite() and s[2].isfinite(), (bad, dtype, s)


# --- the benchmark ---------------------------------------------------------------------------
def bench(device: str = "cuda") -> list:
    """GB/s of the kernel and of the reference (read + write), rows of 4096, per target dtype."""
    rows = []
    for m in (1024, 8192, 32768):
        x = torch.randn(m, 4096, device=device, dtype=torch.bfloat16)
        moved = x.numel() * (x.element_size() + 1) + m * 4
        for dtype in QMAX:
            for name, fn in (("triton", quantize_absmax), ("torch", quantize_reference)):
                ms = _time_ms(lambda fn=fn, dtype=dtype, x=x: fn(x, 4096, dtype), device)
                rows.append(("quantize_absmax", name, m, str(dtype), ms, moved / ms / 1e6))
    return rows


def _time_ms(fn, device: str) -> float:
    if device == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn)
    import time
    fn()
    t = time.perf_counter()
    for _ in range(3):
        fn()
    return (time.perf_counter() - t) / 3 * 1e3
