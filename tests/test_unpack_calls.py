"""Plain saved-tensor hooks with the node's formula traced: each unpack an opaque call in the graph.

Consumes programs whose built-in nodes' saved tensors carry user `saved_tensors_hooks` pairs
or `save_on_cpu`; produces eager vs compiled_bw comparisons (tests/differential.py,
`strict=True`: nothing falls back) of grads and of logs of every unpack-hook call (in order,
with the `_current_autograd_node()` the hook sees and what it was given), and checks that the
graph holds unpack calls feeding traced formulas (calls/unpacked.py Note [Unpack calls]).
Eager semantics: a node unpacks its saved tensors when it runs, in the order its apply reads
them, each once per backward, that node current; with retain_graph=False the packed objects
are freed right after the node ran.  The first capture of a graph runs the real nodes and
records what their unpacks return, the second traces (captures=2).  Runs on both backends.
"""
import gc
import weakref

import pytest
import torch
from differential import differential, grads

import compiled_bw

pytestmark = pytest.mark.both_backends


def _node_name():
    n = torch._C._current_autograd_node()
    return None if n is None else type(n).__name__


def _build():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 6))
    return [m, torch.randn(5, 6), []]


class Packed:
    """A packed object that is not a tensor (weakref-able, holds the tensor it packed)."""

    def __init__(self, t):
        self.t = t


def _unpack_calls(gm) -> list:
    return [n.args[2] for n in gm.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.compiled_bw.opaque.default and n.args[2].startswith("unpack")]


def _logging_step(pack, unpack, retain=False):
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def p(t):
            return pack(t)

        def u(packed):
            t = unpack(packed)
            log.append((_node_name(), tuple(t.shape), tuple(t.stride()), t.dtype))
            return t
        with torch.autograd.graph.saved_tensors_hooks(p, u):
            y = m(x.requires_grad_()) * x
        (y.sin() * y).sum().backward(retain_graph=retain)
        return [*grads(m), x.grad, list(log)]
    return step


def test_unpack_calls_in_eagers_order_feeding_the_formula():
    # bf16 compression: a formula fed the packed bf16 tensor instead of the unpacked fp32 one
    # would give other grads; the log holds every unpack (order, node, what it returned)
    step = _logging_step(lambda t: t.to(torch.bfloat16), lambda p: p.to(torch.float32))
    differential(_build, step, strict=True, captures=2, steps=4)
    names = _unpack_calls(compiled_bw.last_graph())
    assert "unpack AddmmBackward0" in names and "unpack GeluBackward0" in names, names


def test_unpack_calls_take_no_grads():
    """An unpack call needs nothing of its node's grads but on its error path (it builds them
    from their metadata there), so they are not its inputs: Inductor may free or reuse them."""
    step = _logging_step(lambda t: t.to(torch.bfloat16), lambda p: p.to(torch.float32))
    differential(_build, step, strict=True, captures=2, steps=3)
    calls = [n for n in compiled_bw.last_graph().graph.nodes
             if n.op == "call_function" and str(n.args[-1]).startswith("unpack ")]
    assert calls and all(list(n.args[1]) == [] for n in calls), [n.args for n in calls]


def test_unpack_returning_other_strides():
    # the unpack returns a column-major copy: the formula is traced on that layout
    def unpack(p):
        return p.t().contiguous().t() if p.dim() == 2 else p.clone()
    step = _logging_step(lambda t: t.detach().clone(), unpack)
    differential(_build, step, strict=True, captures=2, steps=4)
    assert _unpack_calls(compiled_bw.last_graph())


def test_unpack_strides_changing_between_steps():
    # what a later unpack returns in another layout (same values) is copied into the traced one
    def build():
        return [*_build(), [0]]

    def step(st):
        m, x, log, n = st
        n[0] += 1
        flip = n[0] > 2

        def unpack(p):
            log.append((_node_name(), tuple(p.t.shape)))
            t = p.t
            return t.t().contiguous().t() if flip and t.dim() == 2 else t
        m.zero_grad(set_to_none=True)
        log.clear()
        with torch.autograd.graph.saved_tensors_hooks(Packed, unpack):
            y = m(x.requires_grad_())
        y.pow(2).sum().backward()
        return [*grads(m), x.grad, list(log)]
    # the copy goes into the traced layout (opaque.py Note [Opaque output layout]); unpack
    # calls do not take their node's grads, so no later call sees another layout: no recapture
    differential(build, step, strict=True, captures=2, steps=5)


