"""Differential tests of the core capture: each program runs 3 steps under eager
autograd and under compiled_bw, every grad / returned value / error compared."""
import pytest
import torch
from differential import differential, grads
from functions import Double
from torch import nn

import compiled_bw

pytestmark = pytest.mark.both_backends


def module_program(make_model, make_input, loss_fn=lambda y: y.float().pow(2).mean()):
    def build():
        return make_model(), make_input()

    def step(state):
        m, x = state
        m.zero_grad(set_to_none=True)
        loss = loss_fn(m(x))
        loss.backward()
        return grads(m)
    return build, step


def test_mlp_counts_and_graph():
    build, step = module_program(
        lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
        lambda: torch.randn(5, 8))
    st = differential(build, step, steps=3)
    assert (st.captures, st.cache_hits) == (1, 2)
    code = compiled_bw.last_graph().code
    assert "aten.mm" in code and "threshold_backward" in code
    assert "compiled_bw.opaque" not in code
    # saved tensors are graph inputs: 1 root grad + 5 saved tensors
    placeholders = [n for n in compiled_bw.last_graph().graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 6


def test_conv_bn_pool():
    build, step = module_program(
        lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 4, 3), nn.AdaptiveAvgPool2d(1)),
        lambda: torch.randn(4, 3, 12, 12))
    differential(build, step)


def test_broadcasting_and_param_used_twice():
    def build():
        return [torch.randn(4, 1, 3, requires_grad=True), torch.randn(3, requires_grad=True),
                torch.randn(5, 3, requires_grad=True)]

    def step(ps):
        a, b, w = ps
        for p in ps:
            p.grad = None
        y = (a * b + w) * w - b          # w and b used twice, broadcast to (4, 5, 3)
        y.sum().backward()
        return grads(ps)
    differential(build, step)


def test_accumulate_into_existing_grad():
    def build():
        return [torch.randn(3, 4, requires_grad=True)]

    def step(ps):
        (x,) = ps
        (x.sin() * 2).sum().backward()   # .grad accumulates over steps
        return grads(ps)
    differential(build, step)


def test_multiple_roots_with_grad_tensors():
    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(ps):
        x, b = ps
        for p in ps:
            p.grad = None
        y1 = x * b
        y2 = (x + b).exp()
        torch.autograd.backward([y1, y2, y1], [torch.ones(3, 4), torch.full((3, 4), 0.5),
                                               torch.randn(3, 4)])
        return grads(ps)
    differential(build, step)


def test_grad_wrt_leaves_and_intermediate():
    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)]

    def step(ps):
        x, w = ps
        h = torch.tanh(x @ w)
        y = (h * h).sum()
        gx, gw, gh = torch.autograd.grad(y, [x, w, h])
        return [gx, gw, gh, x.grad, w.grad]
    differential(build, step)


def test_backward_inputs():
    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(ps):
        x, b = ps
        for p in ps:
            p.grad = None
        ((x * b).relu().sum()).backward(inputs=[b])
        return grads(ps)
    differential(build, step)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtypes(dtype):
    build, step = module_program(
        lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).to(dtype),
        lambda: torch.randn(5, 8, dtype=dtype))
    differential(build, step)


def test_mixed_dtype_cast_in_validate():
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, dtype=torch.float64, requires_grad=True)]

    def step(ps):
        a, b = ps
        for p in ps:
            p.grad = None
        (a * b).sum().backward()      # a's grad is computed in float64, cast to float32
        return grads(ps)
    differential(build, step)


