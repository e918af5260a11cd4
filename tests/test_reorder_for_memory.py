"""passes/reorder_for_memory.py: which nodes move, and that moving never breaks the graph.

Graph-level tests (the pass on make_fx graphs, printed order compared), then a differential
test of a backward whose formula reduces a saved activation (the case the pass moves).
"""
import torch
from differential import differential, grads
from torch.fx.experimental.proxy_tensor import make_fx

from compiled_bw.calls.opaque import OpaqueSite, opaque, register_site
from compiled_bw.core.thread import current_step
from compiled_bw.passes.reorder_for_memory import reorder_for_memory
from compiled_bw.trace.trace import TraceStep


def _order(gm) -> list:
    return [n.name for n in gm.graph.nodes if n.op == "call_function"]


def _reorder(f, *shapes):
    gm = make_fx(f, tracing_mode="fake")(*(torch.randn(s) for s in shapes))
    before = _order(gm)
    gm = reorder_for_memory(gm)
    gm.graph.lint()
    gm.recompile()
    return before, _order(gm)


def test_reduction_of_a_saved_input_moves_up_same_size_ops_stay():
    def f(g, a, b):
        h = g.sin().cos()
        s = a.sum()          # last use of `a`, frees 4 KB for 4 B: moved to the top
        p = b.pow(2)         # last use of `b`, allocates as much as it frees: stays
        return [h * s * p]
    before, after = _reorder(f, (32, 32), (32, 32), (32, 32))
    assert before == ["sin", "cos", "sum_1", "pow_1", "mul", "mul_1"]
    assert after == ["sum_1", "sin", "cos", "pow_1", "mul", "mul_1"]


def test_does_not_move_a_last_use_before_the_other_users_of_what_it_frees():
    # Moving x1 above w1 would not free t (w1 still reads it) but would keep w1's inputs
    # alive longer: in a layer chain this kept every layer's grad alive to the end.
    def f(g, a, b):
        t = g.sin()
        w1 = t * a
        x1 = t * b
        return [w1, x1.cos()]
    before, after = _reorder(f, (64, 64), (64, 64), (64, 64))
    assert before == after == ["sin", "mul", "mul_1", "cos"]


def test_never_moves_across_an_opaque_call_or_a_mutation():
    def f(g, a):
        h = g.sin()
        h.add_(1)                        # a mutation: a barrier
        spec = ((8, 8), torch.float32, torch.device("cpu"))
        k = opaque(register_site(OpaqueSite(0, "X", "node", ((0, 0),), (spec,))), [h], "node X")[0]
        return [k * a.sum()]
    with current_step(TraceStep()):
        before, after = _reorder(f, (8, 8), (64, 64))
    assert before == ["sin", "add_", "opaque", "getitem", "sum_1", "mul"]
    assert after == ["sin", "add_", "opaque", "sum_1", "getitem", "mul"]   # not above opaque


def test_never_moves_across_a_mutation():
    def f(g, a):
        h = g.sin()
        h.add_(1)
        k = h.cos()
        return [k * a.sum()]
    before, after = _reorder(f, (8, 8), (64, 64))
    assert before == ["sin", "add_", "cos", "sum_1", "mul"]
    assert after == ["sin", "add_", "sum_1", "cos", "mul"]      # up to the mutation, not above


def test_differential_with_a_reduced_saved_activation():
    def build():
        return [torch.randn(64, 64, requires_grad=True), torch.randn(64, 64, requires_grad=True)]

    def step(ps):
        x, w = ps
        for p in ps:
            p.grad = None
        y = (x.tanh() @ w).sigmoid()
        (y * torch.linalg.vector_norm(x)).sum().backward()   # norm_backward reduces x
        return grads(ps)
    differential(build, step)
