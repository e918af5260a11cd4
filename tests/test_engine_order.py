"""ENGINE.md 1.5: our engine runs nodes in exactly eager's order (libstdc++ heap ties).

For random graphs, eager's order is recorded with node pre-hooks on one copy; our trace's
execution order (Plan.executed) is taken on an identical copy built from the same seed.
Nodes are labelled by sequence_nr relative to the root (leaves: by which leaf they are).
"""
import random

import pytest
import torch

from compiled_bw.graph.saved import gradient_edge, sequence_nr
from compiled_bw.trace.trace import Options, trace_backward
from compiled_bw.walk import fastwalk


def _build(seed):
    rnd = random.Random(seed)
    torch.manual_seed(seed)
    pool = [torch.randn(2, requires_grad=True) for _ in range(rnd.randint(3, 30))]
    leaves = list(pool)
    for _ in range(rnd.randint(3, 60)):
        a, b, k = rnd.choice(pool), rnd.choice(pool), rnd.random()
        pool.append(a * b if k < .3 else a + b if k < .6 else
                    torch.stack([a, b, rnd.choice(pool)]).sum(0) if k < .8 else a.exp())
    loss = sum(t.sum() for t in rnd.sample(pool, rnd.randint(1, len(pool))))
    return loss, leaves


def _label(node, base, leaves):
    if type(node).__name__ == "AccumulateGrad":
        return ("leaf", next(i for i, t in enumerate(leaves) if t is node.variable))
    return sequence_nr(node) - base


def _eager_order(seed):
    loss, leaves = _build(seed)
    root = loss.grad_fn
    base = sequence_nr(root)
    order, seen, stack = [], {root}, [root]
    while stack:
        n = stack.pop()
        n.register_prehook(lambda go, n=n: order.append(_label(n, base, leaves)))
        for nf, _ in n.next_functions:
            if nf is not None and nf not in seen:
                seen.add(nf)
                stack.append(nf)
    loss.backward()
    return order


def _our_order(seed):
    loss, leaves = _build(seed)
    w = fastwalk.walk([gradient_edge(loss)])
    slots = w.install()
    _, plan = trace_backward(w, Options(True, False, (), False), [torch.ones(())], slots)
    base = sequence_nr(w.nodes[0])
    return [_label(w.nodes[i], base, leaves) for i in plan.executed]


@pytest.mark.slow
def test_execution_order_matches_eager_on_random_graphs():
    bad = [s for s in range(100) if _eager_order(s) != _our_order(s)]
    assert not bad, f"order differs from eager for seeds {bad[:10]}"
