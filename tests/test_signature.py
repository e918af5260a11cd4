"""The signature must change whenever the traced graph would be wrong to reuse.

Each test varies one thing the graph bakes in, between steps of an otherwise identical
program, and checks (differentially) that grads stay eager's and that a recapture happened.
"""
import pytest
import torch
from differential import differential

import compiled_bw

pytestmark = pytest.mark.both_backends


def test_broadcast_shape_only_visible_in_input_metadata():
    # x + a.view(4) vs x + a.view(1, 4): same nodes and saved values, different sum_to.
    shapes = iter([(4,), (1, 4), (4,), (1, 4)])

    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(ps):
        x, a = ps
        for p in ps:
            p.grad = None
        s = next(shapes)
        b = (a * 1).view(s)
        y = (x + b) * 2
        torch.autograd.grad(y.sum(), [b])[0]
        return torch.autograd.grad((x + (a * 1).view(s)).pow(2).sum(), [x, a])
    shapes_eager = [(4,), (1, 4), (4,), (1, 4)]
    shapes = iter(shapes_eager * 2)
    st = differential(build, step, steps=4, captures=4)
    assert st.cache_hits == 4


def test_cat_with_non_grad_input_of_varying_size_runs_opaque():
    sizes = iter([1, 3, 1, 3] * 2)

    def build():
        return [torch.randn(2, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(ps):
        a, b = ps
        for p in ps:
            p.grad = None
        k = next(sizes)
        # total length fixed at 2 + 3 + 4; the offset of b moves with k
        y = torch.cat([a, torch.zeros(k), b * 1, torch.zeros(4 - k)])
        (y * torch.arange(9.0)).sum().backward()
        return [a.grad, b.grad]
    # CatBackward0 hides its inputs' sizes; with an invalid edge it must run opaque (the
    # real node knows the offsets), so one capture is right for every k.
    differential(build, step, steps=4, captures=1)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


def test_saved_tensor_modified_in_place_raises_eagers_error():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(ps):
        (x,) = ps
        y = x * 2
        z = y.exp()
        z.add_(1)          # ExpBackward0 saved its result: eager raises at backward
        z.sum().backward()
    st = differential(build, step, captures=0, fallbacks=3, strict=True, allow_errors=True)
    assert "inplace" in st.fallback_reasons[0]


def test_dtype_change_recaptures():
    dts = iter([torch.float32, torch.float64, torch.float32] * 2)

    def build():
        return [torch.randn(3, 3, requires_grad=True)]

    def step(ps):
        (w,) = ps
        w.grad = None
        x = torch.randn(2, 3, dtype=next(dts))
        (x @ w.to(x.dtype)).tanh().sum().backward()
        return [w.grad]
    differential(build, step, captures=2)


def test_inplace_between_two_backwards_of_a_retained_graph_raises():
    x = torch.randn(3, requires_grad=True)
    with compiled_bw.enable(strict=True):
        y = x * 2
        z = (y.sin()).sum()
        z.backward(retain_graph=True)
        with torch.no_grad():
            y.add_(1)                      # SinBackward0 saved y
        try:
            z.backward()
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e)
        else:
            raise AssertionError("no error: a stale saved tensor was used")


def test_nodes_that_saved_one_tensor_or_two_share_a_graph():
    """Whether two nodes saved the same tensor is not keyed (walk/fastwalk.py Note [Node-local
    tensor ids]): the graph reads each saved tensor as an input of its own, so one graph is
    right either way.  Alternating steps: c1 is c2 (two MulBackward0 nodes and the root grad
    hold one tensor) or not; grads stay eager's, one capture."""
    shared = iter([True, False, True, False] * 2)

    def build():
        return [torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)]

    def step(ps):
        w1, w2 = ps
        for p in ps:
            p.grad = None
        c1 = torch.randn(4, 5)
        c2 = c1 if next(shared) else torch.randn(4, 5)
        y = w1 * c1 + (w2 * c2).tanh() * c1
        y.backward(c2)
        return [w1.grad, w2.grad]
    st = differential(build, step, steps=4, captures=1)
    assert st.cache_hits == 3
