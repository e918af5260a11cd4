"""Hooks: seeing them (Python cannot list a C++ node's hooks) and running them as eager does.

Consumes registrations, observed by wrapping the entry points at import: `Tensor.register_hook`
(records the hook dict of a non-leaf tensor on its grad_fn at the slot, when the dict is
created -- ENGINE.md 4.1), `Tensor.retain_grad` (a weak set of retained non-leaf tensors), and
`torch.autograd.function._HookMixin._register_hook`, through which every
`grad_fn.register_hook/register_prehook` passes (counted; a node's dicts are then read with a
probe).  Produces, per node, a NodeHooks (this step's hook objects) and its signature part
(hook code identities, so a different set of hooks recaptures).  Running them is
run_hooks.py's.  Leaf hooks run in the
real engine (runtime/run.py Note [Delivery through the real engine]), except for leaves that
grad() only captures.  Registrations made before compiled_bw was imported (or while it was
uninstalled): node hooks are read from the node all the same; a tensor hook on an interior node
or a retain_grad() makes its backward fall back (Note [Hooks registered before compiled_bw],
walk/cpp/_fastwalk.h).
"""
from __future__ import annotations

import types
import weakref

import torch

from ..core.thread import THREAD
from ..torchapi import autograd as torch_autograd
from ..torchapi.dynamo import skip_frame

# node.metadata: list of (slot, weakref to the OrderedDict).  Weak: the node's C++ pre-hook owns
# the dict, and the GC cannot see node.metadata, so a strong reference there would make a
# hook -> closure -> grad_fn -> metadata -> dict -> hook cycle uncollectable where eager collects
# it (PyTorch's test_hook_closure_cycle; tests/test_hooks.py::test_hook_closure_cycle_is_collected).
TENSOR_HOOKS_KEY = "compiled_bw.tensor_hooks"
RETAINS_KEY = "compiled_bw.retains_grad"    # a retain_grad() seen on the node


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
    if torch.compiler.is_compiling():
        # traced by Dynamo (which took this wrapper for a user function: its table of tensor
        # methods was made before compiled_bw was imported): torch's own, which it handles
        return _orig_register_hook(self, hook)
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
        fn.metadata[RETAINS_KEY] = True     # Note [Hooks registered before compiled_bw]


def _node_register(backward_hooks, hook):
    if hook is _probe_hook:
        raise _Probe(backward_hooks)
    COUNTS.node += 1
    _registered()
    return _orig_node_register(backward_hooks, hook)


# Note [Node creation hooks]
# torch.autograd.graph.node_creation_hook(hook) (torch 2.14+) calls `hook` on every autograd node
# created on this thread while it is active -- including the nodes eager's backward creates:
# create_graph=True's history, checkpoint recomputation, user code in hooks and custom
# backwards, reentrant backwards.  A compiled graph creates other nodes or none (a traced
# recomputation creates none; a capture creates probe nodes of its own), so a backward run
# while such a hook is active runs eager autograd (api.py), with the reason.  The stack lives in
# C++, where Python cannot read it: its push and pop are counted here, per thread.  A hook
# pushed before compiled_bw was imported is not seen (like hooks registered before it).
def _push_node_creation_hook(hook):
    _orig_push_creation(hook)
    THREAD.creation_hooks += 1


def _pop_node_creation_hook():
    _orig_pop_creation()
    THREAD.creation_hooks = max(0, THREAD.creation_hooks - 1)


if torch_autograd.NODE_CREATION_HOOKS:
    _orig_push_creation = torch_autograd.original("push_node_creation_hook")
    _orig_pop_creation = torch_autograd.original("pop_node_creation_hook")


def install() -> None:
    register_hook.__doc__ = _orig_register_hook.__doc__
    retain_grad.__doc__ = _orig_retain_grad.__doc__
    # Note [Dynamo skips our wrappers] (graph/custom.py): Dynamo replays a compiled forward's
    # `x.register_hook(h)` after its graph, and that call would make our wrapper a frame Dynamo
    # compiles (it graph-broke inside torch's register_hook; with nested graph breaks only the
    # last of several hooks survived: a wrong grad)
    for fn in (register_hook, retain_grad, _node_register, _push_node_creation_hook,
               _pop_node_creation_hook):
        skip_frame(fn)
    torch_autograd.patch("register_hook", register_hook)
    torch_autograd.patch("retain_grad", retain_grad)
    torch_autograd.patch("node_register_hook", _node_register, wrap=staticmethod)
    if torch_autograd.NODE_CREATION_HOOKS:
        torch_autograd.patch("push_node_creation_hook", _push_node_creation_hook)
        torch_autograd.patch("pop_node_creation_hook", _pop_node_creation_hook)


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
    if COUNTS.node or dicts is not None:     # (dicts: read from the node, also hooks
        if dicts is None:                     # registered before compiled_bw was imported)
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
    if COUNTS.node or dicts is not None:
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
