"""AOT splicing: backwards of torch.compile'd forwards are inlined into our graph.

Differential vs eager autograd running the same compiled forward; each program compiled (not a
fallback) and the captured graph holds the AOT backward's aten ops (names prefixed aot<k>_),
not one opaque call.
"""
import pytest
import snapshot
import torch
from aot_cache import aot_cache, aot_nodes, assert_aot_cache, warm_aot_cache
from differential import differential, grads
from torch import nn

import compiled_bw

pytestmark = [pytest.mark.slow,   # `pytest -m "not slow"` leaves it out
              pytest.mark.needs_feature("AOT backward splicing")]


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


def _program(backend, dynamic=False, inputs=lambda step: torch.randn(5, 8)):
    def build():
        torch._dynamo.reset()
        m = _mlp()
        return [m, torch.compile(m, backend=backend, dynamic=dynamic), [0]]

    def step(st):
        m, cm, k = st
        m.zero_grad(set_to_none=True)
        x = inputs(k[0])
        k[0] += 1
        cm(x).pow(2).mean().backward()
        return grads(m)
    return build, step


def _assert_spliced():
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "custom CompiledFunctionBackward" not in code, code


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_mlp_is_spliced(backend):
    build, step = _program(backend)
    differential(build, step)
    _assert_spliced()


def test_graph_break_mixes_aot_and_eager_nodes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

        def forward(self, x):
            h = self.a(x).tanh()
            torch._dynamo.graph_break()
            return self.b(h * 2).sin()

    def build():
        torch._dynamo.reset()
        m = Net()
        return [m, torch.compile(m, backend="aot_eager"), torch.randn(4, 6)]

    def step(st):
        m, cm, x = st
        m.zero_grad(set_to_none=True)
        (cm(x).sum() + m.a.weight.sum()).backward()   # an eager node next to two AOT ones
        return grads(m)
    differential(build, step)
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "aot1_" in code


def test_same_compiled_function_three_times():
    def build():
        torch._dynamo.reset()
        lin = nn.Linear(5, 5)
        f = torch.compile(lambda x: lin(x).relu(), backend="aot_eager")
        return [lin, f, torch.randn(3, 5)]

    def step(st):
        lin, f, x = st
        lin.zero_grad(set_to_none=True)
        f(f(f(x))).sum().backward()
        return grads(lin)
    differential(build, step)
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "aot1_" in code and "aot2_" in code


def test_dynamic_shapes_forward():
    sizes = [5, 7, 9, 5, 7, 9]
    build, step = _program("aot_eager", dynamic=True, inputs=lambda k: torch.randn(sizes[k], 8))
    # the first size is captured static; the second makes the spliced AOT backward dynamic
    # (its symints become graph inputs: trace/dynamic.py Note [Dynamic AOT backwards]), which
    # then serves every size
    st = differential(build, step, captures=2)
    assert st.dynamic_captures == 1, st
    _assert_spliced()


def test_lazy_backward_is_never_compiled():
    torch._dynamo.reset()
    m = _mlp()
    cm = torch.compile(m, backend="aot_eager")
    out = cm(torch.randn(5, 8)).sum()
    cf = type(out.grad_fn.next_functions[0][0])._forward_cls
    with compiled_bw.enable(strict=True):
        out.backward()
    assert cf.compiled_bw is None


def test_unavailable_backward_module_runs_one_opaque_call_with_a_note():
    from compiled_bw.graph import aot

    def build():
        torch._dynamo.reset()
        m = _mlp()
        return [m, torch.compile(m, backend="aot_eager"), torch.randn(5, 8)]

    def step(st):
        m, cm, x = st
        m.zero_grad(set_to_none=True)
        out = cm(x).pow(2).mean()
        node = out.grad_fn
        while not hasattr(type(node), "_forward_cls"):
            node = node.next_functions[0][0]
        cls = type(node)
        aot._PLANS[cls] = aot.AotPlan(cls._forward_cls, None, "AOT backward module not available (test)")
        out.backward()
        return grads(m)
    st = differential(build, step)
    assert "custom CompiledFunctionBackward" in compiled_bw.last_graph().code
    assert any("module not available (test)" in n for n in st.notes), st.notes


