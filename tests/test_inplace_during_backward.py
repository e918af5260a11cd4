"""Saved tensors modified in place by user code while the backward runs.

Eager autograd checks a saved tensor's version when the node that saved it runs
(SavedVariable::unpack), not when the backward starts: a hook, an unpack hook, a custom
backward or a post-accumulate-grad hook that modifies a tensor some later node saved makes that
node raise "modified by an inplace operation"; one that modifies a tensor whose node already
ran changes nothing.  Each test runs the same program under eager autograd and compiled_bw
(tests/differential.py compares grads, the full error text and hook logs), on both backends.
"""
from __future__ import annotations

import pytest
import torch
from differential import differential, selected_backend

import compiled_bw

pytestmark = pytest.mark.both_backends


def _modifies(t):
    def hook(g):
        with torch.no_grad():
            t.mul_(2)
        return g
    return hook


def test_tensor_hook_modifies_a_later_nodes_saved_nonleaf():
    # MulBackward0 (saved `b`, the output of `bl * 1`) runs after the hook on `z`'s grad:
    # eager names b's grad_fn in its error ("which is output 0 of Mul")
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, bl = st
        a.grad = bl.grad = None
        b = bl * 1
        z = (a * b).exp()
        z.register_hook(_modifies(b))
        z.sum().backward()
        return [a.grad, bl.grad]
    differential(build, step, allow_errors=True)


def test_tensor_hook_modifies_a_later_nodes_saved_output():
    # ExpBackward0 saved its result `y`; a hook on the next node's grad modifies it
    def build():
        return torch.randn(4, requires_grad=True)

    def step(a):
        a.grad = None
        y = a.exp()
        z = y * 3
        z.register_hook(_modifies(y))
        z.sum().backward()
        return [a.grad]
    differential(build, step, allow_errors=True)


def test_hook_modifies_a_saved_tensor_whose_node_already_ran():
    # `v`'s MulBackward0 (created last, so run first) reads b before `u`'s hook doubles it:
    # eager gives a.grad == the original b and no error; the compiled graph must not read b
    # after the hook either
    log = []

    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True),
                torch.randn(4)]

    def step(st):
        a, c, b0 = st
        a.grad = c.grad = None
        log.clear()
        b = b0.clone()
        u = c * 2
        u.register_hook(lambda g: (log.append("u"), _modifies(b)(g))[1])
        v = a * b
        (v.sum() + u.sum()).backward()
        return [a.grad, c.grad, b, list(log)]
    differential(build, step)


def test_leaf_saved_tensor_modified_by_a_custom_backward():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, other):
            ctx.other = other
            return x * 2

        @staticmethod
        def backward(ctx, g):
            with torch.no_grad():
                ctx.other.add_(1)
            return g * 2, None

    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3)]

    def step(st):
        a, w0 = st
        a.grad = None
        w = w0.clone()
        y = Scale.apply(a * w, w)       # MulBackward0 saved w (a leaf: no grad_fn in the text)
        y.sum().backward()
        return [a.grad]
    differential(build, step, allow_errors=True)


def test_post_accumulate_grad_hook_updates_its_parameter_in_place():
    # optimizer-in-backward: each parameter's hook steps it once its grad is in; no later node
    # reads it, so eager raises nothing, and neither may we
    def build():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        def sgd(p):
            with torch.no_grad():
                p.add_(p.grad, alpha=-0.1)
        for p in m.parameters():
            p.register_post_accumulate_grad_hook(sgd)
        return m, torch.randn(5, 4)

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        m(x).pow(2).sum().backward()
        return [p.detach().clone() for p in m.parameters()]
    differential(build, step)


def test_error_leaves_the_grads_eager_delivered():
    # a leaf delivered before the failing node keeps its grad, as in eager
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, c = st
        a.grad = c.grad = None
        b = a * 1
        late = a * b               # saves b; runs after c's branch
        early = c.exp()
        early.register_hook(_modifies(b))
        try:
            (late.sum() + early.sum()).backward()
        except RuntimeError as e:
            return [str(e), a.grad, c.grad]
        return ["no error", a.grad, c.grad]
    differential(build, step)


def test_traceable_hooks_packed_tensor_modified_is_an_error_not_a_stale_value():
    # eager unpacks the modified packed tensor; the compiled graph may have read it before the
    # hook ran, so compiled_bw raises its own error rather than risk a stale value (docs/semantics.md,
    # Known deviations)
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, c = st
        a.grad = c.grad = None
        held = []

        def pack(t):
            p = t.detach().clone()
            held.append(p)
            return p
        with compiled_bw.traceable_saved_tensors_hooks(pack, lambda p: p):
            z = a.sin()
        u = c * 2
        u.register_hook(_modifies_list(held))
        (z.sum() + u.sum()).backward()
        return [a.grad, c.grad]

    torch.manual_seed(0)
    st = build()
    with compiled_bw.enable(backend=selected_backend(), strict=True):
        compiled_bw.reset()
        for _ in range(2):          # the run that captures, and a cache hit
            with pytest.raises(RuntimeError, match="saved-tensor unpack \\(traceable_saved_tensors_hooks\\) of SinBackward0"):
                step(st)
            compiled_bw.wait_for_compiles()
            assert st[0].grad is None       # SinBackward0 and what follows never ran


