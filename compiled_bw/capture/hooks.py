"""Seeing hooks on interior autograd nodes, which Python cannot list.

Consumes registrations (wrapped at import: `Tensor.register_hook`, `Tensor.retain_grad`, and
`torch.autograd.function._HookMixin._register_hook`, through which every
`grad_fn.register_hook/register_prehook` passes); produces `interior_hooks(node)`, used by the
walk.  Leaf hooks need none of this: leaves are delivered through the real engine's
AccumulateGrad nodes, which run them (runtime/run.py, Note [Delivery through the real engine]).
Registrations made before compiled_bw was imported, or from C++, are not seen: import
compiled_bw before building the graph.  Until hooks are compiled (issue 3), the walk falls
back to eager autograd for any interior node that has one.
"""
from __future__ import annotations

import torch
from torch.autograd import function as _function

HOOKED_KEY = "compiled_bw.tensor_hooks"


class _Counts:
    tensor = 0   # register_hook / retain_grad on non-leaf tensors
    node = 0     # grad_fn.register_hook / register_prehook


COUNTS = _Counts()


class _Probe(Exception):
    def __init__(self, hooks) -> None:
        self.hooks = hooks


def _probe_hook(*args):  # the sentinel: never called
    raise AssertionError("compiled_bw probe hook called")


_orig_register_hook = torch.Tensor.register_hook
_orig_retain_grad = torch.Tensor.retain_grad
_orig_node_register = _function._HookMixin._register_hook


def _mark(t: torch.Tensor) -> None:
    fn = t.grad_fn
    if fn is not None:
        COUNTS.tensor += 1
        fn.metadata[HOOKED_KEY] = True


def register_hook(self, hook):
    handle = _orig_register_hook(self, hook)
    _mark(self)
    return handle


def retain_grad(self):
    _orig_retain_grad(self)
    _mark(self)


def _node_register(backward_hooks, hook):
    if hook is _probe_hook:
        raise _Probe(backward_hooks)
    COUNTS.node += 1
    return _orig_node_register(backward_hooks, hook)


def install() -> None:
    if torch.Tensor.register_hook is not register_hook:
        register_hook.__doc__ = _orig_register_hook.__doc__
        torch.Tensor.register_hook = register_hook
        torch.Tensor.retain_grad = retain_grad
        _function._HookMixin._register_hook = staticmethod(_node_register)


def _node_hooks(node) -> bool:
    for register in (node.register_hook, node.register_prehook):
        try:
            register(_probe_hook)
        except _Probe as p:
            if p.hooks:
                return True
    return False


def interior_hooks(node) -> str | None:
    """Why `node` cannot be compiled yet because of hooks, or None."""
    if COUNTS.tensor and HOOKED_KEY in node.metadata:
        return f"tensor hook or retain_grad on an output of {type(node).__name__}"
    if COUNTS.node and _node_hooks(node):
        return f"hook registered on node {type(node).__name__}"
    return None
