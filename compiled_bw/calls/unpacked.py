"""Unpack calls: a built-in node whose saved tensors carry plain saved-tensor hooks is traced, with
each unpack an opaque call in the graph.

Consumes, at walk time, the built-in nodes whose every defined saved tensor carries hooks that
are neither ours (Slots), nor traceable ones (packed.py), nor a checkpoint's (recompute.py): a
user `saved_tensors_hooks` pair, `save_on_cpu`.  Produces the kind such a node runs as, the
signature part, and, while tracing, one `compiled_bw::opaque` call (site kind "unpack") per
saved tensor where the node's formula unpacks it; at run time that call is eager's unpack.

Note [Unpack calls]
Eager unpacks a node's saved variables when the node runs, in the order its apply reads them,
each once, with `_current_autograd_node()` that node; with retain_graph=False it frees them
(packed objects and hooks) right after the node (and its post-hooks) ran.  The node's formula
is a pure function of what the unpacks return, so we trace it on them:
  - while tracing, each hooked SavedVariable is swapped (C++ `swap_saved`) for one whose
    unpack calls us; when the formula (the real C++ node, under make_fx) unpacks it, we put a
    `compiled_bw::opaque` call there, whose fake output is the tensor the formula is traced on:
    so the graph's unpack calls are eager's, in apply's order, each before its first use;
    the call does not take the node's grads (as inputs they would be buffers Inductor may
    neither reuse nor free early: backends/inductor.py Note [Inductor: opaque buffers]); it
    runs after them all the same, as every opaque call runs after what the graph computes
    before it (Note [Inductor: call order]); only its error path needs them, and builds
    zeros of their traced metadata (None where undefined this step) -- where a size is
    symbolic the call takes them as before;
  - at run time that call reads the node's `_saved_<attr>`: SavedVariable::unpack with the node,
    i.e. the user's unpack hook on the packed object with torch's own checks (a non-tensor
    result raises eager's TypeError), under `_current_autograd_node()` = the node (opaque.py);
    with retain_graph=False the node's last unpack call then releases its saved variables (no
    user code runs between it and the end of the node: its formula is aten ops; a node with
    post-hooks releases after them, as before);
  - what the formula bakes in about an unpacked tensor (shape, strides, dtype, device) is what
    the unpack really returned: a node runs as one opaque call of the real node (nodes.py Note
    [Hooked saved tensors]) until a run has seen it, and that run (its unpacks swapped for ones
    that call the real unpack and note what it returned) records it under the walk's signature;
    the next walk with that signature traces with it and keys on it (not when a hook was
    registered on the node while it ran: eager runs it after apply, a formula could not).  At run time the unpack
    call checks the tensor against it: other strides are copied into the traced ones (Note
    [Opaque output layout]: same values; a recorded layout no copy can have -- an expanded
    tensor, stride 0 -- is traced as contiguous, so each run copies into that); with another shape, dtype or device the real node
    runs on what this run's unpacks returned (and those zero grads: a formula's errors
    depend on their metadata, not their values), so
    eager's error (its formula's, or validate_outputs') is raised; if eager would have gone
    on, compiled_bw's error is (the graph cannot compute what eager would).  Either way the
    record is forgotten: the next backward runs the real node again and records anew.
A formula that fake tensors cannot run, after some unpack call was placed, fails the trace
(this backward runs eager autograd): the real node would unpack again.  Lists of saved tensors,
nodes whose saved state is hidden or never traced (nodes.py Note [Hidden saved state]), and
backwards without the C++ extension keep the one-call path.
"""
from __future__ import annotations

import dataclasses

import torch

from ..graph import native
from ..graph.hooks import COUNTS
from ..graph.nodes import TRACE, NodeKind, hidden_state_unknown, node_kind
from ..graph.packed import TraceableUnpack
from ..graph.saved import Slot, raw_saved
from ..torchapi import checkpoint as ckpt

_OBSERVED: dict = {}    # walk signature (its nodes run as one call) -> {(node, attr): meta}
_MAX_OBSERVED = 512
_KINDS: dict = {}


def reset() -> None:
    """Forget what unpacks returned (compiled_bw.reset)."""
    _OBSERVED.clear()


def ext():
    return native._S.ext    # the loaded C++ extension


def eligible_attrs(node, attrs) -> tuple | None:
    """The attrs of the node's saved tensors that carry user hooks, when every defined saved
    tensor does and none is in a list; else None."""
    out = []
    for a in attrs:
        r = raw_saved(node, a)
        if isinstance(r, (list, tuple)):
            if len(r):
                return None
            continue
        if r is None:
            continue
        h = r.unpack_hook
        if h is None:
            if r.data is None:      # undefined: unpacks to None, no hook runs
                continue
            return None
        if type(h) is TraceableUnpack or isinstance(getattr(h, "__self__", None), Slot) \
                or ckpt.checkpoint_frame(h) is not None:
            return None
        out.append(a)
    return tuple(out) if out else None


def unpack_kind(kind: NodeKind) -> NodeKind:
    v = _KINDS.get(kind)
    if v is None:
        v = _KINDS[kind] = dataclasses.replace(kind, hooked=True, reason="")
    return v


def _meta(t) -> tuple | None:
    if type(t) is not torch.Tensor or t.layout is not torch.strided or t.is_conj() \
            or t.is_neg():
        return None     # never traced on (the node keeps running as one call)
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