def test_snapshot_of_spliced_mlp():
    import expecttest
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    cm = torch.compile(m, backend="aot_eager")
    compiled_bw.reset()
    with compiled_bw.enable(strict=True):
        cm(torch.randn(2, 4)).sum().backward()
    text = compiled_bw.last_graph().print_readable(False, include_stride=False, include_device=False)
    snapshot.check(expecttest.TestCase(), text.strip(), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_compiledfunctionbackward1_tensors_0: "f32[2, 4]", saved_compiledfunctionbackward1_tensors_1: "f32[2, 3]"):
        # No stacktrace found for following nodes
        expand: "f32[2, 3]" = torch.ops.aten.expand.default(grad_root0, [2, 3]);  grad_root0 = None
        aot0_empty_strided: "f32[2, 3]" = torch.ops.aten.empty_strided.default([2, 3], [3, 1], dtype = torch.float32, layout = torch.strided, device = device(type='cpu'), pin_memory = False)
        aot0_copy_: "f32[2, 3]" = torch.ops.aten.copy_.default(aot0_empty_strided, expand);  aot0_empty_strided = expand = None
        aot0_threshold_backward: "f32[2, 3]" = torch.ops.aten.threshold_backward.default(aot0_copy_, saved_compiledfunctionbackward1_tensors_1, 0);  aot0_copy_ = saved_compiledfunctionbackward1_tensors_1 = None
        aot0_t: "f32[3, 2]" = torch.ops.aten.t.default(aot0_threshold_backward)
        aot0_mm: "f32[3, 4]" = torch.ops.aten.mm.default(aot0_t, saved_compiledfunctionbackward1_tensors_0);  aot0_t = saved_compiledfunctionbackward1_tensors_0 = None
        aot0_t_1: "f32[4, 3]" = torch.ops.aten.t.default(aot0_mm);  aot0_mm = None
        aot0_t_2: "f32[3, 4]" = torch.ops.aten.t.default(aot0_t_1);  aot0_t_1 = None
        aot0_sum_1: "f32[1, 3]" = torch.ops.aten.sum.dim_IntList(aot0_threshold_backward, [0], True);  aot0_threshold_backward = None
        aot0_view: "f32[3]" = torch.ops.aten.view.default(aot0_sum_1, [3]);  aot0_sum_1 = None
        return [aot0_t_2, aot0_view]""", name="test_snapshot_of_spliced_mlp")


def test_trace_time_tensors_in_a_graph_are_rejected():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compiled_bw.trace.trace import TraceFailed, _check_no_trace_time_values
    root = torch.nn.Module()
    with FakeTensorMode():
        root._c = torch.empty(2)
    g = torch.fx.Graph()
    g.output([g.get_attr("_c")])
    gm = torch.fx.GraphModule(root, g)
    with pytest.raises(TraceFailed, match="baked in a FakeTensor"):
        _check_no_trace_time_values(gm)


# --- AOT backwards as AOTAutograd's cache and Inductor's layout choices make them ---

def _embed_ce():
    return nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 10))


def _embed_ce_loss(cm):
    ids = torch.randint(0, 10, (2, 5))
    return torch.nn.functional.cross_entropy(cm(ids).flatten(0, 1), ids.flatten())


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_warm_aot_cache_constants_are_spliced(backend):
    """A compiled forward loaded from AOTAutograd's cache: its backward module holds real
    tensor constants (here the zeros embedding's grad accumulates into); the fake retrace
    failed on them ("Please convert all Tensors to FakeTensors") and the step fell back."""
    with aot_cache(warm=True):
        warm_aot_cache(_embed_ce, _embed_ce_loss)

        def build():
            torch._dynamo.reset()
            m = _embed_ce()
            return [m, torch.compile(m)]

        def step(st):
            m, cm = st
            m.zero_grad(set_to_none=True)
            out = _embed_ce_loss(cm)
            assert_aot_cache(out, warm=True)
            out.backward()
            return grads(m)
        differential(build, step, backend=backend)
    _assert_spliced()
    assert "lift_fresh_copy" in compiled_bw.last_graph().code


class _Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return (self.b2(self.c2(self.b1(self.c1(x)).relu())) + x).relu()


def _resnet(c=8):
    """ResNet-18 in small: stem (conv, bn, relu, max pool), one residual block, adaptive avg
    pool, flatten, linear."""
    return nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), _Block(c), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(c, 10))


@pytest.mark.parametrize("backend,memory_format,cache", [
    ("eager", "contiguous", "cold"), ("inductor", "contiguous", "cold"),
    ("eager", "channels_last", "cold"), ("eager", "contiguous", "warm"),
    ("inductor", "channels_last", "warm")])
def test_resnet_under_torch_compile_is_spliced(backend, memory_format, cache):
    """Cold: Inductor's layout optimization gives the forward's saved activations channels-last
    strides; the AOT backward `view`s one as if contiguous (Inductor's view copies where eager's
    cannot view): "Cannot view a tensor with shape [2, 8, 8, 8] and strides (512, 1, 64, 8)".
    Warm: the cached backward module holds tensor constants (`where(..., tensor(0.))`,
    `as_strided_scatter` into a constant).  (The cold channels_last variant passed before the
    fix too: there the views were viewable.)"""
    fmt = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[memory_format]
    warm = cache == "warm"

    def make():
        return _resnet().to(memory_format=fmt)

    def data():
        return torch.randn(2, 3, 16, 16).to(memory_format=fmt)

    def build():
        torch._dynamo.reset()
        m = make()
        return [m, torch.compile(m), data()]

    def step(st):
        m, cm, x = st
        m.zero_grad(set_to_none=True)
        out = cm(x).pow(2).mean()
        assert_aot_cache(out, warm=warm)
        out.backward()
        return grads(m)
    with aot_cache(warm):
        if warm:
            warm_aot_cache(make, lambda cm: cm(data()).pow(2).mean())
        differential(build, step, steps=2, backend=backend)
    _assert_spliced()


def _bad_view(g, ph):
    return g.create_node("call_function", torch.ops.aten.view.default, (ph, [7, 999]),
                         name="bad_view")


def _as_strided_of_a_transpose(g, ph):
    t = g.call_function(torch.ops.aten.t.default, (ph,))
    return g.create_node("call_function", torch.ops.aten.as_strided.default,
                         (t, [2, 2], [1, 2]), name="bad_view")


@pytest.mark.parametrize("inject,op", [(_bad_view, "aten.view.default"),
                                       (_as_strided_of_a_transpose, "aten.as_strided.default")])
def test_failed_splice_names_the_aot_graph_and_op(inject, op):
    """A splice that fails falls back with a reason naming the AOT graph, the node and its op:
    an op inserted into the AOT module that no tensor can run, or an as_strided of a
    non-contiguous tensor (its values would depend on the layout Inductor picks for it)."""
    import copy

    from compiled_bw.graph import aot

    def build():
        torch._dynamo.reset()
        m = _mlp()
        return [m, torch.compile(m, backend="aot_eager"), torch.randn(5, 8)]

    def step(st):
        m, cm, x = st
        m.zero_grad(set_to_none=True)
        out = cm(x).pow(2).mean()
        (node,) = aot_nodes(out)
        cls = type(node)
        bw = copy.deepcopy(aot.aot_plan(cls).bw_module)
        ph = next(n for n in bw.graph.nodes
                  if n.op == "placeholder" and len(n.meta["val"].shape) == 2)
        with bw.graph.inserting_after(ph):
            inject(bw.graph, ph)
        bw.recompile()
        aot._PLANS[cls] = aot.AotPlan(cls._forward_cls, bw, "")
        out.backward()
        return grads(m)
    st = differential(build, step, steps=1, backend="eager", fallbacks=1, captures=None)
    (reason,) = st.fallback_reasons
    assert "AOT backward of torch.compile graph" in reason and "CompiledFunctionBackward" in reason, reason
    assert "'bad_view'" in reason and op in reason, reason


def test_view_strides_agrees_with_torch():
    """graph/aot.py decides whether an AOT `view` needs Inductor's copy with a port of ATen's
    computeStride: it must answer as torch's own view does (viewable or not, and the strides)."""
    from compiled_bw.graph.aot import view_strides
    g = torch.Generator().manual_seed(0)
    cases = 0
    for _ in range(400):
        nd = int(torch.randint(0, 5, (), generator=g))
        size = [int(s) for s in torch.randint(0, 4, (nd,), generator=g)]
        base = torch.empty(size)
        perm = torch.randperm(nd, generator=g).tolist()
        x = base.permute(perm) if nd else base
        if nd and torch.rand((), generator=g) < 0.3:
            x = x.unsqueeze(int(torch.randint(0, nd + 1, (), generator=g)))
        n = x.numel()
        shapes = [[n], [-1], [1, n], [n, 1], list(x.shape)[::-1]]
        if n and n % 2 == 0:
            shapes += [[2, n // 2], [n // 2, 2, 1], [-1, 2]]
        for shape in shapes:
            try:
                want = list(x.view(shape).stride())
            except RuntimeError:
                want = None
            got = view_strides(tuple(x.shape), x.stride(), shape)
            if want is None or n == 0:
                assert (got is None) == (want is None), (x.shape, x.stride(), shape, got)
            else:
                assert got == want, (x.shape, x.stride(), shape, got, want)
            cases += 1
    assert cases > 1000


class _MutatesInBackward(torch.autograd.Function):
    """Its backward mutates its forward input `x` (kind: how), as AOTAutograd allows in a
    backward: data mutations of forward inputs, kept in the backward graph (graph inputs that
    require grad are checked at run time: refused only for create_graph=True)."""

    @staticmethod
    def forward(ctx, x, y, how):
        ctx.save_for_backward(x, y)
        ctx.how = how
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        if ctx.how == "mul_":
            x.mul_(1.5)
        elif ctx.how == "copy_":
            x.copy_(y * 0.5)
        else:                   # a view of the input, mutated
            x[1:3].add_(1.0)
        return g * y, g * x, None


@pytest.mark.both_backends
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("how", ["mul_", "copy_", "view add_"])
@pytest.mark.parametrize("x_kind", ["leaf requiring grad", "non-leaf", "buffer"])
def test_an_aot_backward_mutating_a_forward_input(backend, how, x_kind):
    """The mutation reaches the real input as in eager (values, version), the grads are
    eager's, and the backward is spliced: 1 capture, no fallback (#36 item 2: it fell back
    with AOTAutograd's "create_graph=True" check for an input requiring grad)."""
    def build():
        torch._dynamo.reset()

        def f(x, y):
            return _MutatesInBackward.apply(x, y, how).sin()
        return [torch.randn(6, requires_grad=x_kind != "buffer"),
                torch.randn(6, requires_grad=True),
                torch.compile(f, backend=backend, fullgraph=True)]

    def step(st):
        x0, y, f = st
        x0.grad = y.grad = None
        x = x0 * 1.0 if x_kind == "non-leaf" else x0
        f(x, y).sum().backward()
        return x.detach().clone(), x._version, x0._version, x0.grad, y.grad

    differential(build, step)
    _assert_spliced()


@pytest.mark.both_backends
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_aot_backward_mutating_an_input_another_node_saved(backend):
    """`x * w` saved x and runs after the AOT backward that mutates x: eager raises for an
    aot_eager forward (the version moved) and computes with the new values for an Inductor
    one (it did not); either way that backward runs eager autograd."""
    def build():
        torch._dynamo.reset()

        def f(x, y):
            return _MutatesInBackward.apply(x, y, "mul_").sin()
        return [torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True),
                torch.randn(6, requires_grad=True), torch.compile(f, backend=backend, fullgraph=True)]

    def step(st):
        x, y, w, f = st
        x.grad = y.grad = w.grad = None
        h = x * w
        (f(x, y).sum() + h.sum()).backward()
        return x.detach().clone(), x._version, x.grad, y.grad, w.grad

    st = differential(build, step, captures=1, fallbacks=3, allow_errors=True)
    assert all("another node saved too" in r for r in st.fallback_reasons), st.fallback_reasons


class _CheckpointedDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(8, 32), nn.Linear(32, 8)

    def _block(self, x):
        return self.down(torch.nn.functional.dropout(torch.tanh(self.up(x)), 0.3))

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self._block, x, use_reentrant=False)


@pytest.mark.both_backends
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_checkpointed_dropout_draws_the_forwards_mask(backend):
    """torch.compile'd forward, a checkpointed region with dropout: its AOT backward
    recomputes the mask.  Under Inductor the forward drew it with Inductor's own generator
    (prims.inductor_random on a saved seed), which only Inductor's kernels draw again: spliced
    and run by anything else, the mask (and the grads) differed from eager's by up to 0.3 on
    a Llama.  That backward runs as the real node (Note [Inductor's own random numbers])."""
    def build():
        torch._dynamo.reset()
        m = _CheckpointedDropout()
        return [m, torch.compile(m, backend=backend)]

    def step(st):
        m, cm = st
        m.zero_grad(set_to_none=True)
        cm(torch.randn(6, 8)).pow(2).mean().backward()
        return grads(m)

    differential(build, step)


class _TwoOutputs(nn.Module):
    """A compiled forward with a second output the loss does not use (as a causal LM's KV
    cache): the engine hands its AOT backward zeros for that output's grad; and a select, whose
    grad in the AOT backward is `full([4, s0], 0)`: an int, then a size symbol."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        h = self.lin(x).t()
        return h[:, 0].sum() + h.pow(2).mean(), h * 2


@pytest.mark.both_backends
@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_dynamic_forward_with_an_unused_output_serves_every_size(cache, cbw_backend):
    """The zeros materialized for the unused output had the size of the forward the node was
    recorded from, which fixed the dynamic graph's length (range [7, 7]: every later size a
    static capture); and warm, AOTAutograd's cache rebuilt the backward module by FX's
    re-trace, which fails on `full([4, s0])` ("Expected a value of type 'List[int]' ...
    Proxy(primals_1)"): the AOT backward ran as one opaque call, a capture per size."""
    sizes = [5, 7, 9, 11, 6, 5]
    warm = cache == "warm"

    def build():
        torch._dynamo.reset()
        m = _TwoOutputs()
        return [m, torch.compile(m, dynamic=True), [0]]

    def step(st):
        m, cm, k = st
        m.zero_grad(set_to_none=True)
        loss, _ = cm(torch.randn(sizes[k[0]], 8))
        k[0] += 1
        for n in aot_nodes(loss):
            kind = type(type(n)._forward_cls._lazy_backward_info).__name__
            assert kind.startswith("Cached") == warm, kind
        loss.backward()
        return grads(m)
    with aot_cache(warm):
        if warm:    # (warm_aot_cache compiles static shapes: another cache key)
            torch._dynamo.reset()
            torch.compile(_TwoOutputs(), dynamic=True)(torch.randn(4, 8))[0].backward()
        st = differential(build, step, steps=len(sizes), captures=2)
    assert st.dynamic_captures == 1, st.recompile_reasons
    _assert_spliced()
