"""AOT splicing (issue 4): backwards of torch.compile'd forwards are inlined into our graph.

Differential vs eager autograd running the same compiled forward; each program compiled (not a
fallback) and the captured graph holds the AOT backward's aten ops (names prefixed aot<k>_),
not one opaque call.
"""
import pytest
import torch
from differential import differential, grads
from torch import nn

import compiled_bw

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out


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
    # every distinct size is its own signature (the spliced graph is static)
    differential(build, step, captures=3)
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
    from compiled_bw.capture import aot

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
    tc = expecttest.TestCase()
    tc.assertExpectedInline(text.strip(), """\
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
        return [aot0_t_2, aot0_view]""")


def test_trace_time_tensors_in_a_graph_are_rejected():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compiled_bw.capture.trace import TraceFailed, _check_no_trace_time_values
    root = torch.nn.Module()
    with FakeTensorMode():
        root._c = torch.empty(2)
    g = torch.fx.Graph()
    g.output([g.get_attr("_c")])
    gm = torch.fx.GraphModule(root, g)
    with pytest.raises(TraceFailed, match="baked in a FakeTensor"):
        _check_no_trace_time_values(gm)
