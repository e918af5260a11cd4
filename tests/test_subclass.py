"""Tensor subclasses: compiled with a dense graph, flattened at its boundary.

Differential vs eager autograd with `torch.testing._internal.two_tensor.TwoTensor` (every op runs
on both halves) as leaf, saved tensor, root grad and grad() result; each program must compile
(captures >= 1, no fallback).  A grad is compared as (type, shape, stride, half a, half b), so a
lost subclass or a wrong half fails.  Runs on the eager and the Inductor backend (conftest.py).
What cannot be compiled right falls back with a reason naming it.
"""
import pytest
import torch
import torch.utils._pytree as pytree
from differential import differential
from functions import Double
from torch.testing._internal.two_tensor import TwoTensor

import compiled_bw

pytestmark = pytest.mark.both_backends


def _halves(t):
    """A grad as comparable parts: a TwoTensor must stay one, with both halves eager's."""
    if t is None:
        return None
    if type(t) is TwoTensor:
        return ("TwoTensor", tuple(t.shape), t.stride(), _halves(t.a), _halves(t.b))
    assert type(t) is torch.Tensor, f"unexpected grad type {type(t).__name__}"
    return t.clone()


def _two(shape, scale=2.0):
    a = torch.randn(shape)
    return TwoTensor(a, a * scale)


@pytest.mark.needs_feature("AOT backward splicing")
@pytest.mark.parametrize("fwd", ["aot_eager", "inductor"])
def test_compiled_forward(fwd):
    def build():
        torch._dynamo.reset()
        w = torch.randn(4, 3, requires_grad=True)
        x = _two((2, 4)).requires_grad_()
        return [w, x, torch.compile(lambda x, w: (x @ w).sin(), backend=fwd)]

    def step(st):
        w, x, f = st
        w.grad = x.grad = None
        f(x, w).sum().backward()
        return [_halves(w.grad), _halves(x.grad)]
    differential(build, step)
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "opaque" not in code, code


def test_plain_eager_ops_save_subclasses_and_accumulate():
    def build():
        x = _two((3, 4)).requires_grad_()
        w = torch.randn(4, 5, requires_grad=True)
        b = torch.randn(5, requires_grad=True)
        return [x, w, b]

    def step(ps):
        x, w, b = ps           # grads accumulate over the steps (AccumulateGrad with a TwoTensor)
        h = (x @ w + b).tanh() * x.sum(1, keepdim=True)   # b's grad is sum_to'd (broadcast)
        h.pow(2).mean().backward()
        return [_halves(p.grad) for p in ps]
    st = differential(build, step)
    assert st.cache_hits == 2
    phs = [n.name for n in compiled_bw.last_graph().graph.nodes if n.op == "placeholder"]
    assert any(n.endswith("_a") for n in phs) and any(n.endswith("_b") for n in phs), phs


def test_subclass_root_grad():
    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)]

    def step(ps):
        x, w = ps
        x.grad = w.grad = None
        y = (x @ w).exp()
        y.backward(gradient=_two((3, 2), scale=-3.0))
        return [_halves(x.grad), _halves(w.grad)]
    differential(build, step)


def test_grad_returns_subclass():
    def build():
        return [_two((4, 3)).requires_grad_(), torch.randn(3, requires_grad=True)]

    def step(ps):
        x, w = ps
        gx, gw = torch.autograd.grad(((x * w).sigmoid() + x).sum(), [x, w])
        return [_halves(gx), _halves(gw)]
    differential(build, step)


class ScaledTensor(torch.Tensor):
    """value = inner * scale, the float `scale` being the flatten ctx: a graph traced with one
    scale bakes it in, so a different scale must recapture."""

    @staticmethod
    def __new__(cls, inner, scale):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), dtype=inner.dtype, device=inner.device)

    def __init__(self, inner, scale):
        self.inner, self.scale = inner, scale

    def __tensor_flatten__(self):
        return ["inner"], self.scale

    @staticmethod
    def __tensor_unflatten__(inners, scale, outer_size, outer_stride):
        return ScaledTensor(inners["inner"], scale)

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func is torch.ops.aten.detach.default:
            return ScaledTensor(args[0].inner.detach(), args[0].scale)
        args, kwargs = pytree.tree_map_only(ScaledTensor, lambda t: t.inner * t.scale,
                                            (args, kwargs or {}))
        return func(*args, **kwargs)


