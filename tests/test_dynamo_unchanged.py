"""Importing compiled_bw never changes what torch.compile does (torchapi/dynamo.py Note [Dynamo
skips our wrappers]): a torch.compile'd module whose forward graph-breaks around custom
Functions and a module full backward hook (BackwardHookFunction.apply), or one that registers
tensor hooks (our Tensor.register_hook wrapper), gives the same outputs,
grads, graphs and graph breaks with compiled_bw installed as with torch's own functions back
(`compiled_bw.uninstall()`), under each Dynamo flag this release offers.  With
`nested_graph_breaks` on, Dynamo used to compile our Function.apply wrapper's frame and fail
("AutogradFunctionVariable() is not a constant")."""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch._dynamo
from functions import Triple

import compiled_bw

FLAGS = [None] + [f for f in ("nested_graph_breaks",) if hasattr(torch._dynamo.config, f)]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = Triple.apply(self.a(x).relu())
        torch._dynamo.graph_break()
        return self.b(Triple.apply(h))


def _hooked_mlp():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m[0].register_full_backward_hook(lambda mod, gi, go: None)
    return m


def _breaking_net():
    m = Net()
    m.a.register_full_backward_hook(lambda mod, gi, go: None)
    return m


def _times4(g):
    return g * 4


def _half(g):
    return g / 2


def _times3(g):
    return g * 3


def _plus1(g):
    return g + 1


class TensorHooks(torch.nn.Module):
    """Tensor hooks registered in the compiled forward: three on its input, one on an
    intermediate (PyTorch's test/dynamo/test_hooks.py: with our Tensor.register_hook wrapper
    seen by Dynamo, the forward graph-broke, and with nested graph breaks on only the last of
    the input's three hooks was kept: a wrong grad)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)

    def forward(self, x):
        x.register_hook(_times4)
        x.register_hook(_half)
        x.register_hook(_times3)
        h = self.a(x)
        h.register_hook(_plus1)
        return h.relu()


PROGRAMS = {"hooked_mlp": _hooked_mlp, "graph_break_functions": _breaking_net,
            "tensor_hooks": TensorHooks}


def _program(make, flag):
    """Outputs, grads, graph and break counts; or the error (torch 2.13 itself raises an
    UnboundLocalError in torch/utils/hooks.py for the graph-breaking net with nested graph
    breaks on: then the same error is what must come out)."""
    torch.manual_seed(0)
    m = make()
    x = torch.randn(3, 4, requires_grad=True)
    ctx = torch._dynamo.config.patch(**{flag: True}) if flag else contextlib.nullcontext()
    torch._dynamo.reset()
    try:
        with ctx:
            explained = torch._dynamo.explain(m)(x)
            torch._dynamo.reset()
            out = torch.compile(m)(x)
        out.sum().backward()
    except Exception as e:  # noqa: BLE001 -- the error is what is compared
        return ("raised", type(e).__name__, str(e).splitlines()[0])
    finally:
        torch._dynamo.reset()
    return (out.detach(), x.grad, [p.grad for p in m.parameters()],
            explained.graph_count, explained.graph_break_count)


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_torch_compile_same_with_compiled_bw_imported(program, flag):
    ours = _program(PROGRAMS[program], flag)
    compiled_bw.uninstall()
    try:
        torchs = _program(PROGRAMS[program], flag)
    finally:
        compiled_bw.install()
    if torchs[0] == "raised" or ours[0] == "raised":
        assert ours == torchs, f"with compiled_bw: {ours[:3]}; torch alone: {torchs[:3]}"
        return
    torch.testing.assert_close(ours[:3], torchs[:3])
    assert ours[3:] == torchs[3:], f"graphs, graph breaks: {ours[3:]} with compiled_bw, {torchs[3:]} without"


@pytest.mark.both_backends
def test_a_backward_while_torch_compile_compiles_runs_eager_and_says_why():
    # api.py Note [A backward while torch.compile compiles]: a custom backend running a backward
    # on real tensors, where torch.compiler.is_compiling() is True (before: passed to eager
    # autograd with no fallback recorded)
    from differential import differential

    def build():
        return [torch.randn(3, requires_grad=True), []]

    def step(st):
        w, seen = st

        def backend(gm, example_inputs):
            w.grad = None
            (w.tanh() * 2).sum().backward()
            seen.append((torch.compiler.is_compiling(), w.grad.clone()))
            return gm
        torch._dynamo.reset()
        y = torch.compile(lambda x: x * 3, backend=backend)(torch.ones(2))
        return [w.grad, y, list(seen)]
    # torch 2.13 on hold is_compiling() True for the whole compile session (convert_frame's
    # _compile_session_context); before, a backend saw False, and the backward compiles
    probe = []

    def probing(gm, example_inputs):
        probe.append(torch.compiler.is_compiling())
        return gm
    torch._dynamo.reset()
    torch.compile(lambda x: x + 1, backend=probing)(torch.ones(1))
    during = probe[0]
    st = differential(build, step, steps=2, captures=None if during else 1,
                      fallbacks=2 if during else 0)
    assert all("is_compiling() is True" in r for r in st.fallback_reasons), st.fallback_reasons


def test_a_backward_under_torchs_compiled_autograd_is_torchs():
    """A backward run while torch's own compiled autograd is on (its `_enable`, which
    `torch._dynamo.config.compiled_autograd` enters) inside `enable()` is torch's compiled
    autograd's, as without compiled_bw: it runs eager autograd's entry point, with the reason.
    (PyTorch's test/dynamo/test_hooks.py: compiled_bw captured it and torch's compiled autograd
    then traced our delivery code, "Unsupported: Failed to convert args/kwargs to proxy".)"""
    from differential import differential
    from torch._dynamo import compiled_autograd

    def build():
        return [torch.nn.Linear(4, 4), []]

    def step(st):
        m, log = st
        m.zero_grad(set_to_none=True)
        with compiled_autograd._enable(torch.compile(backend="eager", fullgraph=True)):
            y = m(torch.randn(3, 4)).relu()
            y.register_hook(lambda g: (log.append("hook"), g * 3)[1])
            y.sum().backward()
        return [m.weight.grad.clone(), m.bias.grad.clone(), list(log)]
    torch._dynamo.reset()
    try:
        st = differential(build, step, steps=2, backend="eager", captures=0, fallbacks=2,
                          strict=False)
    finally:
        torch._dynamo.reset()
    assert all("torch's compiled autograd is active" in r for r in st.fallback_reasons), \
        st.fallback_reasons
