"""Hooks: seeing them (Python cannot list a C++ node's hooks) and running them as eager does.

Consumes registrations, observed by wrapping the entry points at import: `Tensor.register_hook`
(records the hook dict of a non-leaf tensor on its grad_fn at the slot, when the dict is
created -- ENGINE.md 4.1), `Tensor.retain_grad` (a weak set of retained non-leaf tensors), and
`torch.autograd.function._HookMixin._register_hook`, through which every
`grad_fn.register_hook/register_prehook` passes (counted; a node's dicts are then read with a
probe).  Produces, per node, a NodeHooks (this step's hook objects) and its signature part
(hook code identities, so a different set of hooks recaptures), and `run_pre` / `run_post`,
which apply ENGINE.md 4.1-4.3, 4.6 and 4.9 (chaining and return checks).  Leaf hooks run in the
real engine (runtime/run.py Note [Delivery through the real engine]), except for leaves that
grad() only captures.  Registrations made before compiled_bw was imported are not seen.
"""
from __future__ import annotations

import types
import weakref

import torch

from ..core.thread import THREAD
from ..torchapi import autograd as torch_autograd

# node.metadata: list of (slot, weakref to the OrderedDict).  Weak: the node's C++ pre-hook owns
# the dict, and the GC cannot see node.metadata, so a strong reference there would make a
# hook -> closure -> grad_fn -> metadata -> dict -> hook cycle uncollectable where eager collects
# it (PyTorch's test_hook_closure_cycle; tests/test_hooks.py::test_hook_closure_cycle_is_collected).
TENSOR_HOOKS_KEY = "compiled_bw.tensor_hooks"


class _Counts:
    tensor = 0   # hook dicts created on non-leaf tensors
    node = 0     # grad_fn.register_hook / register_prehook


COUNTS = _Counts()
# Retained non-leaf tensors, by id (a WeakSet would compare tensors with `==`, elementwise).
RETAINED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _Probe(Exception):
    def __init__(self, hooks) -> None:
        self.hooks = hooks


def _probe_hook(*args):  # the sentinel: never called
    raise AssertionError("compiled_bw probe hook called")


_orig_register_hook = torch_autograd.original("register_hook")
_orig_retain_grad = torch_autograd.original("retain_grad")
_orig_node_register = torch_autograd.original("node_register_hook")


def _registered(node=None) -> None:
    """Note [Hooks registered during the backward]: a registration while a graph runs, on
    `node` (None: some node)."""
    step = THREAD.running
    if step is None:
        return
    if node is None or step.hooks_changed is True:
        step.hooks_changed = True
    elif step.hooks_changed is False:
        step.hooks_changed = [node]
    else:
        step.hooks_changed.append(node)


def register_hook(self, hook):
    fn = self.grad_fn
    if fn is not None:
        _registered(fn)
    fresh = self._backward_hooks is None
    handle = _orig_register_hook(self, hook)
    d = self._backward_hooks
    if fresh and fn is not None and d is not None:
        # Under a TorchFunctionMode (torch.set_default_device is one) torch's register_hook
        # calls Tensor.register_hook -- this wrapper -- again from inside: record a dict once
        recs = fn.metadata.setdefault(TENSOR_HOOKS_KEY, [])
        if not any(r() is d for _, r in recs):
            COUNTS.tensor += 1
            recs.append((self.output_nr, weakref.ref(d)))
    return handle


def retain_grad(self):
    fn = self.grad_fn
    if fn is not None:
        _registered(fn)
    _orig_retain_grad(self)
    if fn is not None:
        RETAINED[id(self)] = self


def _node_register(backward_hooks, hook):
    if hook is _probe_hook:
        raise _Probe(backward_hooks)
    COUNTS.node += 1
    _registered()
    return _orig_node_register(backward_hooks, hook)


def install() -> None:
    register_hook.__doc__ = _orig_register_hook.__doc__
    retain_grad.__doc__ = _orig_retain_grad.__doc__
    torch_autograd.patch("register_hook", register_hook)
    torch_autograd.patch("retain_grad", retain_grad)
    torch_autograd.patch("node_register_hook", _node_register, wrap=staticmethod)


def _probe(register):
    try:
        register(_probe_hook)
    except _Probe as p:
        return p.hooks or None
    raise AssertionError("compiled_bw: hook probe was not intercepted")


class NodeHooks:
    """This step's hooks of one node."""
    __slots__ = ("post", "pre", "retains", "tensor")

    def __init__(self, tensor: dict | None = None, pre=None, post=None) -> None:
        # slot -> [OrderedDict, ...] in registration order
        self.tensor: dict = {} if tensor is None else tensor
        self.retains: dict = {}    # slot -> retained tensor
        self.pre = pre             # OrderedDict of node pre-hooks
        self.post = post           # OrderedDict of node post-hooks

    def signature(self) -> tuple:
        t = self.tensor     # (the walk asks per hooked node, every step: no work for empties)
        return (tuple((s, tuple(_ident(h) for d in t[s] for h in d.values())) for s in sorted(t))
                if t else (),
                tuple(sorted(self.retains)) if self.retains else (),
                None if self.pre is None else tuple(map(_ident, self.pre.values())),
                None if self.post is None else tuple(map(_ident, self.post.values())))

    def has_pre(self) -> bool:
        return bool(self.tensor or self.retains or self.pre)


