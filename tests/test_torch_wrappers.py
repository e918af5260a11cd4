"""Every function compiled_bw replaces on torch behaves as torch's own, outside enable().

Each scenario runs twice from the same seed: with compiled_bw's wrappers installed (as after
`import compiled_bw`), and with torch's originals put back; the outcomes (values, `.grad`s,
flags, hook calls, exceptions) must be equal.  Scenarios call each wrapper twice, on leaves,
on tensors that need no grad, under no_grad and from another thread.
"""
from __future__ import annotations

import contextlib
import threading

import pytest
import torch
from differential import assert_same

import compiled_bw
from compiled_bw import api
from compiled_bw.graph import custom, hooks
from compiled_bw.runtime import engine_state


def _wrapped() -> list:
    """(owner, attribute, torch's original) for every replacement compiled_bw installs."""
    with compiled_bw.enable(backend="eager"):   # installs api's wrappers too
        pass
    fn = torch.autograd.function
    return [
        (torch.Tensor, "register_hook", hooks._orig_register_hook),
        (torch.Tensor, "retain_grad", hooks._orig_retain_grad),
        (fn._HookMixin, "_register_hook", staticmethod(hooks._orig_node_register)),
        (fn.Function, "apply", classmethod(custom._orig_apply)),
        (fn.FunctionCtx, "set_materialize_grads", custom._orig_set_materialize),
        (torch._C, "_current_autograd_node", engine_state._orig_current_node),
        (torch._C, "_will_engine_execute_node", engine_state._orig_will_execute),
        (torch.autograd, "_is_checkpoint_valid", engine_state._orig_checkpoint_valid),
        (torch.autograd, "_engine_run_backward", api._original_engine_run_backward),
        (torch.autograd, "backward", api._original_backward),
    ]


@contextlib.contextmanager
def _originals():
    saved = []
    for owner, attr, orig in _wrapped():
        saved.append((owner, attr, owner.__dict__[attr] if isinstance(owner, type)
                      else getattr(owner, attr)))
        setattr(owner, attr, orig)
    try:
        yield
    finally:
        for owner, attr, cur in saved:
            setattr(owner, attr, cur)


def test_every_wrapper_is_listed():
    """A new replacement must join _wrapped(): all of them differ from torch's originals now."""
    for owner, attr, orig in _wrapped():
        cur = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        assert cur is not orig, f"{attr} is not replaced (stale list?)"


def _outcome(fn):
    torch.manual_seed(0)
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 -- errors are part of what must match
        return ("raised", (type(e).__name__, str(e)))


def _in_thread(fn):
    box = []
    t = threading.Thread(target=lambda: box.append(_outcome(fn)))
    t.start()
    t.join()
    return box[0]


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k=2):
        ctx.set_materialize_grads(False)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return None if g is None else g * ctx.k, None


def _retain_twice():
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    h.retain_grad()
    h.retain_grad()
    h.sum().backward()
    return h.retains_grad, h.grad, x.grad


def _retain_leaf_twice():
    x = torch.randn(3, requires_grad=True)
    x.retain_grad()
    x.retain_grad()
    (x * 2).sum().backward()
    return x.retains_grad, x.grad


def _retain_no_grad_tensor():
    torch.randn(3).retain_grad()


def _retain_under_no_grad():
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    with torch.no_grad():
        h.retain_grad()
        h.retain_grad()
    h.sum().backward()
    return h.grad


def _register_hook_twice():
    calls = []
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: calls.append(("a", g.clone())))
    r = h.register_hook(lambda g: g * 3)
    x.register_hook(lambda g: calls.append(("leaf", g.clone())))
    x.register_hook(lambda g: calls.append(("leaf2", g.clone())))
    h.sum().backward(retain_graph=True)
    r.remove()
    h.sum().backward()
    return calls, x.grad


def _register_hook_no_grad_tensor():
    torch.randn(3).register_hook(lambda g: g)


def _register_hook_under_no_grad():
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    with torch.no_grad():
        h.register_hook(lambda g: g * 2)
    h.sum().backward()
    return x.grad


def _node_hooks_twice():
    calls = []
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    h.grad_fn.register_prehook(lambda gs: calls.append("pre1"))
    h.grad_fn.register_prehook(lambda gs: calls.append("pre2"))
    r = h.grad_fn.register_hook(lambda gi, go: calls.append("post1"))
    h.grad_fn.register_hook(lambda gi, go: calls.append("post2"))
    h.sum().backward(retain_graph=True)
    r.remove()
    h.sum().backward()
    return calls, x.grad


def _function_apply():
    x = torch.randn(3, requires_grad=True)
    a = Double.apply(x)
    b = Double.apply(x, k=3)
    with torch.no_grad():
        c = Double.apply(x)
    d = Double.apply(torch.randn(3))
    (a + b).sum().backward()
    return a, b, c, c.requires_grad, d, d.requires_grad, x.grad


def _set_materialize_returns():
    seen = []

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(ctx.set_materialize_grads(True))
            seen.append(ctx.set_materialize_grads(False))
            return x.clone(), x.clone()

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1 is None, g2 is None))
            return g1

    x = torch.randn(2, requires_grad=True)
    F.apply(x)[0].sum().backward()
    return seen, x.grad


def _engine_queries():
    x = torch.randn(2, requires_grad=True)
    y = x * 2
    return (torch._C._current_autograd_node(), _outcome(lambda: torch._C._will_engine_execute_node(y.grad_fn)))


def _backward_forms():
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    torch.autograd.backward(y.sum(), retain_graph=True)
    torch.autograd.backward([y], [torch.ones(3)], retain_graph=True)
    torch.autograd.backward(y, grad_tensors=torch.ones(3), inputs=[x])
    g = torch.autograd.grad((x * 3).sum(), x)
    return x.grad, g, _outcome(lambda: torch.autograd.backward(torch.randn(3)))


SCENARIOS = [_retain_twice, _retain_leaf_twice, _retain_no_grad_tensor, _retain_under_no_grad,
             _register_hook_twice, _register_hook_no_grad_tensor, _register_hook_under_no_grad,
             _node_hooks_twice, _function_apply, _set_materialize_returns, _engine_queries,
             _backward_forms]


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__.strip("_"))
def test_wrapper_behaves_as_torch(scenario, thread):
    run = _in_thread if thread else _outcome
    ours = run(scenario)
    with _originals():
        theirs = run(scenario)
    assert ours[0] == theirs[0], f"torch: {theirs}, with compiled_bw's wrappers: {ours}"
    if ours[0] == "raised":
        assert ours == theirs
    else:
        assert_same(theirs[1], ours[1])
