"""Engine task state that user code reads inside a backward, under compiled_bw as in eager.

Consumes: programs whose hooks / custom backwards query the running graph task; produces eager
vs compiled_bw comparisons (tests/differential.py).  Eager semantics (torch/csrc/autograd):
- `_is_checkpoint_valid()` is false while a task with a non-empty exec_info runs (grad(),
  backward(inputs=...): engine.cpp CheckpointValidGuard), so reentrant checkpoint raises
  "incompatible with .grad()" there (torch/utils/checkpoint.py);
- `_will_engine_execute_node(n)` is whether n is in the graph and, with an exec_info, needed
  or captured; it raises for a captured leaf-like node during grad() (init.cpp);
- `_get_current_graph_task_keep_graph()` is the task's retain_graph.
"""
import pytest
import torch
from differential import differential
from functions import Double  # a custom Function: one opaque call, the graph runs in the engine
from torch.utils.checkpoint import checkpoint

_keep_graph = torch._C._autograd._get_current_graph_task_keep_graph


def _ckpt_build():
    return torch.randn(4, requires_grad=True)


@pytest.mark.parametrize("how", ["grad", "backward_inputs"])
def test_reentrant_checkpoint_rejects_grad_and_inputs(how):
    def step(x):
        x.grad = None
        y = checkpoint(lambda t: t.sin() * 2, Double.apply(x), use_reentrant=True).sum()
        if how == "grad":
            return torch.autograd.grad(y, x)
        y.backward(inputs=[x])
        return x.grad

    differential(_ckpt_build, step, steps=2, allow_errors=True, captures=None)


def test_reentrant_checkpoint_still_runs_under_plain_backward():
    def step(x):
        x.grad = None
        checkpoint(lambda t: t.sin() * 2, Double.apply(x), use_reentrant=True).sum().backward()
        return x.grad

    # the checkpoint's own backward is reentrant: its own capture, inside the outer graph
    differential(_ckpt_build, step, steps=2, captures=2, strict=True)


def _graph():
    x = torch.randn(3, requires_grad=True)
    z = torch.randn(3, requires_grad=True)
    a = Double.apply(x)
    b = z * 3
    c = a.sin() + b.cos()
    return x, z, a, b, c


def _queries(nodes, seen):
    def hook(_g):
        for name, node in nodes.items():
            try:
                seen.append((name, torch._C._will_engine_execute_node(node)))
            except RuntimeError as e:
                seen.append((name, str(e)))
    return hook


@pytest.mark.parametrize("inputs", ["a,z", "x", "a", "backward", "backward_inputs"])
def test_will_engine_execute_node_as_eager(inputs):
    def step(_):
        x, z, a, b, c = _graph()
        nodes = {"a": a.grad_fn, "b": b.grad_fn, "c": c.grad_fn,
                 "x_acc": a.grad_fn.next_functions[0][0], "z_acc": b.grad_fn.next_functions[0][0]}
        seen: list = []
        c.register_hook(_queries(nodes, seen))
        loss = c.sum()
        if inputs == "backward":
            loss.backward()
            return seen, x.grad, z.grad
        if inputs == "backward_inputs":
            loss.backward(inputs=[z])
            return seen, x.grad, z.grad
        picked = {"a": a, "z": z, "x": x}
        return seen, torch.autograd.grad(loss, [picked[k] for k in inputs.split(",")])

    differential(lambda: None, step, steps=2, captures=None)


@pytest.mark.parametrize("retain", [True, False])
@pytest.mark.parametrize("how", ["backward", "grad"])
def test_keep_graph_seen_by_custom_backward(retain, how):
    seen: list = []

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(_keep_graph())
            return g * 2

    def step(x):
        seen.clear()
        x.grad = None
        loss = F.apply(x).sin().sum()
        if how == "grad":
            g = torch.autograd.grad(loss, x, retain_graph=retain)
        else:
            loss.backward(retain_graph=retain)
            g = x.grad
        return list(seen), g

    differential(_ckpt_build, step, steps=2)


def test_keep_graph_seen_by_leaf_hook():
    def build():
        x = torch.randn(3, requires_grad=True)
        seen: list = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(_keep_graph()))
        return x, seen

    def step(state):
        x, seen = state
        seen.clear()
        (x * 2).sin().sum().backward(retain_graph=True)
        return list(seen), x.grad

    differential(build, step, steps=2)


@pytest.mark.parametrize("fn", ["custom", "plain", "hook"])
def test_gradcheck_batched_grad(fn):
    """gradcheck(check_batched_grad=True) runs grad() under the legacy vmap
    (torch._vmap_internals), where python_engine.cpp refuses backward() and batches grad()."""
    def f(t):
        if fn == "custom":
            return Double.apply(t * 3).exp()
        if fn == "hook":
            u = t * 3
            u.register_hook(lambda g: None if g is None else g * 1)
            return u.exp()
        return (t * 3).sin()

    def step(x):
        return torch.autograd.gradcheck(f, (x,), check_batched_grad=True)

    differential(lambda: torch.randn(3, dtype=torch.double, requires_grad=True), step,
                 steps=1, captures=None, fallbacks=None, strict=False)


def test_backward_under_legacy_vmap_raises_as_eager():
    from torch._vmap_internals import _vmap

    def step(x):
        def f(v):
            Double.apply(x).mul(v).sum().backward()
            return v
        return _vmap(f)(torch.ones(2, 3, dtype=torch.double))

    differential(lambda: torch.randn(3, dtype=torch.double, requires_grad=True), step,
                 steps=1, captures=None, fallbacks=None, strict=False, allow_errors=True)


@pytest.mark.parametrize("how", ["grad", "backward_inputs"])
def test_opaque_builtin_node_under_grad_and_inputs(how):
    """A built-in node run as an opaque call (CopySlices here, of an in-place write into a
    view) computes only the outputs its engine task says are needed: our Deliver task must not
    have an exec_info that leaves the user's nodes out (they are not in its graph), or their
    grads come back undefined."""
    def step(x):
        x.grad = None
        out = x * 3
        out[1:].mul_(x[:3])
        if how == "grad":
            return torch.autograd.grad(out.sum(), x)
        out.sum().backward(inputs=[x])
        return x.grad

    differential(lambda: torch.randn(4, requires_grad=True), step, steps=2)
