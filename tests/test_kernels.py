"""The Triton kernels of kernels/: their own tests under Triton's interpreter (a subprocess
with TRITON_INTERPRET=1: kernel vs torch reference, bit for bit), the ops as `make_fx` and
Inductor see them, and each format's round-trip error bound on the reference path."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernels import interpreter_unsupported, path_for
from kernels.dequantize_absmax import dequantize_absmax, dequantize_reference
from kernels.quantize_absmax import QMAX, quantize_absmax, quantize_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")


@needs_triton
def test_kernels_match_their_references_under_the_interpreter():
    if (why := interpreter_unsupported()) is not None:
        pytest.skip(why)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "kernels", "test", "--device", "cpu"], cwd=ROOT, env=env, check=False,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "path: triton-interpret" in r.stdout, r.stdout     # the kernels ran, not the references
    assert "kernels.quantize_absmax: ok" in r.stdout and "kernels.dequantize_absmax: ok" in r.stdout


def test_without_the_interpreter_cpu_tensors_take_the_reference():
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("TRITON_INTERPRET is set in this process")
    assert path_for(torch.device("cpu")) == "torch"
    x = torch.randn(3, 40)
    q, s = quantize_absmax(x, 40, torch.int8)
    rq, rs = quantize_reference(x, 40, torch.int8)
    assert torch.equal(q, rq) and torch.equal(s, rs)


def test_ops_are_single_nodes_for_make_fx():
    def f(x):
        q, s = quantize_absmax(x, 16, torch.float8_e4m3fn)
        return dequantize_absmax(q, s, 16, torch.float32)
    gm = make_fx(f)(torch.randn(4, 16))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "compiled_bw_kernels.quantize_absmax.default" in targets, targets
    assert "compiled_bw_kernels.dequantize_absmax.default" in targets, targets


def test_inductor_compiles_the_ops():
    def f(x):
        q, s = quantize_absmax(x, 32, torch.int8)
        return dequantize_absmax(q, s, 32, torch.float32) * 2
    x = torch.randn(8, 32)
    torch._dynamo.reset()
    out = torch.compile(f, backend="inductor", fullgraph=True)(x)
    torch.testing.assert_close(out, f(x), rtol=0, atol=0)


def _group_scale(s, group, shape):
    n = torch.Size(shape).numel()
    return s[torch.arange(n) // group].view(shape)


@pytest.mark.parametrize("group", [64, 7, 64 * 5])
@pytest.mark.parametrize("dtype", list(QMAX))
def test_round_trip_error_bound(dtype, group):
    """int8: |x - x'| <= scale / 2 (half a step); e4m3: <= 2**-4 |x| + 2**-10 scale (half an ulp
    of 3 mantissa bits; subnormals).  And the bound is not loose: the worst error is within
    a factor 2 of it (a test that a no-op quantizer would pass is no test)."""
    torch.manual_seed(0)
    x = torch.randn(5, 64) * torch.logspace(-2, 2, 64)
    q, s = quantize_reference(x, group, dtype)
    back = dequantize_reference(q, s, group, torch.float32)
    scale = _group_scale(s, group, x.shape)
    bound = scale / 2 if dtype == torch.int8 else 2**-4 * x.abs() + 2**-10 * scale
    excess = ((back - x).abs() / bound).max().item()
    assert excess <= 1.0 + 1e-6, f"{dtype} group {group}: error {excess:.3f}x its bound"
    assert excess > 0.5, f"{dtype} group {group}: error only {excess:.3f}x its bound (no rounding?)"
    assert q.dtype == dtype and s.numel() == -(-x.numel() // group)


def test_zero_group_and_non_finite_inputs():
    x = torch.zeros(2, 8)
    x[1, 3] = float("inf")
    q, s = quantize_reference(x, 8, torch.int8)
    back = dequantize_reference(q, s, 8, torch.float32)
    assert torch.equal(back[0], torch.zeros(8)), "a zero group comes back as zeros"
    assert back[1].isnan().all(), "a group holding inf comes back as nan, never finite"
