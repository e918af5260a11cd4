"""Running hooks as eager does, from the calls the compiled graph makes back into user code.

Consumes a node's NodeHooks (hooks.py: what was registered on it this step) and its grads;
produces what `run_pre` / `run_post` / `run_tensor_hooks` return, applying ENGINE.md 4.1-4.3,
4.6 and 4.9 (chaining and return checks, eager's errors), and, after a call that ran user code,
`check_registered`: a hook registered during the backward on a node that has not run yet
raises HookRegisteredDuringBackward (Note [Hooks registered during the backward]).
"""
from __future__ import annotations

import torch

from ..graph.hooks import RETAINED, NodeHooks, node_hooks, retained_by_node


class HookRegisteredDuringBackward(RuntimeError):
    pass


def _shape(h):
    if h is None:
        return None
    return (tuple(sorted((s, tuple(id(d) for d in ds)) for s, ds in h.tensor.items())),
            tuple(sorted(h.retains)), h.pre is not None, h.post is not None)


def check_registered(step, site, dicts=None) -> None:
    """Note [Hooks registered during the backward], after the call of `site`.  dicts: as
    for node_hooks."""
    changed, step.hooks_changed = step.hooks_changed, False
    order = step.plan.executed
    try:
        pos = order.index(site.node_index)
    except ValueError:
        return
    if site.kind not in ("pre", "pre-capture", "unpack"):
        pos += 1                # its node ran (or runs no more hooks of its own)
    pending = order[pos:]
    if changed is not True:     # tensor hooks / retain_grad: only their nodes
        ids = {id(n) for n in changed}
        pending = [i for i in pending if id(step.nodes[i]) in ids]
    leaves = step.walk.leaves
    retained = retained_by_node() if len(RETAINED) else None
    for i in pending:
        if i in leaves:
            continue
        node = step.nodes[i]
        if _shape(node_hooks(node, retained, dicts)) != _shape(step.hooks.get(i)):
            raise HookRegisteredDuringBackward(
                f"compiled_bw: user code running inside this backward (at "
                f"{type(step.nodes[site.node_index]).__name__}) registered a hook on "
                f"{type(node).__name__}, which has not run yet: eager would call it, the "
                "compiled graph cannot. Register the hook before calling backward(), or run "
                "this backward without compiled_bw.enable(); later backwards of this graph "
                "run eager autograd.")


# ---- running them (real tensors) ----------------------------------------------------------

def _name(hook) -> str:
    return getattr(hook, "__name__", "<unknown>")


def _type_str(t: torch.Tensor) -> str:
    return t.type()


# Note [Cheap result checks]
# Eager checks a hook's result in C++ (python_hook.cpp check_single_result: defined, same
# type -- dtype, device type and layout --, same size); the checks below cost ~1.8 us in Python, mostly
# making two torch.device objects for their `.type`.  A result that is the value it replaces
# (module full backward hooks hand their grads back in a new tuple) passes all of them, and so
# does a plain tensor of the same dtype (dtypes are singletons), device and shape: both are
# answered first, anything else goes through the checks that raise eager's errors.
_TENSOR = torch.Tensor


def check_single(old, new, hook):
    """ENGINE.md 4.9, per value: returns the value that replaces `old`."""
    if new is None:
        return None
    if new is old:          # (Note [Cheap result checks])
        return new
    if type(new) is _TENSOR and old is not None and new.dtype is old.dtype \
            and new.layout is old.layout and new.device == old.device and new.shape == old.shape:
        return new
    if not isinstance(new, torch.Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    # eager's TensorOptions::type_equal: dtype and backend (device type and layout: a sparse
    # grad for a dense one is another type)
    if new.dtype != old.dtype or new.device.type != old.device.type or new.layout != old.layout:
        if new.device.type != old.device.type:
            raise RuntimeError(f"hook '{_name(hook)}' has changed the type of value (was "
                               f"{old.device.type.upper()} tensor got {new.device.type.upper()} tensor)")
        raise RuntimeError(f"hook '{_name(hook)}' has changed the type of value (was "
                           f"{_type_str(old)} got {_type_str(new)})")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{_name(hook)}' has changed the size of value")
    return new


def run_tensor_hooks(dicts: list, g):
    for d in dicts:
        for hook in list(d.values()):     # snapshot: hooks may remove themselves
            res = hook(g)
            if res is not None:
                g = check_single(g, res, hook)
    return g


def retain(t: torch.Tensor, g) -> None:
    """ENGINE.md 4.2."""
    if g is None:
        return
    if t.grad is None:
        t.grad = g.clone(memory_format=torch.contiguous_format)
    else:
        t.grad = t.grad + g


def _check_tuple(old: tuple, res, hook) -> tuple:
    if type(res) is tuple and len(res) == len(old):
        for r, o in zip(res, old, strict=True):
            if r is not o:
                break
        else:
            return res  # the same grads (module full backward hooks' own hooks return them)
    if not isinstance(res, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(res).__name__}'")
    if len(res) != len(old):
        raise RuntimeError(f"hook '{_name(hook)}' has returned an incorrect number of values "
                           f"(got {len(res)}, but expected {len(old)})")
    return tuple(None if r is None else check_single(o, r, hook) for o, r in zip(old, res, strict=True))


def run_pre(h: NodeHooks, grads: list, node_hooks: bool = True) -> list:
    """Tensor hooks per slot, then retains_grad, then node pre-hooks (ENGINE.md 4.1-4.3)."""
    grads = list(grads)
    for slot, dicts in h.tensor.items():
        grads[slot] = run_tensor_hooks(dicts, grads[slot])
    for slot, t in h.retains.items():
        retain(t, grads[slot])
    if node_hooks and h.pre:
        for hook in list(h.pre.values()):
            res = hook(tuple(grads))
            if res is not None:
                grads = list(_check_tuple(tuple(grads), res, hook))
    return grads


def run_post(h: NodeHooks, outs: list, ins: list) -> list:
    """Node post-hooks: hook(grad_inputs=outputs, grad_outputs=inputs) (ENGINE.md 4.6)."""
    outs = tuple(outs)
    for hook in list(h.post.values()):
        res = hook(outs, tuple(ins))
        if res is not None:
            outs = _check_tuple(outs, res, hook)
    return list(outs)
