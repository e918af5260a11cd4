"""Grads summed in an input buffer, and leaf grads stolen or copied, with eager's strides.

Eager's InputBuffer sums two grads for one input in place (`old.add_(g)`: old's strides) when
grad mode is off and the buffer holds the only reference to `old` and its storage, else out of
place (TensorIterator's strides, which may differ on dims of size 1).  AccumulateGrad steals a
grad only the engine holds and copies one that another pending buffer still holds (to the
leaf's strides).  Values are equal either way; what a user sees is `.grad.stride()`, grad()'s
results and what hooks get on dims of size 1.  Each program returns the tensors themselves
(not clones), so the differential helper compares their strides with eager's.
(trace/holders.py Note [Eager's in-place sums and copied leaf grads].)
"""
import pytest
import torch
from differential import differential, grads_raw

pytestmark = pytest.mark.both_backends


def _leaf(*shape, stride=None):
    def build():
        t = torch.randn(*shape)
        if stride is not None:
            t = torch.empty_strided(shape, stride).copy_(t)
        return [t.requires_grad_(), [torch.randn(*shape) for _ in range(2)]]
    return build


def test_a_fresh_grad_is_summed_in_place():
    """exp's grad (fresh, only its buffer holds it) arrives first; the transposed grad is
    added into it in place: x's grad keeps exp's strides (2, 2, 1), where `old + g` gives
    (2, 4, 1)."""
    def step(st):
        x, gs = st
        x.grad = None
        r1 = x.transpose(0, 2)
        r2 = x.exp()
        torch.autograd.backward([r1, r2], gs)
        return grads_raw([x])
    differential(_leaf(2, 1, 2), step, steps=2)


def test_a_hook_sees_the_sum_made_in_place():
    """A tensor hook on `a` gets its buffer's sum: exp's fresh grad with the transposed one
    added into it, in exp's grad's strides."""
    def step(st):
        x, gs = st
        x.grad = None
        seen = []
        a = x * 2
        a.register_hook(lambda g: seen.append(g.stride()))
        torch.autograd.backward([a.transpose(0, 2), a.exp()], gs)
        return [x.grad, seen]
    differential(_leaf(2, 1, 2), step, steps=2)


def _fanned(x):
    """a's buffer gets AddBackward0's grad (also sent to b's buffer) first, then a
    transposed one."""
    a = x * 2
    b = x * 3
    r2 = a.transpose(0, 2)
    r1 = (a + b).exp()
    return a, r1, r2


def test_a_grad_another_buffer_still_holds_is_summed_out_of_place():
    """b has not run when a's second grad arrives: both buffers hold AddBackward0's one
    tensor, so eager sums out of place; a hook on `a` sees that sum."""
    def step(st):
        x, gs = st
        x.grad = None
        seen = []
        a, r1, r2 = _fanned(x)
        a.register_hook(lambda g: seen.append(g.stride()))
        torch.autograd.backward([r1, r2], gs)
        return [x.grad, seen]
    differential(_leaf(2, 1, 2), step, steps=2)


def test_grad_of_a_sum_whose_other_holder_was_pruned():
    """grad(inputs=[a]) runs no b: AddBackward0's tensor goes to a's buffer only, and eager
    sums into it in place."""
    def step(st):
        x, gs = st
        a, r1, r2 = _fanned(x)
        return list(torch.autograd.grad([r1, r2], [a], gs))
    differential(_leaf(2, 1, 2), step, steps=2)


def test_a_root_grad_is_never_summed_into():
    """The caller holds its root grads: a sum into one is out of place."""
    def step(st):
        x, gs = st
        x.grad = None
        y = x * 1
        torch.autograd.backward([y, y.transpose(0, 2)], [gs[0], gs[1]])
        return grads_raw([x])
    differential(_leaf(2, 1, 2), step, steps=2)


