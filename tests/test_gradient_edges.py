"""GradientEdge roots and inputs, a later backward through nodes an earlier one freed, and
grad() inputs in any order: as eager autograd, compiled.

torch.autograd.grad/backward take `torch.autograd.graph.GradientEdge`s (a node and one of its
inputs) wherever they take tensors; pipeline parallelism's zero-bubble schedules split each
stage's backward into an input pass and weight passes from the edges it kept
(torch.distributed.pipelining._backward; the 2-process schedules are in tests/dist_cases.py).
Eager's rules checked here (engine.cpp, python_engine.cpp):
  - an edge root starts the backward at that node's input; an edge input of grad() captures
    what arrives there; backward(inputs=edge of a leaf's AccumulateGrad) accumulates into it;
  - backward(inputs=edge of a non-leaf node) runs up to that node (its hooks run) and stores
    nothing: eager autograd runs it;
  - a backward with retain_graph=False frees only the nodes it ran: a later backward whose
    graph passes through them but never needs them runs (and one that needs them raises
    "backward through the graph a second time");
  - grad()'s results follow its inputs' order, and its unused-input error names the index in
    the caller's order.
"""
from __future__ import annotations

import pytest
import torch
from differential import differential
from torch import nn
from torch.autograd.graph import GradientEdge, get_gradient_edge

pytestmark = pytest.mark.both_backends


def _weights():
    return {"w": torch.randn(6, 6, requires_grad=True), "v": torch.randn(6, 4, requires_grad=True)}


def test_grad_from_an_edge_root_to_edge_inputs():
    def step(s):
        hooks = s["log"]
        x = torch.randn(5, 6)
        a = torch.tanh(x @ s["w"])
        a.grad_fn.register_prehook(lambda g: hooks.append(("tanh pre", tuple(g[0].shape))))
        b = a @ s["v"]
        out = b.sin()
        g = torch.randn(5, 4)
        got = torch.autograd.grad([GradientEdge(out.grad_fn, 0)], [get_gradient_edge(s["w"]),
                                  get_gradient_edge(a), get_gradient_edge(s["v"])],
                                  grad_outputs=[g])
        return got, list(hooks)

    differential(lambda: {**_weights(), "log": []}, step)


def test_backward_into_a_leafs_edge_accumulates_it():
    def step(s):
        s["w"].grad = s["v"].grad = None
        x = torch.randn(5, 6)
        loss = torch.tanh(x @ s["w"]) @ s["v"]
        torch.autograd.backward([GradientEdge(loss.grad_fn, 0)], [torch.randn(5, 4)],
                                inputs=[get_gradient_edge(s["w"])])
        return s["w"].grad, s["v"].grad

    differential(_weights, step)


def test_backward_into_a_non_leaf_edge_runs_eager_autograd():
    def step(s):
        log = s["log"]
        x = torch.randn(5, 6)
        a = torch.tanh(x @ s["w"])
        a.grad_fn.register_hook(lambda gi, go: log.append(tuple(go[0].shape)))
        loss = (a @ s["v"]).sum()
        loss.backward(inputs=[get_gradient_edge(a)])
        return s["w"].grad, s["v"].grad, a.grad_fn.name(), list(log)

    st = differential(lambda: {**_weights(), "log": []}, step, captures=0, fallbacks=3)
    assert st.fallback_reasons == ["backward(inputs=...) with a non-leaf input"] * 3


def _chain():
    torch.manual_seed(0)
    return [torch.randn(4, 4, requires_grad=True) for _ in range(3)]


def test_a_later_grad_passes_through_nodes_an_earlier_one_freed():
    """grad(h.sum(), [w0]) frees h's nodes; grad(out, [w2]) walks through them on its way to
    w0 and w1 but never runs them (eager's exec_info)."""
    def step(ws):
        x = torch.randn(4, 4)
        h = torch.sin(x @ ws[0])
        mid = torch.tanh(h @ ws[1])
        out = (mid @ ws[2]).cos().sum()
        g0, = torch.autograd.grad(h.sum(), [ws[0]])
        g2, = torch.autograd.grad(out, [ws[2]])
        return g0, g2

    differential(_chain, step, captures=2)


def test_a_backward_that_needs_a_freed_node_raises_eagers_error():
    def step(ws):
        x = torch.randn(4, 4)
        h = torch.sin(x @ ws[0])
        out = (h @ ws[1]).cos().sum()
        torch.autograd.grad(h.sum(), [ws[0]])
        return torch.autograd.grad(out, [ws[1], ws[0]])

    st = differential(_chain, step, captures=1, fallbacks=3, allow_errors=True)
    assert all("backward through the graph a second time" in r for r in st.fallback_reasons)


def test_grad_inputs_in_another_order_each_step():
    """One graph serves every order of grad()'s inputs; results follow the caller's order."""
    orders = [(0, 1, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0)]

    def step(state):
        ws, counter = state
        k = next(counter)
        x = torch.randn(4, 4)
        out = torch.tanh(x @ ws[0] @ ws[1]).sum()
        order = orders[k % len(orders)]
        # steps 4-7: ws[2] is unused and allow_unused=False: eager's error names its position
        return torch.autograd.grad(out, [ws[i] for i in order], allow_unused=k < 4)

    st = differential(lambda: (_chain(), iter(range(8))), step, steps=8, captures=1,
                      fallbacks=4, allow_errors=True)
    assert st.cache_hits == 3


class _Stage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_pipeline_stages_split_backward(checkpointed):
    """stage_backward_input then stage_backward_weight, as the zero-bubble schedules call
    them for each microbatch: an input pass (retain_graph=True, prehooks keep the grads
    arriving at each param group's nodes) and one weight pass per param group (GradientEdge
    roots and inputs, retain_graph=False)."""
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    def build():
        return nn.Sequential(_Stage(), _Stage())

    def step(model):
        model.zero_grad(set_to_none=True)
        for _ in range(2):      # two microbatches
            x = torch.randn(3, 8, requires_grad=True)
            if checkpointed:
                from torch.utils.checkpoint import checkpoint
                out = checkpoint(model, x, use_reentrant=False)
            else:
                out = model(x)
            dx, groups = stage_backward_input([out], [torch.randn(3, 8)], [x],
                                              model.parameters())
            stage_backward_weight(model.parameters(), groups)
        return dx, [p.grad for p in model.parameters()]

    differential(build, step, captures=None)
