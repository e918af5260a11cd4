"""Views in dynamic graphs: a view's backward reshapes the grad to sizes the node saved, which
the dynamic capture ties to the grad's own sizes (trace/dynamic.py Note [View sizes tied to
the grad's]).

Each test runs a program over a sequence of sizes under eager autograd and under compiled_bw
(differential: grads, dtypes, strides) and asserts the captures; no size or stride in the
dynamic graph is a floor division (what the reshape's reasoning between independent size
symbols gave, and Inductor then reasons over; the ties avoid it).
"""
import pytest
import torch
from differential import differential, grads

import compiled_bw


def run(sizes, backend, *, captures):
    def build():
        torch.manual_seed(0)
        return {"k": 0, "a": torch.nn.Linear(8, 16), "b": torch.nn.Linear(16, 8)}

    def step(s):
        b, t = sizes[s["k"]]
        s["k"] += 1
        s["a"].zero_grad()
        s["b"].zero_grad()
        x = torch.randn(b, t, 8)
        h = s["a"](x.reshape(b * t, 8)).relu()              # (b*t, 16)
        y = h.reshape(b, t, 16).transpose(0, 1)             # a view of the grad's product
        y = y.reshape(t * b, 16)                            # not viewable: a copy
        z = s["b"](y).reshape(t, b, 8).sum(0)
        z.pow(2).mean().backward()
        return grads(s["a"]) + grads(s["b"])
    return differential(build, step, steps=len(sizes), backend=backend, captures=captures)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_view_sizes_of_a_product_one_dynamic_graph(backend):
    st = run([(3, 5), (4, 7), (6, 2), (5, 9), (2, 11)], backend, captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 3, st.recompile_reasons
    divided = [f"{n.name}: {v.shape} {v.stride()}" for n, v in _vals(compiled_bw.last_graph())
               if "//" in f"{v.shape} {v.stride()}"]
    assert not divided, divided


def _vals(gm):
    return [(n, n.meta["val"]) for n in gm.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_view_sizes_equal_at_the_capture(backend):
    # b == t when the dynamic graph is captured: the reshape's sizes cannot be told apart by
    # their values, nothing is tied, the reshape reasons as before; later sizes still served
    st = run([(3, 5), (6, 6), (4, 7), (2, 9)], backend, captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 2, st.recompile_reasons