def test_changed_flatten_ctx_recaptures():
    scales = [1.0, 3.0, 1.0, 3.0]

    def build():
        return [torch.randn(3, requires_grad=True), [0]]

    def step(st):
        x, k = st
        s = ScaledTensor(torch.arange(1.0, 4.0), scales[k[0] % 4])
        k[0] += 1
        x.grad = None
        (x * s).sum().backward()       # MulBackward0 saves `s`: grad = g * (inner * scale)
        return [x.grad.clone()]
    st = differential(build, step, steps=4, captures=2)
    assert st.cache_hits == 2
    assert any("saved value" in r or "changed" in r for r in st.recompile_reasons[1:]), \
        st.recompile_reasons


def test_changed_inner_structure_recaptures():
    """TwoTensor(dense, dense) vs TwoTensor(TwoTensor, TwoTensor): same outer metadata."""
    nested = [False, True, False, True]

    def build():
        return [torch.randn(2, 3, requires_grad=True), [0]]

    def step(st):
        w, k = st
        a = torch.randn(2, 3)
        x = TwoTensor(_two((2, 3)), _two((2, 3), 5.0)) if nested[k[0] % 4] else TwoTensor(a, -a)
        k[0] += 1
        w.grad = None
        (w * x).cos().sum().backward()
        return [_halves(w.grad)]
    st = differential(build, step, steps=4, captures=2)
    assert st.cache_hits == 2


# ---- what falls back, with a reason ---------------------------------------------------------

def _fallback_reason(build, step) -> str:
    st = differential(build, step, steps=2, captures=0, fallbacks=2)
    return st.fallback_reasons[0]


def test_non_wrapper_subclass_falls_back():
    class Tagged(torch.Tensor):
        pass

    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        (x * torch.randn(3).as_subclass(Tagged)).sum().backward()
        return [x.grad.clone()]
    assert "Tagged in the graph is not a traceable wrapper subclass" in _fallback_reason(build, step)


class _ListCtx(ScaledTensor):
    def __tensor_flatten__(self):
        return ["inner"], [self.scale]

    @staticmethod
    def __tensor_unflatten__(inners, ctx, outer_size, outer_stride):
        return _ListCtx(inners["inner"], ctx[0])


def test_unhashable_flatten_ctx_falls_back():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        (x * _ListCtx(torch.randn(3), 2.0)).sum().backward()
        return [x.grad.clone()]
    reason = _fallback_reason(build, step)
    assert "_ListCtx" in reason and "not hashable" in reason, reason


def test_subclass_grad_into_a_hook_falls_back():
    def build():
        return [_two((3,)).requires_grad_()]

    def step(ps):
        (x,) = ps
        x.grad = None
        y = x * 2
        y.register_hook(lambda g: g * 3)
        y.sin().sum().backward()
        return [_halves(x.grad)]
    reason = _fallback_reason(build, step)
    assert "tensor subclass (TwoTensor)" in reason and "opaque" in reason, reason


def test_subclass_through_an_opaque_custom_function_falls_back():
    def build():
        return [_two((3,)).requires_grad_()]

    def step(ps):
        (x,) = ps
        x.grad = None
        Double.apply(x).sum().backward()
        return [_halves(x.grad)]
    reason = _fallback_reason(build, step)
    assert "Double" in reason and "tensor subclass" in reason, reason


class _TensorCtx(ScaledTensor):
    def __tensor_flatten__(self):
        return ["inner"], (torch.tensor(self.scale),)


def test_tensor_in_flatten_ctx_falls_back():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        x.grad = None
        (x * _TensorCtx(torch.randn(3), 2.0)).sum().backward()
        return [x.grad.clone()]
    reason = _fallback_reason(build, step)
    assert "_TensorCtx" in reason and "ctx holds a tensor" in reason, reason


def test_trace_time_subclass_in_a_graph_is_rejected():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compiled_bw.trace.trace import TraceFailed, _check_no_trace_time_values
    root = torch.nn.Module()
    with FakeTensorMode():
        root._c = _two((2,))
    g = torch.fx.Graph()
    g.output([g.get_attr("_c")])
    gm = torch.fx.GraphModule(root, g)
    with pytest.raises(TraceFailed, match="baked in a TwoTensor"):
        _check_no_trace_time_values(gm)
