"""compress_activations: saved activations packed to fp8 e4m3 / int8 / bf16 in the forward and
unpacked in the backward -- what passes through, the grads' error bound against uncompressed
eager, and compiled_bw + compression against eager + compression (same grads within float
tolerance, same pack / unpack counts, nothing falls back: strict=True)."""
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import compiled_bw
from compiled_bw.compress import pack_activation, unpack_activation
from tests.differential import differential, grads

FORMATS = [torch.float8_e4m3fn, torch.int8, torch.bfloat16]
# Per-parameter relative grad error (L2) against uncompressed eager on _mlp(), every saved
# activation compressed: the stated bound (measured: fp8 <= 1.9e-2, int8 <= 8.4e-3,
# bf16 <= 1.3e-3 over the granularities below).
GRAD_BOUND = {torch.float8_e4m3fn: 4e-2, torch.int8: 1.5e-2, torch.bfloat16: 4e-3}


def _mlp(batch=128):
    return (nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.Tanh(),
                          nn.Linear(256, 10)), torch.randn(batch, 64))


def _step(dtype, granularity, min_bytes=0):
    def step(state):
        m, x = state
        m.zero_grad(set_to_none=True)
        with compiled_bw.compress_activations(dtype, min_bytes=min_bytes, granularity=granularity) as c:
            loss = m(x).pow(2).mean()
        loss.backward()
        return grads(m), (c.packs, c.compressed)
    return step


def _one_step(dtype=None, granularity="row", batch=128):
    torch.manual_seed(0)
    m, x = _mlp(batch)
    if dtype is None:
        m(x).pow(2).mean().backward()
        return [p.grad for p in m.parameters()], None
    return _step(dtype, granularity)((m, x))


@pytest.mark.parametrize("granularity", ["row", "tensor", 32])
@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_grads_within_the_stated_bound(dtype, granularity):
    ref, _ = _one_step()
    got, (packs, compressed) = _one_step(dtype, granularity)
    assert (packs, compressed) == (8, 4), (packs, compressed)     # Tanh's output: packed once
    errs = [((g - r).norm() / r.norm()).item() for g, r in zip(got, ref, strict=True)]
    assert max(errs) <= GRAD_BOUND[dtype], f"{dtype} {granularity}: relative grad errors {errs}"
    assert min(errs) > 0, "no grad changed: nothing was compressed"


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_compiled_equals_eager_with_compression(dtype):
    st = differential(_mlp, _step(dtype, "row"), steps=3, strict=True)
    assert st.fallbacks == 0


def test_compiled_equals_eager_with_compression_inductor():
    differential(_mlp, _step(torch.float8_e4m3fn, 64), steps=2, backend="inductor", strict=True)


def test_threshold_and_explain_say_what_ran():
    torch.manual_seed(0)
    m, x = _mlp()
    compiled_bw.reset()
    with compiled_bw.enable(backend="eager", strict=True):
        with compiled_bw.compress_activations(torch.int8, min_bytes=100_000) as c:
            loss = m(x).pow(2).mean()
        loss.backward()
    # over the threshold: the 128x256 float32 activations (131072 bytes): GELU's input and
    # output, and Tanh's output, saved twice (by Tanh and by the next Linear) and packed once;
    # the input x, the weights' views and the 128x10 output pass through
    assert (c.packs, c.compressed, c.shared) == (8, 3, 1), c
    text = compiled_bw.explain()
    want = "torch reference" if os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "interpreter"
    assert ("compress_activations(torch.int8, row): 3 of 8 saved tensors compressed (1 saved "
            "again, packed once)") in text, text
    assert want in text, text


class _WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(256, 256)
        self.register_buffer("buf", torch.randn(256, 256))


def test_parameters_buffers_and_small_or_integer_tensors_pass_through():
    m = _WithBuffer()
    act = m.lin(torch.randn(256, 256))
    kw = {"dtype": torch.int8, "min_bytes": 1024, "granularity": "row"}
    for t in (m.lin.weight, m.lin.weight.t(), m.lin.weight[:, :128], m.buf, m.buf.view(-1),
              torch.randn(256, 256), torch.randint(0, 9, (256, 256)), act[:4, :4].clone(),
              act.bfloat16().to(torch.int8)):
        assert pack_activation(t, **kw) is t, f"{t.shape} {t.dtype} was compressed"
    packed = pack_activation(act, **kw)
    assert isinstance(packed, tuple) and packed[0].dtype == torch.int8, "an activation was not compressed"
    assert pack_activation(act.bfloat16(), **{**kw, "dtype": torch.bfloat16}).dtype == torch.bfloat16
    back = unpack_activation(packed)
    assert back.dtype == act.dtype and back.shape == act.shape and not back.requires_grad


def test_parameters_keep_their_values_and_grads_flow():
    torch.manual_seed(0)
    m, x = _mlp()
    before = [p.detach().clone() for p in m.parameters()]
    _step(torch.float8_e4m3fn, "row")((m, x))
    assert all(torch.equal(p, b) for p, b in zip(m.parameters(), before, strict=True))
    assert all(p.grad is not None for p in m.parameters())