def _modifies_list(held):
    def hook(g):
        with torch.no_grad():
            for t in held:
                t.mul_(2)
        return g
    return hook


class _SavesInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x


@pytest.mark.parametrize("leaf", [True, False])
def test_custom_functions_saved_tensor_modified_by_an_earlier_hook(leaf):
    # the custom node runs as a call and unpacks its saved tensors itself (through compiled_bw's
    # slots on both walks): eager's check and text there too
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, c = st
        a.grad = c.grad = None
        x = a if leaf else a * 1
        y = _SavesInput.apply(x)
        z = y * c
        z.register_hook(_modifies(x))
        z.sum().backward()
        return [a.grad, c.grad]
    differential(build, step, allow_errors=True)


def test_untraceable_nodes_saved_tensor_modified_by_an_earlier_hook():
    # IndexBackward0 with a boolean mask: its grad's shape depends on the mask's values, so the
    # real node runs as a call and unpacks its saved mask through compiled_bw's slots
    def build():
        return [torch.randn(6, requires_grad=True), torch.randn(6) > 0]

    def step(st):
        a, m0 = st
        a.grad = None
        mask = m0.clone()
        y = (a * 1)[mask]
        z = y.exp()
        z.register_hook(_modifies_mask(mask))
        z.sum().backward()
        return [a.grad]
    differential(build, step, allow_errors=True)


def _modifies_mask(mask):
    def hook(g):
        mask.logical_not_()
        return g
    return hook


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.complex64, torch.float16])
def test_error_text_names_the_type_as_eager(dtype):
    # eager's text names legacy types as Python does (torch.DoubleTensor) and others by their
    # dispatch key (CPUBFloat16Type, CPUComplexFloatType)
    def build():
        return [torch.randn(4, dtype=dtype, requires_grad=True), torch.randn(4, dtype=dtype)]

    def step(st):
        a, w0 = st
        a.grad = None
        w = w0.clone()
        z = (a * w) * 2
        z.register_hook(_modifies(w))
        z.abs().sum().backward()
        return [a.grad]
    differential(build, step, allow_errors=True)


def _saved_original(a):              # SinBackward0 saves its input y (eager keeps y itself)
    y = a * 2
    return y.sin(), y


def _saved_output(a):                # ExpBackward0 saves its result
    y = (a * 2).exp()
    return y, y


def _saved_second_output(a):         # y is output 1 of VarMeanBackward0; eager still says "0"
    _, y = torch.var_mean(a.reshape(2, 3) * 2, dim=0)
    return y.sin(), y


def _saved_leaf(a):                  # a leaf: eager names no grad_fn
    y = a.detach().clone().requires_grad_()
    return y.sin(), y


def _saved_by_a_custom_function(a):
    y = a * 2
    return _SavesInput.apply(y), y


@pytest.mark.parametrize("forward", [_saved_original, _saved_output, _saved_second_output,
                                     _saved_leaf, _saved_by_a_custom_function])
@pytest.mark.parametrize("grad_mode", [False, True])
def test_modified_between_two_backwards_of_a_retained_graph(forward, grad_mode):
    # The first backward (a capture on the first step) keeps the graph; the tensor a node saved
    # is then modified in place, and the second backward raises eager's error, naming what eager
    # names: a saved input's grad_fn as it is now (after an in-place op with grad on, the new
    # one), a saved output's node, none for a leaf (Note [What eager's unpack error names])
    def build():
        return torch.randn(6, requires_grad=True)

    def step(a):
        a.grad = None
        out, saved = forward(a)
        z = out.sum()
        z.backward(retain_graph=True)
        first = a.grad.clone()
        ctx = torch.enable_grad() if grad_mode and saved.grad_fn is not None else torch.no_grad()
        with ctx:
            saved.add_(1)
        z.backward()
        return [first, a.grad]
    # the second backward's walk meets the error and runs eager autograd (a recorded fallback)
    # or raises it from our slot: either way the text must be eager's
    differential(build, step, allow_errors=True, fallbacks=None, captures=None)


@pytest.mark.parametrize("hooked_runs_first", [True, False])
def test_tensor_hook_writing_into_a_grad_another_branch_reads(hooked_runs_first):
    """AddBackward0 hands its one grad tensor to both branches; a tensor hook on one branch
    writes into it (against the hook contract, but eager runs it).  The other branch's node
    reads the written values where it runs after the hook (eager runs the branch made later
    first: its sequence number is higher) and the unwritten ones where it runs before
    (backends/inductor.py Note [Inductor: one buffer for a value])."""
    def build():
        return [torch.randn(4, 5, requires_grad=True)]

    def step(st):
        (x,) = st
        x.grad = None
        if hooked_runs_first:
            other, hooked = x.sin(), x.exp()
        else:
            hooked, other = x.exp(), x.sin()
        hooked.register_hook(lambda g: g.add_(1))
        ((hooked + other) * torch.arange(20.0).view(4, 5)).sum().backward()
        return x.grad
    differential(build, step)
