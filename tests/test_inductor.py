"""The `inductor` backend: opaque calls as extern kernels, boxed calls that free
their inputs, eager's output strides, one compile per signature, isolation of the import.

Grads are compared with eager autograd through tests/differential.py; CI also runs the
differential files (test_core.py, test_signature.py) with COMPILED_BW_TEST_BACKEND=inductor.
"""
import gc
import re
import weakref

import pytest
import torch
from differential import differential, grads

import compiled_bw
from compiled_bw import backends

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

pytest.importorskip("torch._inductor.compile_fx")


def test_opaque_call_is_an_extern_kernel_in_one_graph():
    def build():
        return [torch.randn(4, 5, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = x * 2
        y[1:3].mul_(3)            # CopySlices: runs opaque
        (y.sin() * x).sum().backward()
        return grads(ps)
    st = differential(build, step, backend="inductor")
    assert (st.captures, st.cache_hits) == (1, 2)
    assert st.compile_seconds > 0
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code
    src = compiled_bw.last_compiled().source_code
    assert "torch.ops.compiled_bw.opaque.default" in src   # an extern call ...
    assert "cpp_fused" in src                              # ... between compiled kernels
    # inputs are keyed by the signature: no per-call input asserts (backends/inductor.py
    # Note [Inductor: no input asserts]); the assert on the opaque (extern) call's output stays
    call = src[src.index("def call("):]
    n_inputs = len(compiled_bw.last_graph().graph.find_nodes(op="placeholder"))
    assert call.count("assert_size_stride(") < n_inputs, call[:2000]
    # (torch 2.15 checks an extern call's output with assert_tensor_metadata)
    assert "assert_size_stride(buf" in call or "assert_tensor_metadata(buf" in call, call[:2000]


def test_grad_strides_follow_eagers_formulas():
    # Eager's TensorIterator gives grads the layout of a permuted operand; Inductor must
    # lay out its output buffers the same way (grad() returns them as they are).
    def build():
        return [torch.randn(2, 3, 4, 5, requires_grad=True),
                torch.randn(2, 5, 4, 3).permute(0, 3, 2, 1).requires_grad_()]

    def step(ps):
        x, w = ps
        y = x.sigmoid()
        return torch.autograd.grad((y * w + w.exp() * y).sum(), [x, w, y])
    differential(build, step, backend="inductor")


def test_size_one_strides_of_a_grad_are_eagers():
    """runtime/real_strides.py Note [Real output strides] and backends/inductor.py Note
    [Inductor: exact output strides]: a conv with one input channel, differentiated twice;
    its weight, (4, 1, 3, 3), gets two grads, summed, whose traced strides are (9, 36, 3, 1)
    where the real kernels give eager's (9, 9, 3, 1); `.grad` must have eager's strides."""
    def build():
        torch.manual_seed(0)
        return torch.nn.Conv2d(1, 4, 3, padding=1).double()

    def step(conv):
        conv.zero_grad(set_to_none=True)
        x = torch.randn(2, 1, 5, 5, dtype=torch.float64, requires_grad=True)
        g, = torch.autograd.grad(conv(x).tanh().sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        return [conv.weight.grad, conv.weight.grad.stride(), conv.bias.grad]
    st = differential(build, step, backend="inductor", captures=None)
    assert st.background_compiles >= 1, st


class _Scale(torch.autograd.Function):
    compiled_bw_traceable = False   # the test is about an opaque call's output layout

    @staticmethod
    def forward(ctx, x):
        return x * 1.5

    @staticmethod
    def backward(ctx, g):
        return g * 1.5          # keeps the (transposed) layout of g, as eager's formulas do


def test_opaque_output_in_grad_layout():
    # The custom Function runs opaque; its real output follows the transposed grad
    # (Note [Opaque output layout]), and the traced `t` after it must see that layout.
    def build():
        return [torch.randn(4, 6, requires_grad=True)]

    def step(ps):
        (x,) = ps
        h = _Scale.apply(x.t())
        return torch.autograd.grad((h.tanh() ** 2).sum(), [x, h])
    differential(build, step, backend="inductor")
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


def test_compiled_callable_is_boxed_and_frees_its_inputs():
    from torch.fx.experimental.proxy_tensor import make_fx

    from compiled_bw.backends.inductor import compile_inductor

    def f(g, a, b):
        return [(g * a.sin()) @ b, g.sum(0)]
    inputs = [torch.randn(8, 8) for _ in range(3)]
    gm = make_fx(f, tracing_mode="fake")(*inputs)
    fn = compile_inductor(gm, inputs)
    refs = [weakref.ref(t) for t in inputs]
    box = inputs
    del inputs
    g, a, b = (r() for r in refs)
    expected = f(g, a, b)
    del g, a, b
    out = fn(box)
    assert box == []
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    for x, y in zip(out, expected, strict=True):
        torch.testing.assert_close(x, y)


def test_cpp_hit_path_delivers_like_eager():
    # runtime/run.py Note [C++ hit path]: later steps run in one C++ call.  The grad of a + b
    # is one tensor for both leaves (eager's AccumulateGrad steals it for one and copies it for
    # the other: they must not alias); a leaf without a grad keeps None; odd steps accumulate
    # into existing grads, even steps into None; retain_graph=True keeps the graph for a
    # second backward of the same loss.
    def build():
        return [torch.nn.Linear(8, 8), torch.randn(4, 8, requires_grad=True),
                torch.randn(4, 8, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(st):
        lin, a, b, unused = st
        k = step.k = step.k + 1
        if k % 2:
            lin.zero_grad(set_to_none=True)
            a.grad = b.grad = None
        s = a + b
        loss = lin(s).tanh().sum() + s.sum()
        loss.backward(retain_graph=True)
        loss.backward()
        out = grads([*lin.parameters(), a, b, unused])
        return out + [a.grad.data_ptr() != b.grad.data_ptr()]
    step.k = 0
    st = differential(build, step, steps=4, backend="inductor", captures=2)
    assert st.native_runs == 6, st      # 2 calls per step, the first of each kind captures


def test_cpp_hit_path_for_grad():
    # grad() through the C++ hit path: the same input twice (one tensor object, as eager), a
    # non-leaf input, an unused input (allow_unused), the root itself.
    def build():
        return [torch.randn(4, 6, requires_grad=True), torch.randn(6, requires_grad=True),
                torch.randn(3, requires_grad=True)]

    def step(st):
        x, w, unused = st
        h = (x * w).tanh()
        y = (h @ w.exp()).sum()
        gx, gx2, gh, gu, gy = torch.autograd.grad(y, [x, x, h, unused, y], allow_unused=True)
        return [gx, gx2, gh, gu, gy, gx is gx2]
    st = differential(build, step, steps=3, backend="inductor")
    assert st.native_runs == 2, st


def test_cpp_wrapper_switch(monkeypatch):
    # backends/inductor.py Note [Inductor: C++ wrapper], Note [Inductor: C entry point]: C++ wrapper (with a C entry point) by default, the Python
    # wrapper with COMPILED_BW_CPP_WRAPPER=0 or when the graph has opaque calls.
    from torch.fx.experimental.proxy_tensor import make_fx

    from compiled_bw.backends.inductor import compile_inductor, cpp_wrapper
    from compiled_bw.backends.inductor_artifact import native_entry
    from compiled_bw.core.thread import SitesOnly, current_step
    inputs = [torch.randn(4, 4), torch.randn(4)]
    gm = make_fx(lambda a, b: [(a * b).cos().sum(1)], tracing_mode="fake")(*inputs)
    for env, native in (("1", True), ("0", False)):
        monkeypatch.setenv("COMPILED_BW_CPP_WRAPPER", env)
        with current_step(SitesOnly([])):
            fn = compile_inductor(gm, inputs)
        assert (native_entry(fn) is not None) == native, env
        assert ("inductor_entry_impl" in fn.source_code) == native, env
        torch.testing.assert_close(fn(list(inputs))[0], (inputs[0] * inputs[1]).cos().sum(1))
    monkeypatch.setenv("COMPILED_BW_CPP_WRAPPER", "1")
    cpu, meta = torch.empty(2), torch.empty(2, device="meta")
    assert cpp_wrapper([], [cpu]) and not cpp_wrapper(["an opaque site"], [cpu])
    # not on other devices (GPU: Inductor's C++ wrapper runs kernels at compile time)
    assert not cpp_wrapper([], [cpu, meta])


def test_missing_backend_dependency_disables_only_that_backend(monkeypatch):
    monkeypatch.setitem(backends.LAZY, "broken", (".no_such_module", "compile"))
    with (pytest.raises(ValueError, match=r"backend 'broken' is unavailable.*backend='eager'"),
          compiled_bw.enable(backend="broken")):
        pass
    x = torch.randn(3, requires_grad=True)
    with compiled_bw.enable(backend="eager", strict=True):
        (x * x).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())


@pytest.mark.foreground_compile
def test_a_graph_inductor_cannot_compile_runs_on_the_eager_backend():
    # PyTorch's test_input_buffer_accum: a sparse grad made inside the graph (gather with
    # sparse_grad=True) summed with a dense one; Inductor cannot compile that graph.  Compiled
    # in the foreground, the graph runs on the eager backend, recorded as a fallback (as a
    # failed background compile is)
    def build():
        return torch.rand(2, 2, requires_grad=True)

    def step(leaf):
        leaf.grad = None
        ind = torch.tensor([[0, 0]])
        out2 = leaf.gather(0, ind, sparse_grad=True)
        out1 = leaf.clone()
        g1, g2 = torch.ones_like(out1), torch.full_like(out2, 2.0)
        torch.autograd.backward((out1, out2), (g1, g2))
        return [leaf.grad.to_dense(), leaf.grad.layout == torch.sparse_coo]
    st = differential(build, step, backend="inductor", fallbacks=None, strict=False)
    assert any("Inductor failed to compile" in r for r in st.fallback_reasons), st.fallback_reasons


def test_fx_graph_cache_key_follows_our_code(monkeypatch):
    # Note [Inductor: cache key of our code]: an artefact compiled by another version of our
    # lowerings is not served from Inductor's on-disk FX graph cache
    from torch._dynamo.utils import counters

    from compiled_bw.backends import inductor as ours

    def run():
        torch.manual_seed(0)
        x = torch.randn(4, 4, requires_grad=True)
        with compiled_bw.enable(backend="inductor", background_compile=False):
            (x.sin() * 3).sum().backward()
        return x.grad

    # config.patch, not monkeypatch: monkeypatch's undo deletes a config module's entry
    with torch._inductor.config.patch(fx_graph_cache=True):
        compiled_bw.reset()
        run()                                   # compiled (or served) under today's key
        compiled_bw.reset()
        hits = counters["inductor"]["fxgraph_cache_hit"]
        run()
        assert counters["inductor"]["fxgraph_cache_hit"] == hits + 1, "same code: from the cache"
        monkeypatch.setattr(ours, "SOURCE_KEY", "another version")
        compiled_bw.reset()
        misses = counters["inductor"]["fxgraph_cache_miss"]
        run()
        assert counters["inductor"]["fxgraph_cache_miss"] == misses + 1, "other code: compiled anew"


def test_a_global_inductor_cudagraphs_setting_does_not_reach_our_compile():
    """backends/inductor.py Note [Inductor: no CUDA graphs of its own]: with the user's global
    `triton.cudagraphs = True`, Inductor is still told not to CUDA-graph our graph (on the CPU,
    Inductor counts a `cudagraph_skips` for a graph it was asked to CUDA-graph; on a GPU its
    static output buffers would become `.grad`s).  The in-process compile (background compile
    off: the background path's artifacts are loaded without CUDA graphs already)."""
    from torch._dynamo.utils import counters

    def build():
        w = torch.randn(4, 4, requires_grad=True)
        log = []
        w.register_hook(lambda g: log.append(g.sum().item()))
        return [w, log]

    def step(st):
        w, log = st
        (w.sin() @ w).sum().backward()
        return [w.grad.clone(), list(log)]
    counters.clear()
    with torch._inductor.config.patch({"triton.cudagraphs": True}):
        differential(build, step, backend="inductor", options={"background_compile": False})
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])


def test_deterministic_mode_is_keyed_and_compiled_under():
    """torch.use_deterministic_algorithms: Inductor lowers an index_put with accumulate (here
    embedding's backward) to atomic adds, or under the mode to the aten kernel, which is
    deterministic.  The mode is part of the cache key and the background compile runs under
    the mode the graph was captured in (backends/compile_worker.py deterministic()): before,
    a graph compiled without it served steps under it, atomic adds and all."""
    def build():
        return [torch.randn(16, 8, requires_grad=True), torch.randint(0, 16, (512,))]

    def step(st):
        w, idx = st
        w.grad = None
        torch.use_deterministic_algorithms(step.k % 2 == 1)
        step.k += 1
        try:
            torch.nn.functional.embedding(idx, w).pow(2).sum().backward()
        finally:
            torch.use_deterministic_algorithms(False)
        return [w.grad]
    sources = []

    def record(st):
        out = step(st)
        compiled_bw.wait_for_compiles()
        fn = compiled_bw.last_compiled()    # the Inductor code of the graph this step captured
        sources.append(getattr(fn, "source_code", ""))
        return out
    step.k = 0
    differential(build, step, steps=4, backend="inductor", captures=None)
    step.k = 0
    st = differential(build, record, steps=4, backend="inductor", captures=2)
    assert st.cache_hits == 2, st
    ours = sources[4:]      # (the first 4: the eager run's)
    assert "atomic_add" in ours[0], ours[0]
    assert "index_put" in ours[1] and "atomic_add" not in ours[1], ours[1]


def test_matmul_precision_is_keyed_where_cuda_is_initialized(monkeypatch):
    """TF32 settings (torch.backends.cuda.matmul.fp32_precision, set_float32_matmul_precision,
    cuDNN's) are baked into Inductor's GPU code at compile time: a graph captured under one
    setting must not serve a step under another (backends/compile_worker.py precision()).  No
    GPU here: CUDA is reported initialized (in this process; the worker sees its own CUDA
    state), and the setting flips between steps of one graph."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    before = torch.get_float32_matmul_precision()

    def build():
        return [torch.randn(4, 4, requires_grad=True)]

    def step(st):
        (w,) = st
        w.grad = None
        torch.set_float32_matmul_precision(["highest", "high"][step.k % 2])
        step.k += 1
        try:
            (w @ w).sum().backward()
        finally:
            torch.set_float32_matmul_precision(before)
        return [w.grad]
    step.k = 0
    # Inductor with background compile: each job carries its setting to the worker, which
    # compiles under it (compile_worker.compile_modes)
    st = differential(build, step, steps=4, backend="inductor", captures=2)
    assert st.cache_hits == 2 and st.fallbacks == 0 and st.inductor_compiles == 2, st


def test_the_worker_compiles_under_the_parents_modes():
    """compile_worker.compile_modes applies a modes() of the parent (deterministic algorithms,
    TF32 settings) around a compile and restores this process's own afterwards."""
    from compiled_bw.backends import compile_worker
    own = compile_worker.modes()[0], compile_worker._read_precision()
    other = ((True, True, False), ("tf32", False, False, "tf32", "tf32", "high"))
    # (torch.testing's common_utils, imported by other test files, freezes cuDNN's flags in
    # this process; the worker's are never frozen)
    with torch.backends.__allow_nonbracketed_mutation():
        with compile_worker.compile_modes(other):
            assert (compile_worker.deterministic(), compile_worker._read_precision()) == other
        assert (compile_worker.deterministic(), compile_worker._read_precision()) == own


# a modulus by a size symbol in a kernel's indexing: Inductor's C++ code for it is scalar
_SYMBOLIC_MODULUS = re.compile(r"%\s*static_cast<int64_t>\([^;)]*\bks\d+")


def _graphs_inductor_compiles(monkeypatch) -> list:
    """The graphs compiled_bw hands Inductor from now on (foreground compiles)."""
    from compiled_bw.backends import inductor
    graphs = []
    compile_fx_inner = inductor.compile_fx_inner

    def spy(gm, *args, **kwargs):
        graphs.append(gm)
        return compile_fx_inner(gm, *args, **kwargs)
    monkeypatch.setattr(inductor, "compile_fx_inner", spy)
    return graphs


def _count(gm, op) -> int:
    return len(gm.graph.find_nodes(op="call_function", target=op))


def _attention_steps(sizes):
    """nn.MultiheadAttention (batch_first) over (batch, length) sizes: its backward reshapes
    the q/k/v grads through (batch * heads) and back (Note [Inductor: reshape copies on
    CPU])."""
    def build():
        torch.manual_seed(0)
        return {"k": 0, "attn": torch.nn.MultiheadAttention(16, 4, batch_first=True)}

    def step(s):
        b, t = sizes[s["k"]]
        s["k"] += 1
        s["attn"].zero_grad()
        x = torch.randn(b, t, 16, requires_grad=True)
        out, _ = s["attn"](x, x, x, need_weights=False)
        out.pow(2).mean().backward()
        return grads(s["attn"]) + [x.grad]
    return build, step


@pytest.mark.parametrize("sizes,captures", [([(3, 5)] * 3, 1),
                                            ([(3, 5), (4, 7), (6, 9), (5, 11), (2, 3)], 2)],
                         ids=["static", "dynamic"])
def test_reshape_copies_are_realized_on_cpu(sizes, captures, monkeypatch):
    # backends/inductor.py Note [Inductor: reshape copies on CPU]
    graphs = _graphs_inductor_compiles(monkeypatch)
    build, step = _attention_steps(sizes)
    st = differential(build, step, steps=len(sizes), backend="inductor", captures=captures,
                      options={"background_compile": False})
    assert st.dynamic_captures == captures - 1, st.recompile_reasons
    # per graph: at least the clones of the q, k and v grads before (length, batch, embed)
    realized = [_count(gm, torch.ops.prims.inductor_force_stride_order.default) for gm in graphs]
    assert len(realized) == captures and min(realized) >= 3, realized
    src = compiled_bw.last_compiled().source_code
    assert not _SYMBOLIC_MODULUS.findall(src), _SYMBOLIC_MODULUS.findall(src)[:3]


@pytest.mark.parametrize("case", ["mean", "weighted_ignore", "none_2d"])
def test_cross_entropy_backward_selects_in_one_pass(case, monkeypatch):
    # backends/inductor.py Notes [Inductor: grads eager leaves untouched] (the loss backward
    # is a selection, no scatter into a materialized one-hot) and [Inductor: cross-entropy
    # backward in one pass] (no row sum of that selection)
    graphs = _graphs_inductor_compiles(monkeypatch)

    def build():
        torch.manual_seed(0)
        return [torch.randn(12, 10, requires_grad=True), torch.rand(10)]

    def step(ps):
        x, w = ps
        x.grad = None
        t = torch.randint(0, 10, (12,))
        if case == "mean":
            loss = torch.nn.functional.cross_entropy(x * 2, t)
        elif case == "weighted_ignore":
            t[::3] = 4
            loss = torch.nn.functional.cross_entropy(x * 2, t, weight=w, ignore_index=4)
        else:
            x4 = (x * 2).view(3, 4, 10).transpose(1, 2).unsqueeze(-1)      # (N, C, H, W)
            loss = torch.nn.functional.nll_loss(x4.log_softmax(1), t.view(3, 4, 1),
                                                reduction="none").pow(2).sum()
        loss.backward()
        return [x.grad]
    differential(build, step, backend="inductor", options={"background_compile": False})
    assert graphs and not any(_count(gm, torch.ops.aten.scatter.value) for gm in graphs), \
        [gm.code for gm in graphs]
    assert not any(_count(gm, torch.ops.aten.sum.dim_IntList) for gm in graphs), \
        [gm.code for gm in graphs]