def test_bad_arguments_name_what_is_accepted():
    with pytest.raises(ValueError, match=r"dtype torch\.float16 not supported"):
        with compiled_bw.compress_activations(torch.float16):
            pass
    with pytest.raises(ValueError, match="granularity 'col'"):
        with compiled_bw.compress_activations(torch.int8, granularity="col"):
            pass


@pytest.mark.skipif(not __import__("kernels").TRITON, reason="triton not installed")
def test_triton_kernels_give_the_reference_grads_under_the_interpreter():
    """The feature on the Triton path (interpreter) gives the torch path's grads bit for bit."""
    if (why := __import__("kernels").interpreter_unsupported()) is not None:
        pytest.skip(why)
    code = ("import torch, compiled_bw\n"
            "from tests.test_compress import _one_step\n"
            "for dt in (torch.float8_e4m3fn, torch.int8):\n"
            "    g, _ = _one_step(dt, 'tensor', batch=8)\n"
            "    torch.save(g, f'{sys.argv[1]}/{str(dt)[6:]}.pt')\n"
            "print(compiled_bw.compress.last_report())\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": root}
        r = subprocess.run([sys.executable, "-c", "import sys\n" + code, d], cwd=root, env=env,
                           capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Triton kernels (interpreter)" in r.stdout, r.stdout
        for dt in (torch.float8_e4m3fn, torch.int8):
            ours = torch.load(f"{d}/{str(dt)[6:]}.pt")
            ref, _ = _one_step(dt, 'tensor', batch=8)
            for a, b in zip(ours, ref, strict=True):
                assert torch.equal(a, b), f"{dt}: the Triton path's grads differ from the torch path's"


@pytest.mark.parametrize("kind", ["pointwise", "transformer", "cnn"])
@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_grads_within_the_stated_bound_on_each_benchmark_kind(kind, dtype):
    """Relative grad error per parameter, every activation compressed, compiled_bw vs
    uncompressed eager, on a small model of each benchmark kind (benchmarks/grad_error.py);
    compiled_bw adds nothing to eager-with-the-same-compression's error."""
    from benchmarks.grad_error import SMALL, bound, grad_errors
    errs, own, c = grad_errors(SMALL[kind], dtype)
    assert c.compressed > 0 and len(errs) >= 3, (c.report(), errs)
    assert max(errs.values()) <= bound(kind, dtype), f"{kind} {dtype}: relative grad errors {errs}"
    assert min(errs.values()) > 0, "no grad changed: nothing was compressed"
    assert max(own.values()) <= 1e-5, f"compiled_bw differs from eager with compression: {own}"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_training_with_compression_tracks_uncompressed(dtype):
    """benchmarks/training_curve.py, shortened to 30 steps: the compressed run's losses stay
    within 2% of the uncompressed run's at every step (nothing falls back: strict)."""
    from benchmarks.training_curve import train
    ref, got = train(None, steps=30), train(dtype, steps=30)
    assert ref[-1] < 0.5 * ref[0], f"the task does not train: {ref}"
    worst = max(abs(g / r - 1) for g, r in zip(got, ref, strict=True))
    assert 0 < worst <= 0.02, f"{dtype}: losses {got} vs {ref}"


def test_a_tensor_saved_twice_is_packed_once():
    """tanh's output is saved by TanhBackward (its result) and by MmBackward (its input): one
    quantize, both saves share it, and the grads are those of plain saved_tensors_hooks
    packing it twice (bit for bit).  After an in-place change the tensor is packed anew."""
    from kernels import quantize_absmax as qa
    torch.manual_seed(0)
    x = torch.randn(64, 128, requires_grad=True)
    w = torch.randn(128, 32, requires_grad=True)
    kw = {"dtype": torch.int8, "min_bytes": 0, "granularity": "row"}

    def run(ctx):
        x.grad = w.grad = None
        with ctx:
            y = torch.tanh(x * 2)
            loss = (y @ w).pow(2).sum()
        loss.backward()
        return x.grad.clone(), w.grad.clone()

    calls = []
    real = qa.quantize_absmax

    def counting(*a, **k):
        calls.append(a[0].shape)
        return real(*a, **k)
    qa.quantize_absmax, before = counting, len(calls)
    try:
        with compiled_bw.compress_activations(**kw) as c:
            y = torch.tanh(x * 2)
            loss = (y @ w).pow(2).sum()
        assert (c.packs, c.compressed, c.shared, len(calls) - before) == (4, 2, 1, 2), (c, calls)
        with compiled_bw.enable(backend="eager", strict=True):
            loss.backward()
        ours = x.grad.clone(), w.grad.clone()
        plain = run(torch.autograd.graph.saved_tensors_hooks(
            lambda t: pack_activation(t, **kw), unpack_activation))
        assert len(calls) - before == 5, calls      # plain hooks: tanh's output packed twice
        assert all(torch.equal(a, b) for a, b in zip(ours, plain, strict=True))
        with compiled_bw.compress_activations(**kw) as c:
            y = torch.tanh(x * 2)
            y.exp()                     # saves exp's output, not y
            y.add_(1)
            (y @ w).sum()
        assert c.shared == 0, c
    finally:
        qa.quantize_absmax = real