def test_nested_hooks_and_save_on_cpu():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: ("outer", t * 2), lambda p: log.append(("outer", _node_name())) or p[1] / 2):
            h = m[0](x.requires_grad_())
            with torch.autograd.graph.saved_tensors_hooks(
                    lambda t: t.neg(), lambda p: log.append(("inner", _node_name())) or p.neg()):
                h = m[1](h)
            with torch.autograd.graph.save_on_cpu():
                h = m[2](h).tanh()
        (h * h).sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2, steps=4)
    names = _unpack_calls(compiled_bw.last_graph())
    assert {"unpack AddmmBackward0", "unpack GeluBackward0", "unpack TanhBackward0"} <= set(names)


def test_packed_objects_freed_when_eager_frees_them():
    # retain_graph=False: each node's packed objects are freed right after it ran -- a tensor
    # hook on the grad flowing out of the first Linear sees which are still alive
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        refs = []

        def pack(t):
            p = Packed(t)
            refs.append((len(refs), weakref.ref(p)))
            return p
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda p: p.t):
            h = m[0](x.requires_grad_())
            h.register_hook(lambda g: log.append([k for k, r in refs if r() is not None]))
            y = m[2](m[1](h))
        y.pow(2).sum().backward()
        gc.collect()
        log.append([k for k, r in refs if r() is not None])
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2, steps=4)
    assert _unpack_calls(compiled_bw.last_graph())


def test_retain_graph_unpacks_again():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with torch.autograd.graph.saved_tensors_hooks(
                Packed, lambda p: log.append(_node_name()) or p.t):
            y = m(x.requires_grad_()).sin().sum()
        y.backward(retain_graph=True)
        y.backward()
        return [*grads(m), x.grad, list(log)]
    # a graph per retain_graph value; what the first recorded serves both
    differential(_build, step, strict=True, captures=3, steps=4)


def test_unpack_hook_raising_on_a_later_step():
    def build():
        return [*_build(), [0]]

    def step(st):
        m, x, log, n = st
        n[0] += 1

        def unpack(p):
            log.append(_node_name())
            if n[0] == 3 and _node_name() == "GeluBackward0":
                raise ValueError("unpack failed")
            return p
        m.zero_grad(set_to_none=True)
        log.clear()
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = m(x.requires_grad_())
        try:
            y.pow(2).sum().backward()
        except ValueError as e:
            return [str(e), *grads(m), x.grad, list(log)]
        return ["ok", *grads(m), x.grad, list(log)]
    differential(build, step, strict=True, captures=2, steps=4)


def test_unpack_hook_returning_a_non_tensor_on_a_later_step():
    def build():
        return [*_build(), [0]]

    def step(st):
        m, x, _log, n = st
        n[0] += 1
        m.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: t, lambda p: 3 if n[0] == 3 else p):
            y = m(x.requires_grad_())
        try:
            y.pow(2).sum().backward()
        except TypeError as e:
            return [str(e), *grads(m), x.grad]
        return ["ok", *grads(m), x.grad]
    differential(build, step, strict=True, captures=2, steps=4)


def test_unpack_hook_returning_a_wrong_shape_on_a_later_step():
    # eager's formula runs on what the unpack returned and raises its own error; the traced
    # graph cannot, so the real node runs on the unpacked tensors and raises eager's error
    def build():
        return [*_build(), [0]]

    def step(st):
        m, x, log, n = st
        n[0] += 1

        def unpack(p):
            log.append(_node_name())
            if n[0] >= 3 and _node_name() == "AddmmBackward0":
                return p[..., :1]
            return p
        m.zero_grad(set_to_none=True)
        log.clear()
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = m(x.requires_grad_())
        try:
            y.pow(2).sum().backward()
        except RuntimeError as e:
            return [str(e), *grads(m), x.grad, list(log)]
        return ["ok", *grads(m), x.grad, list(log)]
    differential(build, step, strict=True, captures=2, steps=4, allow_errors=True)


def test_unpack_of_an_expanded_tensor_then_of_a_dense_one():
    """PyTorch's test_default_saved_tensors_hooks_double_backward: the double backward's nodes
    save the expanded grad of a sum (stride 0).  The first step's identity unpack returns it
    as saved; the next steps' hooks pack `2 * x`, dense, under the same graph.  No copy can
    take the recorded layout: the formula is traced on a contiguous tensor instead."""
    def build():
        return torch.randn(5, requires_grad=True), [0]

    def step(st):
        a, n = st
        a.grad = None
        pack = (lambda x: x) if n[0] == 0 else (lambda x: 2 * x)
        n[0] += 1
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            (g,) = torch.autograd.grad((a ** 3).sum(), (a,), create_graph=True)
            g.sum().backward()
        return a.grad
    differential(build, step, steps=4, captures=None, fallbacks=None, strict=False)
