"""Dynamic shapes with background compile (the default): no step waits for a compile.

Each test runs a program over a sequence of sizes under eager autograd and under compiled_bw
on Inductor with background compile (differential: every grad, dtype and strides; it waits
for compiles after each step, so a graph's later steps run Inductor's code) and asserts the
captures and Inductor compiles it took.  A dynamic graph runs on the eager backend until its
Inductor compile lands (runtime/dynamic.py Note [Dynamic graphs compile in the background],
turned on here: it is off by default);
a static graph of a root that has a dynamic graph compiles only when its shape repeats
(runtime/run.py Note [Compile on repeat]).
"""
import pytest
import torch
from differential import differential, grads

from compiled_bw.runtime import dynamic


@pytest.fixture(autouse=True)
def _in_background(monkeypatch):
    # (off by default: runtime/dynamic.py Note [Dynamic graphs compile in the background])
    monkeypatch.setattr(dynamic, "COMPILE_IN_BACKGROUND", True)


def sized(sizes, make):
    def build():
        torch.manual_seed(0)
        return {"k": 0, "m": torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                                 torch.nn.Linear(8, 3))}

    def step(s):
        n = sizes[s["k"]]
        s["k"] += 1
        return make(s["m"], n)
    return build, step


def mlp(m, n):
    m.zero_grad()
    m(torch.randn(n, 4)).pow(2).mean().backward()
    return grads(m)


def branchy(m, n):
    # at n == 3 the forward takes another path: another autograd graph (as nn.MultiheadAttention
    # at batch 1), which no dynamic graph of the other one serves
    m.zero_grad()
    y = m(torch.randn(n, 4))
    if n == 3:
        y = y.tanh()
    y.pow(2).mean().backward()
    return grads(m)


def run(sizes, make, *, captures):
    build, step = sized(sizes, make)
    return differential(build, step, steps=len(sizes), backend="inductor", captures=captures)


def test_the_dynamic_graph_compiles_in_the_background():
    st = run([8, 16, 24, 32, 40], mlp, captures=2)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # both graphs compiled in the worker, none in a step; the dynamic graph's later steps ran
    # Inductor's code (its C entry point: the C++ hit path)
    assert st.inductor_compiles == 2 and st.background_compiles == 2, st
    assert st.dynamic_hits == 3 and st.native_runs == 3, st
    assert not st.fallback_reasons, st.fallback_reasons


def test_a_one_off_shape_is_not_compiled():
    st = run([8, 16, 3, 24, 32], branchy, captures=3)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # the graph of n == 3 ran once, on the eager backend: never compiled
    assert st.inductor_compiles == 2 and st.background_compiles == 2, st
    assert st.dynamic_hits == 2, st


def test_a_shape_that_repeats_compiles_at_its_first_hit():
    st = run([8, 16, 3, 3, 3, 24], branchy, captures=3)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # compiled after its second step; its third ran Inductor's code
    assert st.inductor_compiles == 3 and st.background_compiles == 3, st
    assert st.native_runs >= 2, st


def test_the_first_graph_compiles_after_its_first_run():
    # a root without a dynamic graph: compiled after its first run, not deferred to a repeat
    build, step = sized([8, 8, 8], mlp)
    st = differential(build, step, steps=3, backend="inductor")
    assert st.inductor_compiles == 1 and st.background_compiles == 1 and st.native_runs == 2, st


def test_a_compile_that_adds_shape_guards_is_refused():
    # Inductor's size-oblivious compile of this encoder's dynamic graph adds shape guards
    # (storage bounds) in the worker, which the graph's guards here would not check: the
    # compile is refused, the graph stays on the eager backend, with its reason; grads as eager
    def make(m, size):
        b, t = size
        m.zero_grad()
        m(torch.randn(b, t, 8)).pow(2).mean().backward()
        return grads(m)

    def build():
        torch.manual_seed(0)
        return {"k": 0, "m": torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True), 1)}
    sizes = [(3, 5), (4, 7), (2, 9), (5, 4)]

    def step(s):
        n = sizes[s["k"]]
        s["k"] += 1
        return make(s["m"], n)
    st = differential(build, step, steps=len(sizes), backend="inductor", captures=2,
                      fallbacks=None)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 2, st.recompile_reasons
    assert any("Inductor added shape guards" in r for r in st.fallback_reasons), \
        st.fallback_reasons