def choose(w, unpack_nodes: dict) -> None:
    """After the walk (walk.py): trace the nodes of `unpack_nodes` (index -> attrs) with
    unpack calls when a run recorded what their unpacks return (Note [Unpack calls]); else
    they run as one call each, which records it."""
    obs = _OBSERVED.get(w.signature)
    need = [(i, a) for i, attrs in unpack_nodes.items() for a in attrs]
    if obs is not None and all(obs.get(k) is not None for k in need):
        traced = {}
        for i in unpack_nodes:
            base = node_kind(type(w.nodes[i]))
            if base.how == TRACE and not (base.edge_rules and
                                          hidden_state_unknown(base, w.edges[i])):
                w.kinds[i] = unpack_kind(base)
                traced[i] = unpack_nodes[i]
        if traced:
            metas = {(i, a): obs[(i, a)] for i, attrs in traced.items() for a in attrs}
            w.unpack = (obs, metas)
            w.signature = (w.signature, ("unpack calls", tuple(metas.items())))
        return
    if obs is None:
        if len(_OBSERVED) >= _MAX_OBSERVED:
            _OBSERVED.pop(next(iter(_OBSERVED)))
        obs = _OBSERVED[w.signature] = {}
    w.unpack = (obs, None)
    w.observe = {i: (obs, attrs) for i, attrs in unpack_nodes.items()}


def _call_swapped(node, grads: list, attrs: tuple, probe):
    """The real node's call (its whole apply) with the saved tensor of each attr swapped, for
    that call, for one whose unpack is `probe(cell, attr)()` (cell[0]: the swap's handle, for
    the real unpack: `ext().unpack_swapped`)."""
    x = ext()
    handles = []
    try:
        for a in attrs:
            cell = [None]
            handles.append(x.swap_saved(raw_saved(node, a), probe(cell, a)))
            cell[0] = handles[-1]
        return node(*grads)
    finally:
        for h in handles:
            x.unswap_saved(h)


def observed_call(node, grads: list, observe: tuple, i: int, validated):
    """The real node's call (its whole apply), with each hooked saved tensor's unpack noting
    what it returned into the record (Note [Unpack calls]), once `validated` (eager's
    validate_outputs) accepted its grads: an unpack whose tensor makes the node raise stays a
    call of the real node, which raises eager's error."""
    store, attrs = observe
    x = ext()
    got = {}

    def probe(h, a):
        def unpack():
            t = x.unpack_swapped(h[0], node)    # the user's hook, torch's checks
            got[a] = _meta(t)
            return t
        return unpack

    n_hooks = COUNTS.node
    outs = validated(_call_swapped(node, grads, attrs, probe))
    if COUNTS.node != n_hooks:  # a hook registered on the node while it ran: the real node
        got = dict.fromkeys(got)   # runs it after apply (opaque.py), a traced formula could not
    for a, m in got.items():
        store[(i, a)] = m
    return outs


def _error_grads(s, grads: list) -> list:
    """The node's grads for the real node on the error path: the call's inputs, or zeros of
    the traced metadata (None where undefined this step) when it took none."""
    if s.grad_metas is None:
        return grads
    from ..core.thread import THREAD
    from ..graph.defined import evaluate
    step = THREAD.step
    out = []
    for m, f in zip(s.grad_metas, s.grad_defined, strict=True):
        if m is None or (step is not None and step.undefined
                         and not evaluate(f, step.undefined, step.memo)):
            out.append(None)
            continue
        shape, stride, dtype, device = m
        out.append(torch.zeros_like(torch.empty_strided(shape, stride, dtype=dtype,
                                                        device=device)))
    return out


ERR_CHANGED = (
    "compiled_bw: the saved-tensor unpack hook of {name} returned a tensor of {got}, where the "
    "previous backward of this graph got {want} and the compiled backward was traced for that. "
    "This backward could not be completed; the next one runs the real node again. Run it "
    "without compiled_bw.enable() to get eager autograd's result.")


_DONE: dict = {}    # id(node) -> {attr: tensor} its unpack calls returned so far this run


def run_unpack(s, node, i: int, grads: list):
    """An unpack call at run time (Note [Unpack calls]): eager's unpack of the saved tensor."""
    t = getattr(node, "_saved_" + s.attr)
    store, want, first, attrs = s.observe
    if first:
        _DONE[id(node)] = {}
    done = _DONE.get(id(node))
    if done is not None:
        done[s.attr] = t
    got = _meta(t)
    if got is None or got[0] != want[0] or got[2:] != want[2:]:
        store[(i, s.attr)] = None       # the next walk runs the real node, which records
        _DONE.pop(id(node), None)
        _eager_error(s, node, _error_grads(s, grads), done or {s.attr: t}, attrs)
        desc = (f"{got[2]}, {got[3]}, shape {list(got[0])}" if got is not None
                else type(t).__name__)
        raise RuntimeError(ERR_CHANGED.format(
            name=s.name, got=desc, want=f"{want[2]}, {want[3]}, shape {list(want[0])}"))
    if s.release or (done is not None and len(done) == len(attrs)):
        _DONE.pop(id(node), None)
    return t.detach()


def _eager_error(s, node, grads: list, done: dict, attrs: tuple) -> None:
    """What eager's formula does with what the unpacks returned this run: the real node runs
    on them (the saved tensors not unpacked yet are unpacked by it, as eager would); its error,
    or validate_outputs', is raised.  Returns when eager would have gone on."""
    from ..graph.validate import ValidateError, validate_metas
    x = ext()

    def probe(h, a):
        def unpack():
            return done[a] if a in done else x.unpack_swapped(h[0], node)
        return unpack
    outs = _call_swapped(node, grads, attrs, probe)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    try:
        validate_metas(s.name, outs, s.out_meta)
    except ValidateError as e:
        raise RuntimeError(str(e)) from None