def test_copyslices_inplace_on_view():
    def build():
        return [torch.randn(4, 5, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = x * 2
        y[1:3].mul_(x[0:2])           # in place on a view -> CopySlices
        y[:, 0].sigmoid_()
        y.sum().backward()
        return grads(ps)
    differential(build, step)


def test_noncontiguous_leaves_grad_strides():
    def build():
        return [torch.randn(5, 3).t().requires_grad_(), torch.randn(4, 6)[:, ::2].requires_grad_()]

    def step(ps):
        a, b = ps
        for p in ps:
            p.grad = None
        (a.exp().sum(1, keepdim=True) * b[:3]).sum().backward()
        return [p.grad for p in ps]   # strides compared: the layout contract
    differential(build, step)


def test_gather_scatter_index():
    def build():
        torch.manual_seed(1)
        return [torch.randn(6, 5, requires_grad=True), torch.randint(0, 5, (6, 3)),
                torch.tensor([0, 2, 2, 5])]

    def step(st):
        x, idx, rows = st
        x.grad = None
        g = x.gather(1, idx)
        s = torch.zeros(6, 5).scatter_add(1, idx, g * 2)
        i = x[rows] * s[rows]
        ia = x.index_select(0, rows).sum() + i.sum() + x[x > 0].sum()
        ia.backward()
        return [x.grad]
    differential(build, step)


def test_lstm():
    build, step = module_program(lambda: nn.LSTM(6, 8, num_layers=2, batch_first=True),
                                 lambda: torch.randn(3, 5, 6),
                                 loss_fn=lambda out: out[0].pow(2).mean())
    differential(build, step)


def test_multihead_attention():
    def build_mha():
        return nn.MultiheadAttention(16, 4, batch_first=True), torch.randn(2, 5, 16)

    def step_mha(state):
        m, x = state
        m.zero_grad(set_to_none=True)
        out, _ = m(x, x, x)
        out.pow(2).mean().backward()
        return grads(m)
    differential(build_mha, step_mha)


def test_transformer_encoder_layer_with_dropout():
    def build():
        return (nn.TransformerEncoderLayer(16, 4, 32, dropout=0.2, batch_first=True),
                torch.randn(2, 5, 16))

    def step(state):
        m, x = state
        m.zero_grad(set_to_none=True)
        m(x).pow(2).mean().backward()
        return grads(m)
    # dropout masks differ per step but are saved tensors: one capture serves all steps
    differential(build, step)


@pytest.mark.slow
def test_deep_chain_3000_ops():
    def build():
        return [torch.randn(8, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = x
        for _ in range(1000):
            y = (y * 0.999).sin() + 0.001
        y.sum().backward()
        return grads(ps)
    differential(build, step, steps=2)


def test_backward_twice_raises_eagers_error():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = (x.exp() * x).sum()
        y.backward()
        try:
            y.backward()
        except RuntimeError as e:
            return [x.grad, str(e)]
        return [x.grad, "no error"]
    # the second backward is an error case: eager raises it for us (recorded as a fallback)
    st = differential(build, step, fallbacks=3, strict=True)
    assert all("second time" in r for r in st.fallback_reasons)


def test_second_backward_outside_enable_raises():
    x = torch.randn(3, requires_grad=True)
    y = (x.exp() * x).sum()
    with compiled_bw.enable(strict=True):
        y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_twice():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return grads(ps)
    # retain_graph=True and False are two signatures: 2 captures, then hits
    differential(build, step, captures=2)


def test_two_losses_through_a_retained_trunk_are_captured_once_each():
    """Each loss's backward is captured once: the second's walk keys the trunk the same on the
    step the first was captured (slots installed) as on the steps it hit (no slots): walk/
    fastwalk.py Note [Node-local tensor ids]."""
    def build():
        torch.manual_seed(0)
        return [nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)),
                nn.Linear(4, 1), nn.Linear(4, 1)]

    def step(ms):
        trunk, head1, head2 = ms
        for m in ms:
            m.zero_grad(set_to_none=True)
        h = trunk(torch.randn(32, 8))
        head1(h).sum().backward(retain_graph=True)
        head2(h).pow(2).sum().backward()
        return [grads(m) for m in ms]
    differential(build, step, steps=4, captures=2)


def test_non_scalar_root_error():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        (x * 2).backward()
    differential(build, step, captures=0, allow_errors=True)


def test_unused_input_error_and_allow_unused():
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(ps):
        a, b = ps
        y = (a * 2).sum()
        r = torch.autograd.grad(y, [a, b], allow_unused=True, retain_graph=True)
        torch.autograd.grad(y, [a, b])     # raises eager's error
        return r
    st = differential(build, step, captures=1, fallbacks=3, strict=False, allow_errors=True)
    assert all("unused" in r for r in st.fallback_reasons)
    # a remembered failed capture is a fallback, not a cache hit: only steps 2, 3 hit
    assert (st.captures, st.cache_hits) == (1, 2), st


def test_remembered_failed_capture_counts_as_fallback_only():
    def build():
        return torch.randn(3, requires_grad=True)

    def step(x):
        y = (x * 2).sin().sum()
        x.requires_grad_(False)     # after the forward: eager's AccumulateGrad skips x
        y.backward()
        x.requires_grad_(True)
        return x.grad
    st = differential(build, step, steps=3, captures=0, fallbacks=3, strict=False)
    assert (st.cache_hits, len(st.fallback_reasons)) == (0, 3), st


def test_recapture_on_shape_change_and_cache_limit():
    """runtime/cache.py Note [Cache policy]: at cache_size_limit graphs per root, a new one
    evicts the least recently used (it is captured again when met again), never refused."""
    compiled_bw.reset()
    w = torch.randn(4, 4, requires_grad=True)
    with compiled_bw.enable(cache_size_limit=2, dynamic=False):   # static: one graph per shape
        for n in (2, 2, 3, 3, 5, 3, 2):
            (torch.randn(n, 4) @ w).tanh().sum().backward()
    st = compiled_bw.stats()
    # 2, 3: captured; 5 evicts 2 (3 was used since); 3 hits; 2 is captured again
    assert (st.captures, st.cache_hits, st.fallbacks) == (4, 3, 0), st
    assert "shape" in st.recompile_reasons[1] or "saved" in st.recompile_reasons[1], st.recompile_reasons


def test_fifty_graphs_under_one_root_keep_compiling():
    """A long process (a test suite, a notebook training several models) meets many graphs
    under one root signature: each is compiled, none refused."""
    compiled_bw.reset()
    with compiled_bw.enable(dynamic=False):
        for n in range(1, 51):
            w = torch.randn(n, requires_grad=True)
            for _ in range(2):
                (w * 2).tanh().sum().backward()
    st = compiled_bw.stats()
    assert (st.captures, st.cache_hits, st.fallbacks) == (50, 50, 0), st


def test_a_root_recapturing_without_reuse_stops_with_one_warning():
    """Every step a new graph, never one reused: at 16 x cache_size_limit captures
    compilation stops for that root, said once (a warning, a note)."""
    compiled_bw.reset()
    w = torch.randn(4, requires_grad=True)
    with pytest.warns(UserWarning, match="stopped compiling") as rec, \
            compiled_bw.enable(cache_size_limit=2, dynamic=False):
        for n in range(1, 41):
            (torch.randn(n, 4) @ w).tanh().sum().backward()
    st = compiled_bw.stats()
    assert (st.captures, st.fallbacks) == (32, 8), st
    assert sum("stopped compiling" in str(r.message) for r in rec) == 1
    assert sum("stopped compiling" in n for n in st.notes) == 1


def test_strict_raises_unsupported_and_nesting():
    x = torch.randn(3, requires_grad=True)
    with compiled_bw.enable(strict=True):
        with pytest.raises(compiled_bw.Unsupported, match="anomaly mode"), \
                torch.autograd.detect_anomaly(check_nan=False):
            (x * x).sum().backward()
        with compiled_bw.enable(strict=False), torch.autograd.detect_anomaly(check_nan=False):
            (x * x).sum().backward()   # falls back silently
    assert torch.autograd._engine_run_backward is not None


def test_custom_function_compiles_as_opaque_call():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        Double.apply(x.sin()).sum().backward()
        return grads(ps)
    differential(build, step)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


class _ExpandedGrad(torch.autograd.Function):
    """sum(0) whose backward returns the grad expanded (stride 0: overlapping memory)."""

    @staticmethod
    def forward(ctx, x):
        return x.sum(0)

    @staticmethod
    def backward(ctx, g):
        return g.expand(3, 4)


def test_opaque_output_with_overlapping_layout_returned_by_grad():
    # grad() hands back the expanded tensor itself in eager (stride 0); no copy can have that
    # layout (copy_ into it raised "more than one element of the written-to tensor ...").
    def build():
        return [torch.randn(3, 4, requires_grad=True)]

    def step(st):
        (x,) = st
        (g,) = torch.autograd.grad((_ExpandedGrad.apply(x) * 2).sum(), [x])
        (gv,) = torch.autograd.grad(_ExpandedGrad.apply(x).sum(), [x])
        return [g, gv]
    differential(build, step, captures=2)       # two backwards, two graphs


def _layout_seen_by_user_code(first_step_strides: bool):
    """A custom backward returns a transposed-layout grad; a hook and a grad() result see the
    layout after other ops (`* 1`'s MulBackward0, not a view)."""
    def build():
        return [torch.randn(3, 4, requires_grad=True), []]

    def step(st):
        x, calls = st
        calls.append(None)
        log = []
        h = x * 1
        h.register_hook(lambda g: log.append(g.stride()))
        y = _TransposedGrad.apply(x * 1).t() * 2
        (g,) = torch.autograd.grad(y.sum() + _TransposedGrad.apply(h).sum(), [x])
        if len(calls) == 1 and not first_step_strides:
            return [g.contiguous()]
        return [g, log]
    return build, step


def test_opaque_output_layout_seen_by_user_code_is_eagers_from_the_second_step():
    # Note [Opaque output layout]: the first run finds the layout; the next hit recaptures
    # with it, and every later step gives eager's strides to the hook and to grad().
    differential(*_layout_seen_by_user_code(False), steps=3, captures=2)


def test_opaque_output_layout_seen_by_user_code_on_the_first_step():
    # the hook gets the custom backward's own tensor (calls/opaque.py Note [The tensor user
    # code returned, to user code]); an xfail (a docs/semantics.md known deviation) until 2026-11-24
    differential(*_layout_seen_by_user_code(True), steps=1)


def test_no_reference_to_the_graph_or_activations_survives_the_backward():
    import gc
    import weakref

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            (_a,) = ctx.saved_tensors
            return g * 2

    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    outs, acts = [], []
    compiled_bw.reset()
    with compiled_bw.enable(strict=True):
        for _ in range(5):
            h = m(x)
            out = Twice.apply(h)
            out.register_hook(lambda g: g)
            outs.append(weakref.ref(out))
            acts.append(weakref.ref(h))
            out.pow(2).mean().backward()
    del out, h
    gc.collect()
    assert not any(r() is not None for r in outs + acts), "a step's graph or activation leaked"
    assert compiled_bw.stats().captures == 1


class _TransposedGrad(torch.autograd.Function):
    """Identity whose backward returns the grad in transposed memory layout."""
    compiled_bw_traceable = False     # an opaque call is the point here

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.t().contiguous().t()


def test_opaque_output_layout_feeds_a_traced_view():
    # The custom Function runs opaque and returns a transposed-layout grad; ViewBackward0's
    # traced `view` after it must still apply (Note [Opaque output layout]).
    def build():
        return [torch.randn(24, requires_grad=True)]

    def step(st):
        (base,) = st
        base.grad = None
        _TransposedGrad.apply(base.view(4, 6)).pow(2).sum().backward()
        return [base.grad]
    differential(build, step)      # a leaf's .grad only: the layout is not observed
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


@pytest.mark.parametrize("layout", ["row_major", "weight_transposed", "input_transposed",
                                    "both_transposed"])
def test_grouped_mm_whose_meta_kernel_refuses_is_traced(cbw_backend, layout):
    """GroupedMmBackward0 (Hugging Face's MoE experts call `torch._grouped_mm`): on CPU the
    kernel takes float32, torch's meta kernel demands bf16, so the real formula cannot run on
    fake tensors (torch 2.13).  Our copy of it (trace/grouped_mm.py; graph/fake_ops.py Note
    [Grouped mm on fake tensors]) is traced instead (on 2.15 the real formula is): grads equal eager's in values and layout (a column-major operand gets
    a column-major grad: the experts' `w.transpose(-2, -1)`), no opaque call."""
    def build():
        torch.manual_seed(0)
        x = torch.randn(12, 8) if layout in ("row_major", "weight_transposed") else \
            torch.randn(8, 12).t()
        w = torch.randn(3, 8, 4) if layout in ("row_major", "input_transposed") else \
            torch.randn(3, 4, 8).transpose(-2, -1)
        return x.requires_grad_(), w.requires_grad_()

    def step(state):
        x, w = state
        x.grad = w.grad = None
        y = torch._grouped_mm(x.tanh() if layout == "row_major" else x, w,
                              offs=torch.tensor([3, 3, 12], dtype=torch.int32))
        (y * y).sum().backward()
        return x.grad, w.grad, x.grad.stride(), w.grad.stride()

    differential(build, step)
    code = compiled_bw.last_graph().code    # (a release whose meta kernel takes float32
    assert "grouped_mm" in code and "compiled_bw.opaque" not in code, code   # traces aten's)


def test_formula_reading_tensor_data_runs_as_the_real_node():
    """An LSTM over packed sequences: PackPaddedSequenceBackward0's formula reads its batch
    sizes' data, which fake tensors do not have.  That node runs opaquely (the real node);
    the rest of the backward is compiled -- no fallback of the whole backward."""
    def build():
        torch.manual_seed(0)
        return torch.nn.LSTM(5, 4, batch_first=True), torch.randn(3, 6, 5, requires_grad=True)

    def step(state):
        m, x = state
        m.zero_grad(set_to_none=True)
        x.grad = None
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([6, 4, 1], device="cpu"),
                                                         batch_first=True)
        out, (h, _) = m(packed)
        pad = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]
        (pad.pow(2).sum() + h.sum()).backward()
        return x.grad, [p.grad for p in m.parameters()]

    differential(build, step)