def test_a_leaf_copies_a_grad_another_buffer_holds():
    """AddBackward0 hands one grad to the leaf and to ExpBackward0; the leaf's AccumulateGrad
    runs first and copies it to the leaf's strides ((2,) here, a size-1 view's)."""
    def build():
        return [torch.randn(2)[::2].requires_grad_(), torch.randn(1, requires_grad=True)]

    def step(ps):
        a, b = ps
        for p in ps:
            p.grad = None
        (b.exp() + a).mul(3).sum().backward()
        return grads_raw(ps)
    differential(build, step, steps=2)


def _two_rows():
    return [torch.randn(1, 3, requires_grad=True), torch.randn(1, 3, requires_grad=True),
            torch.randn(3, 1)]


@pytest.mark.parametrize("hooked", [False, True], ids=["after", "delivery_point"])
def test_a_leaf_copies_a_transposed_grad_another_buffer_holds(hooked):
    """The shared grad is a transposed view ((1, 3) with strides (1, 1)); eager's copy has
    the leaf's (3, 1).  With a post-accumulate-grad hook on the leaf its AccumulateGrad runs
    inside the graph, at eager's point, and the hook sees that copy."""
    def step(st):
        a, b, g = st
        a.grad = b.grad = None
        seen = []
        if hooked:
            h = a.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.stride()))
        (b.exp() + a).t().backward(g)
        if hooked:
            h.remove()
        return [*grads_raw([a, b]), seen]
    differential(_two_rows, step, steps=2)


def test_a_leaf_steals_a_grad_nothing_else_holds():
    """The same transposed grad reaching the leaf alone is stolen: (1, 1) strides."""
    def build():
        return [torch.randn(1, 3, requires_grad=True), torch.randn(3, 1)]

    def step(st):
        a, g = st
        a.grad = None
        (a * 2).t().backward(g)
        return grads_raw([a])
    differential(build, step, steps=2)


def test_two_leaves_given_one_grad():
    """AddBackward0's one grad for two leaves: the first AccumulateGrad to run copies it
    (the other leaf's buffer holds it), the second steals it."""
    def step(st):
        a, b, g = st
        a.grad = b.grad = None
        (a + b).t().backward(g)
        return grads_raw([a, b])
    differential(_two_rows, step, steps=2)


def test_create_graph_sums_out_of_place():
    """With grad mode on (create_graph=True) eager's buffers always sum out of place and
    AccumulateGrad never steals."""
    def step(st):
        x, gs = st
        x.grad = None
        r1 = x.transpose(0, 2)
        r2 = x.exp()
        gx, = torch.autograd.grad([r1, r2], [x], gs, create_graph=True)
        return [gx.detach(), gx.stride()]
    differential(_leaf(2, 1, 2), step, steps=2)


def test_a_view_a_formula_returns_is_summed_out_of_place():
    """mm's backward gives a column-major input's grad as `.t()` of a fresh mm: the view keeps
    its base alive (a second reference to the storage), so eager sums into it out of place."""
    def build():
        return [torch.randn(2, 1).transpose(-1, -2).requires_grad_(), torch.randn(1, 1)]

    def step(st):
        x, g = st
        x.grad = None
        ((x @ x.mT) * g).sum().backward()
        return grads_raw([x])
    differential(build, step, steps=2)


class _Restrided(torch.autograd.Function):
    """Identity; its backward returns its (1, 2) grad with strides (1, 1)."""
    compiled_bw_traceable = False

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return torch.empty_strided(g.shape, (1, 1)).copy_(g)


def test_an_opaque_outputs_size1_strides_are_kept():
    """A custom backward (an opaque call) returns a (1, 2) grad with strides (1, 1) where the
    graph promised contiguous (2, 1): the same addresses, so it goes on uncopied, and eager's
    `g * 3` keeps (1, 1).  The eager backend (every graph's first backward) computes on the
    real tensor; the run records the layout, and the next backward is recaptured with it, so
    Inductor's code gives (1, 1) too (calls/opaque.py Note [Opaque output layout])."""
    def build():
        return [torch.randn(1, 2).requires_grad_(), torch.randn(1, 2)]

    def step(st):
        x, g = st
        return list(torch.autograd.grad(_Restrided.apply(x * 3), x, g))
    differential(build, step, steps=3, captures=2)