_FUNCTION = types.FunctionType


def _ident(hook):
    """A hook's identity for the signature: its code (a lambda made anew each step is the
    same hook), else its type."""
    if type(hook) is _FUNCTION:
        return hook.__code__
    f = getattr(hook, "__func__", hook)
    return getattr(f, "__code__", type(f))


class _ByNode(dict):
    """id(grad_fn) -> [(slot, tensor)], holding the grad_fn objects whose ids are its keys."""
    __slots__ = ("alive",)


# Note [Node ids stay alive]: `t.grad_fn` of a built-in node is a Python wrapper that the node
# caches only while the wrapper lives.  Some torch versions (2.11) free a wrapper nobody holds:
# the next access makes a new one, and a freed wrapper's id is reused by another node's --
# retains_grad then wrote one tensor's grad into another's .grad (seen on the GPU image's
# torch 2.11).  The map keeps every wrapper it keyed alive while the walk uses it, so each
# node's wrapper, and its id, is the one the walk meets.
def retained_by_node() -> dict:
    """id(grad_fn) -> [(slot, tensor)] for live retained non-leaf tensors."""
    res = _ByNode()
    res.alive = []
    for t in list(RETAINED.values()):
        fn = t.grad_fn
        if fn is not None and t.retains_grad:
            res.alive.append(fn)        # Note [Node ids stay alive]
            res.setdefault(id(fn), []).append((t.output_nr, t))
    return res


def node_hooks(node, retained: dict | None, dicts=None) -> NodeHooks | None:
    """The hooks of an interior node (None if it has none).  dicts: node -> (pre-hook dict,
    post-hook dict), each None or the dict a probe would find (the C++ walk's `hook_dicts`,
    which reads them without the probes' two registrations, ~2 us each)."""
    h = None
    if COUNTS.tensor:
        recs = node.metadata.get(TENSOR_HOOKS_KEY)
        if recs:
            h = NodeHooks()
            for slot, r in recs:
                d = r()
                if d:
                    h.tensor.setdefault(slot, []).append(d)
    if retained:
        for slot, t in retained.get(id(node), ()):
            h = h or NodeHooks()
            h.retains[slot] = t
    if COUNTS.node:
        if dicts is None:
            pre, post = _probe(node.register_prehook), _probe(node.register_hook)
        else:
            pre, post = dicts(node)
            pre, post = pre or None, post or None     # as _probe: an empty dict is none
        if pre or post:
            h = h or NodeHooks()
            h.pre, h.post = pre, post
    if h is not None and not (h.tensor or h.retains or h.pre or h.post):
        return None
    return h


def hooks_and_signature(node, retained: dict | None, dicts):
    """(node_hooks(node, retained, dicts), its signature()), or None: the C++ walk asks it for
    every node with hooks on every step, so the common case -- one hook dict on one slot, or
    node hooks only -- makes no generator and no sort (the same values as the general path)."""
    tensor = None
    if COUNTS.tensor:
        recs = node.metadata.get(TENSOR_HOOKS_KEY)
        if recs:
            if len(recs) == 1:
                slot, r = recs[0]
                d = r()
                if d:
                    tensor = {slot: [d]}
                    t_sig = ((slot, tuple([_ident(hk) for hk in d.values()])),)
            else:
                h = node_hooks(node, retained, dicts)
                return None if h is None else (h, h.signature())
    if retained and id(node) in retained:
        h = node_hooks(node, retained, dicts)
        return None if h is None else (h, h.signature())
    pre = post = None
    if COUNTS.node:
        pre, post = dicts(node)
        pre, post = pre or None, post or None
    if tensor is None and pre is None and post is None:
        return None
    h = NodeHooks()
    if tensor is not None:
        h.tensor = tensor
    h.pre, h.post = pre, post
    return h, (t_sig if tensor is not None else (), (),
               None if pre is None else tuple([_ident(hk) for hk in pre.values()]),
               None if post is None else tuple([_ident(hk) for hk in post.values()]))


# Note [Hooks registered during the backward]
# Eager reads a node's hooks when the node runs, so user code running inside the backward (a
# hook, a custom backward) may register a hook, a retain_grad or a node hook on a node that
# has not run yet, and eager calls it.  A captured graph holds the hook calls the walk saw:
# a node traced without hooks would never call the new one (a silent wrong grad).  Every
# registration entry point (wrapped above) marks the running step; right after the call
# that ran the user code (opaque call or delivery point), `check_registered` compares the
# hooks of the nodes still to run in eager's order with what the walk saw -- which hook
# dicts exist, per kind and slot (hooks added to a dict the graph already calls are seen
# live, as in eager).  A difference raises HookRegisteredDuringBackward (no later node has
# run; grads delivered before stay, as eager's would); that backward's graph then runs eager
# autograd from the next call on (runtime/run.py).  Leaves are delivered by their real
# AccumulateGrad node, which reads its hooks live.


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


def post_hooks_of(node):
    """The node's post-hook dict (live), or None."""
    return _probe(node.register_hook)


def leaf_hooks(var) -> NodeHooks | None:
    """Tensor hooks of a leaf, run by us only where grad() captures it (ENGINE.md 4.10)."""
    d = var._backward_hooks
    if not d:
        return None
    h = NodeHooks()
    h.tensor[0] = [d]
    return h


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
