"""A torch.compile backend with its own `bw_compiler` (issue #36 item 8; torchapi/dynamo.py
Note [A backend's own backward compiler]).  Eager autograd calls the backend's bw_compiler on
the first backward of the compiled forward and runs what it returns; under `enable()` the same
must happen: such a backward is not spliced but runs as one opaque call of the real node.
Inductor's and aot_eager's backwards, whose compilers run the graph as it is, are spliced."""
from __future__ import annotations

import pytest
import torch
from aot_cache import aot_cache
from differential import differential
from functorch.compile import aot_function, make_boxed_func, nop
from torch._dynamo.backends.common import aot_autograd

import compiled_bw

pytestmark = pytest.mark.slow   # torch.compile'd forwards

CALLS: list = []


def _fw(gm, example_inputs):
    return make_boxed_func(gm.forward)


def _bw(gm, example_inputs):
    """A user's bw_compiler: records the graph, and its compiled backward records each run and
    scales the grads it returns (what a custom compiler may do: eager runs it)."""
    CALLS.append(("bw_compiler", len(gm.graph.nodes)))

    def run(args):
        CALLS.append("compiled backward")
        return [None if g is None else g * 2 for g in gm(*args)]
    run._boxed_call = True
    return run


def _user_bw_compiler(fn):
    return torch.compile(fn, backend=aot_autograd(fw_compiler=_fw, bw_compiler=_bw))


def _user_inner_compile(fn):
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    def inner(gm, example_inputs, **kwargs):
        CALLS.append(("inner_compile", len(gm.graph.nodes)))
        return compile_fx_inner(gm, example_inputs, **kwargs)
    return torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, inner_compile=inner))


def _aot_function(fn):
    return aot_function(fn, fw_compiler=_fw, bw_compiler=_bw)


@pytest.mark.parametrize("compile_with", [_user_bw_compiler, _user_inner_compile, _aot_function],
                         ids=["aot_autograd", "compile_fx_inner_compile", "aot_function"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_backends_own_bw_compiler_is_called_as_eager_calls_it(compile_with, backend):
    def build():
        torch._dynamo.reset()
        lin = torch.nn.Linear(4, 3)
        w = torch.randn(3, requires_grad=True)
        f = compile_with(lambda x, w, weight, bias:
                         (torch.nn.functional.linear(x, weight, bias).tanh() * w).sin())
        return [lin, w, f, torch.randn(5, 4)]

    def step(st):
        lin, w, f, x = st
        lin.zero_grad(set_to_none=True)
        w.grad = None
        CALLS.clear()
        f(x, w, lin.weight, lin.bias).pow(2).sum().backward()
        # the compiler's calls and its compiled backward's runs are side effects eager shows
        return [lin.weight.grad.clone(), lin.bias.grad.clone(), w.grad.clone(), list(CALLS)]
    with aot_cache(False):      # (a warm cache entry would skip the compilers in both runs)
        st = differential(build, step, steps=2, backend=backend)
    assert any("own bw_compiler" in n for n in st.notes), st.notes
    assert "custom CompiledFunctionBackward" in compiled_bw.last_graph().code


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_bw_compiler_that_runs_the_graph_is_spliced(backend):
    def build():
        torch._dynamo.reset()
        lin = torch.nn.Linear(4, 3)
        return [lin, torch.compile(lambda x: lin(x).tanh(), backend=backend), torch.randn(5, 4)]

    def step(st):
        lin, f, x = st
        lin.zero_grad(set_to_none=True)
        f(x).sum().backward()
        return [lin.weight.grad.clone(), lin.bias.grad.clone()]
    st = differential(build, step, steps=2, backend="eager")
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "custom CompiledFunctionBackward" not in code, (st.notes, code)


def test_aot_function_with_nop_is_spliced():
    def build():
        w = torch.randn(3, requires_grad=True)
        return [w, aot_function(lambda x, w: (x * w).sin(), fw_compiler=nop), torch.randn(3)]

    def step(st):
        w, f, x = st
        w.grad = None
        f(x, w).sum().backward()
        return [w.grad.clone()]
    st = differential(build, step, steps=2, backend="eager")
    assert "aot0_" in compiled_bw.last_graph().code, (st.notes, compiled_bw.explain())