def test_copyslices_grad_for_the_base_has_the_bases_layout():
    """An in-place write into a view (`v[1].add_(1)`) makes CopySlices, run as the real node:
    its grad for the base is made with the base's strides (here exp's transposed (1, 2)), which
    the graph knows before the call, so the mul and exp grads after it, and grad()'s result,
    have eager's layout from the first backward, with one capture."""
    def build():
        return [torch.randn(2, 2).transpose(-1, -2).requires_grad_(), torch.randn(2, 2)]

    def step(st):
        x, g = st
        v = x.exp().clone()
        v.mul_(2)
        v[1].add_(1)
        return list(torch.autograd.grad(v, x, g))
    differential(build, step, steps=2)


def test_a_sum_into_copyslices_grad_for_the_base_is_in_place():
    """CopySlices' grad for the base (stride (2,): x's, through clone; a dim of size 1) is a
    tensor only the engine holds: AddBackward0 hands it to clone's path and to exp's, and x's
    buffer sums exp's grad into it in place, keeping (2,); `old + g` gives (1,)."""
    def build():
        return [torch.randn(2)[::2].requires_grad_(), torch.randn(1)]

    def step(st):
        x, g = st
        x.grad = None
        u = x.exp().exp()
        v = x.clone()
        v.add_(u)
        v.select(0, 0).sigmoid_()
        (v * g).sum().backward()
        return grads_raw([x])
    differential(build, step, steps=2)


def test_a_sum_into_copybackwards_pass_through_is_in_place():
    """`v.copy_(x)` makes CopyBackwards, whose grad for x is the very tensor it got
    (`grad.to(src_options)`, tensor.cpp): here CopySlices' grad for the base, stride (2,) (x's,
    through clone), which only the engine holds.  x's buffer sums clone's zeros into it in
    place, keeping (2,); `old + g` gives (1,).  Found by the strict random-program fuzzer
    (seed 2)."""
    def build():
        return [torch.randn(2)[::2].requires_grad_(), torch.randn(1)]

    def step(st):
        x, g = st
        x.grad = None
        v = x.clone()
        v.copy_(x)
        v[0].add_(1)
        (v * g).sum().backward()
        return grads_raw([x])
    differential(build, step, steps=2)


@pytest.mark.parametrize("case", ["dtype", "complex", "broadcast", "fanned"])
def test_copybackwards_grads_and_layouts(case):
    """CopyBackwards' grads as eager's: a copy into another dtype (`grad.to(float64)`), a real
    source copied into a complex tensor (`real(grad)` first), a broadcast source (its grad
    summed to its shape by the engine), and a pass-through grad that AddBackward0 also hands to
    exp (held twice while exp's buffer waits: summed out of place)."""
    def build():
        x = torch.randn(2, 1, 3, dtype=torch.float64 if case == "dtype" else torch.float32)
        return [x.transpose(0, 2).requires_grad_(), torch.randn(3, 1, 2)]

    def step(st):
        x, g = st
        x.grad = None
        if case == "complex":
            v = torch.zeros(3, 1, 2, dtype=torch.complex64)
            v.copy_(x)
            out = torch.view_as_real(v * 2).sum(-1) * g
        elif case == "broadcast":
            v = torch.zeros(2, 3, 1, 2)
            v.copy_(x)
            out = v.exp().sum(0) * g
        elif case == "fanned":
            v = x * 2
            v.copy_(x)
            out = (v + x.exp()) * g
        else:
            v = torch.zeros(3, 1, 2)
            v.copy_(x)
            out = v * g
        out.sum().backward()
        return grads_raw([x])
    differential(build, step, steps=2)
