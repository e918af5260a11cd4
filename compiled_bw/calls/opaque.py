"""Opaque calls: one graph node that runs this step's real Python/C++ objects at run time.

Consumes an OpaqueSite (known at trace time: which node, what kind of call, the metadata of its
outputs); produces a call to the custom op `compiled_bw::opaque`, whose fake implementation
makes outputs from that metadata and whose real implementation runs, for the step being run
(runtime/run.py sets `current_step`), one of:
  node    a built-in node fake tensors cannot run: node(*grads), then validate_outputs;
  hooked  the same for a node whose saved tensors carry hooks: it unpacks them (user code) as
          eager does (nodes.py Note [Hooked saved tensors]);
  custom  a custom autograd.Function: PyNode's semantics (graph/custom.py), validate_outputs;
  pre     a node's tensor hooks, retains_grad and node pre-hooks (graph/hooks.py);
  post    a node's post-hooks;
  unpack  one saved tensor's unpack (the user's unpack hook) feeding a traced formula
          (unpacked.py Note [Unpack calls]).
Being a torch.library op, every backend (Inductor included) keeps it as an extern call.
Outputs are fresh tensors (a custom op may not return its inputs): a value a call passes
through unchanged is cloned.  Undefined grads (graph/defined.py Note [Undefined grads]): an
input eager would leave undefined is passed to user code as None, and an output user code
returns as None becomes zeros for the graph and is recorded in the step (`step.undefined`).
"""
from __future__ import annotations

import dataclasses
import operator
import sys
import weakref

import torch

from ..core import dispatch_tls
from ..core.thread import THREAD
from ..graph import custom, defined, hooks
from ..graph.native import hook_dicts, release_node
from ..graph.saved import check_after_call
from ..graph.subclass import python_dispatch
from ..graph.validate import ValidateError, validate_metas, validate_outputs
from ..torchapi import autograd as torch_autograd
from ..torchapi.dynamo import OpOverload
from . import run_hooks


@dataclasses.dataclass
class OpaqueSite:
    node_index: int
    name: str
    kind: str              # "node" | "hooked" | "custom" | "pre" | "pre-capture" | "post"
    #                        | "unpack"
    edges: tuple           # node/custom: (child | -1, input_nr) per output
    out_specs: tuple       # per output: None (undefined) or (shape, dtype, device)
    n_first: int = 0       # post: how many of the grads are the node's outputs
    out_strides: tuple | None = None   # per kept output; Note [Opaque output layout]
    in_defined: tuple = ()  # per input: its defined.py formula (when it may be undefined)
    release: bool = False  # then free the node's saved variables (Note [Hooked saved tensors])
    steal: bool = False    # leaf: its grad is an opaque output used only here (Note [Stealing
    #                        at delivery points] in runtime/run.py)
    # opaque calls (runtime/run.py mark_stealing, Note [One grad for several leaves]): the
    # inputs the graph uses nowhere else, and, when every output goes straight to a delivery
    # point, the output positions in the order they are delivered
    free_inputs: frozenset = frozenset()
    deliver_order: tuple | None = None
    # some output goes straight to a delivery point (only then can the call's outputs be
    # stolen there: `Step.stealable` is read by such delivery points only)
    feeds_delivery: bool = True
    # the kept outputs the graph reads at all (mark_stealing): a tensor several of them
    # are is never taken by a leaf unless they all go to delivery points (Note
    # [Passed-through grads])
    used_outputs: frozenset = frozenset()
    attr: str = ""         # unpack: the saved tensor's attr (unpacked.py Note [Unpack calls])
    observe: tuple | None = None   # unpack: (record, traced meta); hooked: (record, attrs)
    grad_metas: tuple | None = None  # unpack: the node's grads as (shape, stride, dtype,
    #                        device) or None, when the call does not take them (unpacked.py
    #                        Note [Unpack calls]: only its error path needs them)
    grad_defined: tuple = ()  # unpack: per grad of grad_metas, its defined.py formula
    out_meta: tuple | None = None  # node/custom: per output, the input metadata of its edge's
    #                        slot (None: invalid edge); fixed by the signature, so run-time
    #                        validation needs no lookup of this step's nodes
    known_strides: dict = dataclasses.field(default_factory=dict)  # output index -> the
    #                        strides it will have (Note [Opaque output layout]: CopySlices)


# The opaque calls that run only this step's own node, hook or AccumulateGrad, found again by
# index each step: a stored graph may hold them (runtime/warm.py Note [Warm start]), a
# verified one may run them twice (runtime/verify.py Note [Verify]).  Not the calls of
# saved-tensor hooks ("hooked", "unpack"): their saved tensors carry state from the forward.
USER_CALL_KINDS = frozenset(("node", "custom", "pre", "pre-capture", "post", "leaf"))


# Note [Opaque output layout]
# Whatever consumes an opaque call's outputs was traced against the fake outputs, so the real
# outputs must have the fake ones' strides too: a traced `view` of a contiguous fake fails on
# a transposed real grad, and Inductor asserts and indexes extern outputs by their fake
# strides.  The first fake call (during the capture) fixes each output's strides, like
# TensorIterator would: those of a same-shaped, non-overlapping and dense incoming grad (eager
# `grad * 2` keeps the grad's layout), else contiguous; where the real strides are known
# before the call (`known_strides`), those: a CopySlices node's grad for its base is
# `new_empty_strided` of the base's sizes and strides (tensor.cpp), read from the node by the
# extension (a dense base; trace.py `_known_strides`).  Later fake calls (backend retraces)
# reuse them; the real call copies an output into them when the node produced others, and
# records the real layout in the step (`real_layouts`).  A grad() result made from such an
# output by view ops only (e.g. a Linear weight's grad: TBackward's `t()` of a node's output)
# would then come out in another layout than eager's: after the run it is copied into the
# layout those view ops give on the real layout (`relayout`, e.g. a checkpointed weight's
# grad() is contiguous, as eager's); an overlapping real output (an expanded grad: no copy
# has its layout) is kept for this, and the result is those view ops applied to it, eager's
# own tensor.  Where other ops lie between, or a hook is given the output, that run keeps
# the guess; if user code can see that layout (`observed_layouts`: a hook, a custom backward,
# a grad() result, the `.grad` of a leaf with a dim of size 1; not another leaf's `.grad`,
# which takes the parameter's layout either way), the run records the (dense) layouts it found
# on the cache entry, and the next hit recaptures the graph with them as the promise
# (LAYOUT_HINTS; run.py `_relayout_recapture`), once per new layout, so from then on every op
# after the call sees eager's layout.  A layout that changes from step to step keeps the last
# promise.  An output that differs from the promise only in the strides of size-1 dims
# addresses its elements alike, so it goes on uncopied; its layout is recorded all the same:
# eager's in-place buffer sums keep such strides (trace/holders.py), which the graph decided
# from the promise.


def dense(t: torch.Tensor) -> bool:
    """Its elements fill its storage extent exactly once, in some order of its dimensions
    (non-overlapping and dense; an empty tensor is not)."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride(), strict=True)
                                if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return t.numel() > 0


def view_chains(gm, capture_outputs: tuple) -> tuple:
    """Note [Opaque output layout]: per grad() result made from an opaque call's output by view
    ops only: (result index, site, output index, ((view op, args, kwargs, shape), ...))."""
    outs = gm.graph.find_nodes(op="output")[0].args[0]
    chains = []
    for j, p in enumerate(capture_outputs):
        if p is None or not isinstance(outs[p], torch.fx.Node):
            continue
        node, chain = outs[p], []
        while (node.op == "call_function" and isinstance(node.target, OpOverload)
               and node.target.is_view
               and not any(isinstance(a, torch.fx.Node) for a in node.args[1:])):
            chain.append((node.target, node.args[1:], node.kwargs, tuple(node.meta["val"].shape)))
            node = node.args[0]
        if (node.op == "call_function" and node.target is operator.getitem
                and node.args[0].op == "call_function" and node.args[0].target is opaque):
            chains.append((j, node.args[0].args[0], node.args[1], tuple(reversed(chain))))
    return tuple(chains)


def observed_layouts(gm, capture_outputs: tuple, chains: tuple, sites: tuple,
                     hooked, size1_leaves: frozenset = frozenset()) -> frozenset:
    """Note [Opaque output layout]: the (site, kept output) whose layout user code can see --
    through any ops, an argument of another opaque call, of a delivery point whose leaf has
    hooks, a grad() result (one `relayout` does not fix), or the `.grad` of a leaf with a dim
    of size 1 (size1_leaves: their output positions); a layout reaching only other leaves'
    `.grad`s is not (AccumulateGrad gives `.grad` the parameter's layout either way; on dims
    of size 1 a stolen grad keeps its own strides)."""
    deliver = torch.ops.compiled_bw.deliver.default
    outs = gm.graph.find_nodes(op="output")[0].args[0]
    fixed = {capture_outputs[j] for j, *_ in chains}
    seen_by_user = ({p for p in capture_outputs if p is not None} - fixed) | size1_leaves

    def reaches(start) -> bool:
        todo, seen = [start], {start}
        while todo:
            node = todo.pop()
            for u in node.users:
                if u.op == "output":
                    if any(a is node and p in seen_by_user for p, a in enumerate(outs)):
                        return True
                elif u.target is opaque:
                    return True
                elif u.target is deliver:
                    if sites[u.args[0]].node_index in hooked:
                        return True
                elif u.op == "call_function" and u not in seen:
                    seen.add(u)
                    todo.append(u)
        return False

    found = set()
    for node in gm.graph.nodes:
        if (node.op == "call_function" and node.target is operator.getitem
                and isinstance(node.args[0], torch.fx.Node)
                and node.args[0].target is opaque and reaches(node)):
            found.add((node.args[0].args[0], node.args[1]))
    return frozenset(found)


def relayout(chains: tuple, results: list, real_layouts: dict) -> None:
    """Note [Opaque output layout]: grad() results (in place in `results`) into the layout
    eager's view ops give on the opaque output's real layout."""
    for j, site, k, chain in chains:
        real = real_layouts.get((site, k))
        g = results[j]
        if real is None or g is None:
            continue
        t = torch.empty_strided(real[0], real[1], dtype=g.dtype, device="meta")
        for op, args, kwargs, shape in chain:
            try:
                t = op(t, *args, **kwargs)
            except RuntimeError:        # eager's reshape copies where a view cannot be
                t = torch.empty(shape, dtype=g.dtype, device="meta")
        if real[2] is not None and t.shape == g.shape and not dense(t) and t.numel():
            # overlapping (e.g. an expanded grad): eager's result is that view of the output
            v = real[2]
            for op, args, kwargs, _ in chain:
                v = op(v, *args, **kwargs)
            results[j] = v
            continue
        if t.shape == g.shape and not _same_layout(g, t.stride()):
            results[j] = torch.empty_strided(g.shape, t.stride(), dtype=g.dtype,
                                             device=g.device).copy_(g)


def contiguous_strides(shape) -> tuple:
    """The strides torch gives a contiguous tensor of `shape` (a size of 0 counts as 1)."""
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


def _guess_strides(specs, grads, known: dict) -> tuple:
    out = []
    for k, sp in enumerate(specs):
        if sp is None:
            continue
        shape = sp[0]
        if k in known:
            out.append(known[k])
            continue
        like = next((g for g in grads if g is not None and tuple(g.shape) == tuple(shape)
                     and dense(g)), None)
        out.append(tuple(like.stride()) if like is not None else contiguous_strides(shape))
    return tuple(out)


def _same_layout(t: torch.Tensor, strides: tuple) -> bool:
    if t.stride() == strides:
        return True
    return all(size <= 1 or st == want for size, st, want in zip(t.shape, t.stride(), strides, strict=True))


_storage_use_count = torch_autograd.storage_use_count
_TENSOR = torch.Tensor
_STRIDED = torch.strided


# what eager's InputBuffer treats as sparse (input_buffer.cpp: is_sparse, is_sparse_csr)
SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr)


class NotDense(RuntimeError):
    """An opaque call returned a sparse (non-strided) grad at run time: the graph cannot go on,
    and runtime/run.py remembers the graph as a fallback."""


def label(site: OpaqueSite) -> str:
    return f"{site.kind} {site.name}"


def current_sites() -> list:
    """The OpaqueSites of the graph being traced, compiled or run on this thread."""
    step = THREAD.step
    return [] if step is None else list(step.sites)


def register_site(site: OpaqueSite) -> int:
    """During a trace: add a site to the graph being traced; returns its graph-local id."""
    sites = THREAD.step.sites
    sites.append(site)
    return len(sites) - 1


def as_list(outs) -> list:
    return [outs] if isinstance(outs, torch.Tensor) or outs is None else list(outs)


def _validated(s: OpaqueSite, step, outs: list) -> list:
    try:
        if s.out_meta is not None:
            return validate_metas(s.name, outs, s.out_meta)
        return validate_outputs(s.name, outs, s.edges, step.in_meta)
    except ValidateError as e:      # eager's engine raises a plain RuntimeError
        raise RuntimeError(str(e)) from None


def _late_post_hooks(s: OpaqueSite, step, node, outs: list) -> list:
    """Post hooks registered on a node while it ran (an unpack hook or its custom backward
    calling `_current_autograd_node().register_hook`): eager (engine.cpp call_function) looks
    at the node's post hooks after apply, so they run; since it had none before, apply took
    its inputs (moved from) and the hooks get an empty grad_outputs.  A node that had post hooks
    when traced has a "post" site after this call, which runs the node's live hook dict."""
    h = step.hooks.get(s.node_index)
    if h is not None and h.post:
        return outs
    post = hooks.post_hooks_of(node)
    if not post:
        return outs
    late = hooks.NodeHooks()
    late.post = post
    return run_hooks.run_post(late, outs, [])


def _run(s: OpaqueSite, step, grads: list) -> list:
    node = step.nodes[s.node_index]
    if s.kind == "unpack":
        from .unpacked import run_unpack  # (it imports this module)
        outs = [run_unpack(s, node, s.node_index, grads)]
    elif s.kind == "node" or s.kind == "hooked" or s.kind == "custom":
        n_hooks = hooks.COUNTS.node
        if s.kind == "custom":
            outs = _validated(s, step, custom.call_backward(node, grads))
        elif s.observe is not None:     # unpacked.py Note [Unpack calls]: noting the unpacks
            from .unpacked import observed_call
            outs = observed_call(node, grads, s.observe, s.node_index,
                                 lambda o: _validated(s, step, as_list(o)))
        else:
            outs = _validated(s, step, as_list(node(*grads)))
        if hooks.COUNTS.node != n_hooks:    # a node hook was registered while it ran
            outs = _late_post_hooks(s, step, node, outs)
    else:
        h = step.hooks[s.node_index]
        if s.kind == "pre":
            return run_hooks.run_pre(h, grads)
        if s.kind == "pre-capture":
            return run_hooks.run_pre(h, grads, node_hooks=False)
        outs = run_hooks.run_post(h, grads[:s.n_first], grads[s.n_first:])
    if s.release:       # eager (retain_graph=False): after the node and its post-hooks ran
        release_node(node)
    return outs


# Note [The opaque op]
# Defined with torch.library.Library rather than @custom_op: custom_op's Python autograd layer,
# redispatch and Dynamo-disable wrapper cost ~15 µs per call, which a backward with many custom
# Functions and hooks pays on every step.  The kernel is CompositeExplicitAutograd (one for
# every device); its Autograd key gets torch's C++ not-implemented fallback (the graph runs
# with grad mode off, so nothing is recorded); the fake impl below serves tracing and Inductor.
_LIB = torch.library.Library("compiled_bw", "DEF")
_LIB.define("opaque(int site, Tensor?[] grads, str label) -> Tensor[]")


def _opaque_impl(site: int, grads: list, label: str) -> list:
    """The dispatcher's kernel (Inductor's extern call): user code runs with the dispatcher
    state the graph started with (core/dispatch_tls.py), not the Autograd-excluded one of a
    custom op's kernel."""
    step = THREAD.step
    changed = step.tls.enter()
    try:
        return opaque_direct(site, grads, label)
    finally:
        dispatch_tls.undo(changed)


# Note [Cost of an opaque call]
# benchmarks/opaque_cost.py (a chain of N trivial custom Functions or tensor hooks, cache hits,
# 2-core CPU; eager's own PyNode costs about what the MulBackward0 it replaces costs, ~4 us).
# Per call, before the cuts below, ~24 us (eager backend) / ~28 us (Inductor): the walk's
# Python entry for a custom node (input metadata, fwd_info, saved tensors; ~4 us), the
# dispatcher path (OpOverload.__call__, the Autograd fallback, the Python kernel; ~3-5 us),
# putting the dispatcher state back (11 key queries; ~2 us), validate_outputs looking up the
# next node's input metadata (a lazy per-step list; ~3 us), the copy of a grad passed through
# unchanged (empty_strided + copy_; ~2 us), the reference/storage checks for stealing, and the
# user's backward through PyNode.apply (materialize, finish; ~3 us).  Cut: no copy of passed-
# through grads (below), the eager backend calls `opaque_direct` without the dispatcher
# (backends/eager.py Note [Direct opaque calls]), one exclude-set read per call
# (core/dispatch_tls.py Restorer), validation against the metadata the site holds.  After:
# ~13 us (eager backend) / ~21 us (Inductor).  Then PyNode's semantics for the common case
# (custom.py: no materialize pass when every grad is defined, no count checks for one tensor
# returned for one tensor input): `custom.call_backward` of a pass-through backward 6.0 ->
# 1.8 us (timeit, one process per tree, loaded 2-core machine).  Then Inductor's generated
# code calls `opaque_direct` / `deliver_direct` itself and drops the barriers (~3 us each)
# (backends/inductor.py Note [Inductor: direct calls]), the eager backend calls
# `deliver_direct` too, and the walk reads a hooked node's hook dicts in C++ (two probe
# registrations, ~2 us each, before) and keeps no (shape, dtype, device) tuples for custom
# nodes (the C++ key holds them): per call ~11-13 us (eager backend) / ~11-14 us
# (Inductor), from ~14-25 / ~17-30 us (two runs of each, interleaved, loaded machine).
# The custom_hooks model's cache-hit step before that (thread CPU time, 1 thread: eager
# ~1.3 ms, compiled_bw with Inductor ~2.3 ms): the dispatcher ~310 us (gone), the walk
# ~270 us (11 custom nodes and 7 hooked nodes read by Python), the engine task around the
# graph (_Deliver, run_backward) ~130 us and the box and Step ~50 us, the glue before the
# run (precheck, keys, lookup) ~120 us, opaque_direct around user code ~10 us a call.
# Then the walk's Python entries got cheaper (a traced custom node's `auto_traced` answered
# once per class, the key of a backward that reads no global, closure or default kept:
# custom.py Note [Constant function keys]; hook signatures without work for empty parts), the
# call looks its CacheKey up once, and an opaque output nobody references is not probed for
# sharing an input grad's storage: the custom_hooks walk alone (thread CPU, 3000 walks of one
# graph) ~60 -> ~47 us; the step ~1.47x/1.54x -> ~1.39x/1.50x eager (benchmarks/RESULTS.md).
# Then a tensor-hook call got its own short path (Note [One-grad tensor hook calls]), hook
# results their cheap checks (hooks.py Note [Cheap result checks]), outputs that are the grads
# given a one-pass hand-on, the walk's hook entry one pass, and the running node is an index:
# a tensor hook ~12-16 -> ~6-10 us a call (eager ~0.4-0.8 us; thread CPU, loaded machine).
# Then the C++ walk took a custom node's entry from a memo (walk/fastwalk.py Note [Custom
# node memo]): a traced custom Function ~3-5 -> ~1.5-1.8 us a call (eager's PyNode ~1.3-1.7
# us), custom_hooks ~1.2-1.4x -> ~1.1-1.2x eager; node hook calls got a one-pass call (Note
# [One-pass node hook calls]), not measurably cheaper.
# Then a tensor hook's call, measured end to end on a cache hit (thread CPU, a chain of 64,
# eager backend: ~4.7 us a call over the same chain without hooks, eager's ~0.3-1.4 us): the
# walk's hooked-node entry ~1.3 us (hooks_and_signature ~0.85 us, the node's Python object,
# the loop), the saved-tensor version checks ~1.0 us (the per-step dict ~0.5-1 us a site, the
# per-call pop ~0.5 us), the call ~2.4 us (opaque_direct, _tensor_hooks_call's frame, the
# hook loop, _after_user_code, the stride check) -- all Python.  Cut: the C++ walk builds the
# hooked node's NodeHooks and signature part itself (walk/fastwalk.py Note [Hook entries
# in C++]), the version checks are C++ (saved.py Note [Version checks in C++]) and the call is
# one C++ call under opaque_direct (Note [Hook calls in C++]): ~4.7 -> ~3.4 us a call on the
# same machine (benchmarks/RESULTS.md, 2026-11-24 "Tensor hook calls in C++").
# Left: opaque_direct's Python frame and its dispatch (~0.6 us), the C++ hook entry's ~8
# Python objects a node (~0.5 us), the graph code around each call (the grads list, the
# getitem), node pre/post hook calls still Python (Note [One-pass node hook calls]), the
# engine task (~55 us: _Deliver's apply, run_backward, the Python Step), the glue (~40 us),
# graphs with opaque calls off the C++ hit path (the Python wrapper).
# Then (2026-11-24, `python -m benchmarks.opaque_cost --cpu`, a chain of 64 custom Functions
# compiled_bw must call, `compiled_bw_traceable = False`): outputs of a call that feeds no
# delivery point are not probed for stealing (`feeds_delivery`: the reference and storage
# counts, ~2.4 us a call), and the call is one C++ call (Note [Custom calls in C++]):
# ~7.6 -> ~2.1 us a call on the eager backend, ~9.9 -> ~5.5 us on Inductor (whose chain
# without them is one fused kernel; with them, one kernel between each two calls); eager's
# whole PyNode ~2.9-3.0 us.


def opaque_direct(site: int, grads: list, label: str, loose: frozenset = frozenset()) -> list:
    """One opaque call, called by the graph's code directly (the eager backend: Note [Direct
    opaque calls]) or by `_opaque_impl`.  label: what the call runs, for readers of the graph
    (e.g. 'custom DoubleBackward').  loose: the outputs that may come back sparse (the eager
    backend: Note [Sparse grads from opaque calls])."""
    step = THREAD.step
    s = step.sites[site]
    kind = s.kind
    if step.originals:      # Note [The tensor user code returned, to user code]
        grads = originals(step, grads)
    if step.stealable:      # Note [User code may keep what it is given]
        for g in grads:
            if g is not None:
                step.stealable.pop(id(g), None)
    if (kind == "pre" or kind == "post") and not step.undefined:
        h = step.hooks[s.node_index]
        if kind == "post":
            if not s.release:
                return _node_hooks_call(step, s, site, h.post, grads, label, True)
        elif not (h.retains or h.pre):
            if len(grads) == 1 and grads[0] is not None:
                if HOOK_CALL is not None and type(grads) is list:   # Note [Hook calls in C++]
                    return HOOK_CALL(step, s, site, h, grads, label)
                return _tensor_hooks_call(step, s, site, h, grads, label)
        elif not (h.tensor or h.retains):
            return _node_hooks_call(step, s, site, h.pre, grads, label, False)
    elif kind == "custom" and CUSTOM_CALL is not None and not step.undefined and \
            not s.release and s.out_meta is not None and not loose and type(grads) is list:
        outs = CUSTOM_CALL(step, s, site, grads, label)     # Note [Custom calls in C++]
        if outs is not None:
            return outs
    if step.undefined:          # some grads are undefined this step: pass None for them
        grads = [None if g is None or not defined.evaluate(f, step.undefined, step.memo)
                 else g for g, f in zip(grads, s.in_defined, strict=True)]
    prev = step.current
    step.current = s.node_index
    try:
        outs = _run(s, step, grads)
    finally:
        step.current = prev
    if step.hooks_changed or step.checks:
        _after_user_code(step, s, site)
    return _outputs(step, s, site, outs, grads, label, loose)


# Note [The tensor user code returned, to user code]
# Where an opaque call returned a grad in a layout its graph did not promise (Note [Opaque
# output layout]), the graph goes on with a copy in the promised layout, and the next backward
# recaptures with the layout found.  Until then, where that copy itself is what the next
# opaque call or delivery point gets -- a hook on the tensor a custom Function's grad flows
# to, a node hook, the next custom backward, a leaf's hooks -- user code is handed the tensor
# that was returned instead, as eager hands it on: its strides, its identity (`is`), the same
# values.  What the call returns is then checked as any output (a grad passed through in
# another layout is copied again).  Where other ops lie between, their results keep the
# promised layout (docs/semantics.md's known deviation, for one backward).

def originals(step, grads: list) -> list:
    """Note [The tensor user code returned, to user code]: `grads` with each copy made for the
    promised layout replaced by what user code returned."""
    out = []
    for g in grads:
        e = step.originals.get(id(g)) if g is not None else None
        out.append(e[1] if e is not None and e[0]() is g else g)
    return out


def _after_user_code(step, s: OpaqueSite, site: int) -> None:
    """The checks once user code returned: hooks it registered, saved tensors it modified."""
    if step.hooks_changed:      # hooks.py Note [Hooks registered during the backward]
        run_hooks.check_registered(step, s, hook_dicts())
    if step.checks:     # trace/trace.py Note [Saved tensors modified during the backward]
        check_after_call(step.checks, site)



# Note [One-grad tensor hook calls]
# The commonest hook call runs the tensor hooks of a one-output node (`y.register_hook`): this
# step's grad is defined and the node has no retains_grad and no node pre-hooks.  The call then
# does only what eager's engine does for it (run_hooks.run_tensor_hooks: each hook of each dict, in
# order, on a snapshot of the dict; a result other than the grad itself is checked as eager
# checks it: hooks.py Note [Cheap result checks]), then the checks after user code ran.  Every
# call's outputs (`_outputs`) are handed on in one pass when each is the very grad given for its
# slot, plain, in the promised layout, none twice (Note [Passed-through grads]: identity hooks,
# module full backward hooks, pass-through Functions); anything else takes the per-output loop.
# Which hooks run is read from this step's dicts (the NodeHooks the walk made), never from the
# capture: a hook added to a dict the graph calls is called, one removed is not (as in eager);
# a dict added or removed, or other hook code, changes the signature (recapture).


# Note [Hook calls in C++]
# With the extension, the one-grad tensor hook call above is one C++ call
# (_fastwalk_run.cpp tensor_hooks_call) doing what `_tensor_hooks_call` does, in the same
# order: step.current set (and put back however the hooks end), each hook of each of this
# step's dicts on a snapshot of it, in the dict's own order (eager's PyDict_Next), a result
# other than None or the grad itself kept when it is a plain tensor of the grad's dtype,
# layout, device and size and otherwise handed to run_hooks.check_single (eager's errors), then
# the checks after user code (hooks registered meanwhile: `_after_user_code`; saved tensors
# modified: the VersionChecks of saved.py Note [Version checks in C++], its error raised by
# saved.raise_modified), then the grad itself when it is the one given, in the promised
# layout, else `_outputs`.  Python frames per call: opaque_direct's only.

HOOK_CALL = None    # the extension's tensor_hooks_call, once it is loaded (walk/fastwalk.py)


# Note [Custom calls in C++]
# With the extension, a custom Function's opaque call (`_run`'s "custom" branch) is one C++
# call (_fastwalk_run.cpp custom_call) when this step's grads are all defined, the site has
# the metadata of its edges (`out_meta`), frees nothing after the call and may not return a
# sparse grad (backends/eager.py Note [Sparse grads from opaque calls]): every grad given a
# tensor (else PyNode's materializing runs, in Python, before any user code), step.current
# set and put back however the backward ends, the node's `apply` called with the grads (as
# PyNode::apply calls it).  Then, when the result is one plain tensor for the Function's one
# tensor input, of the shape, dtype and device the edge's slot expects, and no node hook was
# registered meanwhile, the checks once user code returned and the hand-on of a grad passed
# through unchanged, as the tensor hook call does; anything else (several inputs, None,
# another shape to sum, another dtype to cast, a check that raises) goes to `_custom_tail`,
# which does the rest of `_run` and opaque_direct in Python, in the same order.

CUSTOM_CALL = None  # the extension's custom_call, once it is loaded (walk/fastwalk.py)


def _custom_tail(step, s: OpaqueSite, site: int, node, box: list, grads: list, label: str,
                 n_hooks: int) -> list:
    """Note [Custom calls in C++]: the custom call once its backward returned what `box`
    holds (its only holder: what `finish` makes of it is referenced as on the Python path,
    for `_outputs`' stealing decisions)."""
    prev = step.current
    step.current = s.node_index
    try:
        outs = _validated(s, step, custom.finish(node, custom.fwd_info(node), box.pop()))
        if hooks.COUNTS.node != n_hooks:    # a node hook was registered while it ran
            outs = _late_post_hooks(s, step, node, outs)
    finally:
        step.current = prev
    if step.hooks_changed or step.checks:
        _after_user_code(step, s, site)
    return _outputs(step, s, site, outs, grads, label)


def _tensor_hooks_call(step, s: OpaqueSite, site: int, h, grads: list, label: str) -> list:
    g0 = grads[0]
    prev = step.current
    step.current = s.node_index
    try:
        g = g0
        for d in h.tensor.get(0, ()):
            for hook in list(d.values()):     # snapshot: hooks may remove themselves
                res = hook(g)
                if res is not None and res is not g:
                    g = run_hooks.check_single(g, res, hook)
    finally:
        step.current = prev
    if step.hooks_changed or step.checks:
        _after_user_code(step, s, site)
    if g is g0 and g.stride() == s.out_strides[0]:
        return [g]
    return _outputs(step, s, site, [g], grads, label)


# Note [One-pass node hook calls]
# A node's pre-hooks (`grad_fn.register_prehook`, a module full backward hook's output side)
# or post-hooks (`grad_fn.register_hook`, its input side), when this step's grads are all
# defined and the call has nothing else to run (no tensor hooks or retains_grad before the
# pre-hooks, no saved tensors to release after the post-hooks): each hook of this step's dict,
# on a snapshot of it, called with a tuple of the grads (post: grad_inputs, grad_outputs); a
# result other than None replaces the tuple after eager's checks (python_hook.cpp check_result:
# a tuple, as many values, each value's check_single_result: run_hooks._check_tuple), then the
# checks after user code ran and the one-pass hand-on of `_outputs`.  The general path
# (`_run`) does the same through run_pre / run_post with copies of the lists.

def _node_hooks_call(step, s: OpaqueSite, site: int, d, grads: list, label: str,
                     post: bool) -> list:
    n = s.n_first
    outs = tuple(grads[:n]) if post else tuple(grads)
    prev = step.current
    step.current = s.node_index
    try:
        if d:
            ins = tuple(grads[n:]) if post else None
            for hook in list(d.values()):     # snapshot: hooks may remove themselves
                res = hook(outs, ins) if post else hook(outs)
                if res is not None and res is not outs:
                    outs = run_hooks._check_tuple(outs, res, hook)
    finally:
        step.current = prev
    if step.hooks_changed or step.checks:
        _after_user_code(step, s, site)
    return _outputs(step, s, site, list(outs), grads, label)


def _outputs(step, s: OpaqueSite, site: int, outs, grads: list, label: str,
             loose: frozenset = frozenset()) -> list:
    """The graph's values for what user code returned (the kept outputs): Notes [Undefined
    grads] (defined.py), [Passed-through grads], [Opaque output layout], runtime/run.py
    [Stealing at delivery points], [One grad for several leaves], backends/eager.py [Sparse
    grads from opaque calls] (loose)."""
    if type(outs) is not list:
        outs = list(outs)
    strides = s.out_strides
    n = len(outs)
    if n == len(strides) == len(s.out_specs) and n <= len(grads) and not s.free_inputs:
        # Note [Passed-through grads], every output at once: each the grad given for its slot,
        # plain, in the promised layout, and no tensor returned twice
        for k in range(n):
            o = outs[k]
            if o is not grads[k] or o is None or type(o) is not _TENSOR or \
                    o.layout is not _STRIDED or o.stride() != strides[k]:
                break
        else:
            if n == 1 or len({id(o) for o in outs}) == n:
                return outs
    specs = s.out_specs
    if len(outs) != len(specs):     # zip(strict=True) raised here before
        raise ValueError(f"compiled_bw: {label}: {len(outs)} outputs, {len(specs)} expected")
    times = _repeated(s, outs) if s.deliver_order is not None and len(outs) > 1 else None
    res = []
    for k in range(len(outs)):
        spec = specs[k]
        if spec is None:
            continue
        want = strides[len(res)]
        o = outs[k]
        if o is None:   # the graph computes on with zeros; eager's None: Note [Undefined grads]
            step.undefined.add((site, len(res)))
            step.memo.clear()
            res.append(_zeros(spec, want))
            continue
        plain = type(o) is torch.Tensor
        if not plain or o.layout is not torch.strided:
            if plain and len(res) in loose and o.layout in SPARSE_LAYOUTS:
                step.eager_after = f"{label} returned a {o.layout} grad"
                res.append(o)
                continue
            _check_dense(o, label)
        elif o._is_zerotensor():    # Note [ZeroTensors from opaque calls]
            step.eager_after = f"{label} returned an efficient ZeroTensor"
            step.memo.clear()
            res.append(_zeros(spec, want))      # spec's dtype: validate_outputs' cast, as eager's
            continue
        # Note [One grad for several leaves]: returned `n` times, each a delivery point's;
        # `slots`: the places of `outs` that hold it (outputs the graph does not keep too)
        n = 1 if times is None else times.get(id(o), 1)
        slots = 1 if len(outs) == 1 else sum(x is o for x in outs)
        # a leaf may take it only where one graph read gets it, or only delivery points
        # (Step.shared then lets the last of them take it): Note [Passed-through grads]
        sole = slots == 1 or n > 1 or _readers(s, outs, o) <= 1
        # Note [Passed-through grads]: a grad user code returned unchanged goes on as is
        if any(o is g for g in grads) and _same_layout(o, want):
            # (the count is read here, not in a helper: Note [Counting references inline])
            if sole and s.free_inputs and sys.getrefcount(o) <= _OWNED_REFS + slots - 1 and \
                    _owned_input(o, grads, s.free_inputs):
                step.stealable[id(o)] = weakref.ref(o)
                if n > 1:
                    step.shared[id(o)] = n
            res.append(o)
            continue
        # which outputs user code kept no reference to (runtime/run.py Note [Stealing at
        # delivery points]; asked only where some output goes to a delivery point): the
        # Python object only in `outs` (3 = `outs`, `o` and the argument), its storage held by
        # no other tensor (a kept view holds it; 2 = the tensor + the temporary storage object)
        unreferenced = sole and s.feeds_delivery and plain and \
            sys.getrefcount(o) <= _UNREFERENCED + slots - 1 and \
            _storage_use_count(o.untyped_storage()._cdata) <= 2
        # layout: Note [Opaque output layout]; views of inputs are copied (custom op outputs).
        # An unreferenced output shares its storage with no input grad (that grad would hold
        # it too): no need to look (a storage object per grad, every call).
        same = _same_layout(o, want)
        if same and o.stride() != want and dense(o):
            # strides of size-1 dims only: passed on as it is (no addressing changes), and the
            # layout recorded, which eager's in-place sums keep (Note [Opaque output layout])
            step.real_layouts[(site, len(res))] = (tuple(o.shape), tuple(o.stride()), None)
        if not same or (not unreferenced and _views_input(o, grads)):
            if not same:
                # an overlapping output (an expanded grad) is kept: no copy can have its layout
                step.real_layouts[(site, len(res))] = (tuple(o.shape), tuple(o.stride()),
                                                       None if dense(o) else o)
            copy = torch.empty_strided(o.shape, want, dtype=o.dtype, device=o.device).copy_(o)
            if not same:    # Note [The tensor user code returned, to user code]
                step.originals[id(copy)] = (weakref.ref(copy), o)
            o = copy
            unreferenced = True
        if unreferenced:
            step.stealable[id(o)] = weakref.ref(o)
            if n > 1:
                step.shared[id(o)] = n
        res.append(o)
    return res


# Note [Passed-through grads]
# A hook or a custom backward that returns a grad it was given (`return g`, the identity
# hooks of module full backward hooks' BackwardHookFunction left opaque, pass-through
# Functions) hands the very tensor on, as eager's engine does; an opaque call's output may
# then be one of its inputs.  Nothing in the graph writes into a tensor in place, and Inductor
# never reuses the buffers an opaque call reads or returns (backends/inductor.py Note
# [Inductor: opaque buffers]), so the alias is safe.  It is never stolen at a delivery point
# (the graph holds the input).  A view of an input (other offset or strides) is still copied.
# A grad returned for several inputs goes on as itself for each, as eager's input buffers
# hold it: the next custom backward, hook or leaf gets that very tensor (and may keep it or,
# against the hook contract, write into it: the later readers see that, as in eager), and
# `torch.autograd.grad` returns it for each input.  A leaf may then take it (Note [Stealing
# at delivery points]) only where the graph reads it once (`used_outputs`, set by
# runtime/run.py mark_stealing), or where every read is a delivery point and it is the last
# (Note [One grad for several leaves]); elsewhere AccumulateGrad copies it, as eager's does
# while another buffer holds it (when eager's last leaf would take it instead, `.grad` is a
# copy with eager's values).  Until 2026-11-28 such a grad was copied per output: the copies
# did not carry a hook's in-place write to the other readers (a wrong grad) nor identity
# (found by a random-program differential with user code).


# Note [User code may keep what it is given]
# A buffer an opaque call returned unreferenced is marked stealable (Step.stealable): a leaf
# it reaches may take it as `.grad`.  Passed into a later opaque call first (a custom Function
# or hook further down the path), it is user code's to keep: that call unmarks it before it
# runs, and marks it again only if it hands it back with no reference kept (Note
# [Passed-through grads]).  Without that a leaf took a grad that a custom backward had kept
# (`ctx.kept = g; return g` downstream of a call that returned the grad for two inputs), so
# `.grad` shared the kept tensor's buffer where eager copies (found by a random-program
# differential with user code, 2026-11-28; tests/test_no_grad_copy.py).


# Note [One grad for several leaves]
# A custom backward may return one tensor for several inputs (`return g, g`; PyTorch's
# test_no_grad_copy), and eager's engine puts that one tensor into each next node's input
# buffer.  Where those are leaves, the AccumulateGrads that run first find it referenced
# elsewhere and copy it; the last one, the only holder left, takes the buffer itself (when
# nothing else references it; accumulate_grad.h).  Each of them runs its leaf's hooks on that
# very tensor first, so a hook that writes into its grad (`g.add_(1)`, which the hook contract
# forbids but eager runs) changes what the later leaves get.  So when every output of an
# opaque call goes straight to a delivery point (mark_stealing: `deliver_order`), a tensor
# returned `n` times goes to each of them as itself; it is stealable by the usual rules (Note
# [Stealing at delivery points]; the reference counts allow for the `n - 1` more slots of
# `outs` that hold it) -- for a grad the call was given and returned (Note [Passed-through
# grads]), only when the graph uses that input nowhere else (`free_inputs`) and no other
# tensor or Python reference holds it than the graph's own variable and argument list
# (`_owned_input`), as eager's use count would show -- and Step.shared then lets only the last
# of its `n` deliveries take it (calls/deliver.py); the others copy, as AccumulateGrad does
# with a grad referenced elsewhere.  An earlier leaf's hooks get that tensor and may keep it
# (or a view): then no later leaf takes it (deliver_direct compares its reference, use and
# storage counts before and after that delivery).  (Until 2026-11-28 the earlier ones got copies made here,
# so a hook writing into its grad did not reach the later leaves: a wrong grad, found by a
# random-program differential with user code.)

def _readers(s: OpaqueSite, outs: list, o) -> int:
    """How many of the outputs the graph reads (`used_outputs`) are `o`."""
    r, readers = 0, 0
    for j, spec in enumerate(s.out_specs):
        if spec is not None:
            if outs[j] is o and r in s.used_outputs:
                readers += 1
            r += 1
    return readers


def _repeated(s: OpaqueSite, outs: list) -> dict | None:
    """Note [One grad for several leaves]: id -> how many kept outputs are that tensor, for
    tensors returned more than once, when every kept output goes to a delivery point."""
    kept = [outs[k] for k, spec in enumerate(s.out_specs) if spec is not None]
    if len(kept) != len(s.deliver_order):
        return None
    times: dict = {}
    for o in kept:
        if o is not None:
            times[id(o)] = times.get(id(o), 0) + 1
    return {k: v for k, v in times.items() if v > 1} or None


# Python references to a grad a custom backward was given and returned, when nothing but the
# graph holds it, read in _outputs: the graph's variable and argument list, `outs`, _outputs'
# `o` and getrefcount's argument (tests/test_no_grad_copy.py fails, naming it, if the count
# moves)
def _refs_of_a_local() -> int:
    o = object()
    return sys.getrefcount(o)


# What a reference count read as `sys.getrefcount(o)` of a local `o` includes beyond the
# references the counts here name: 0 where the call's argument is a reference of its own
# (CPython 3.11-3.13), -1 where the interpreter lends the local to the call (3.14's borrowed
# loads; sys.getrefcount's documentation)
_REF_SHIFT = _refs_of_a_local() - 2
_OWNED_REFS = 5 + _REF_SHIFT
_UNREFERENCED = 3 + _REF_SHIFT      # `outs`, `o` and getrefcount's argument


# Note [Counting references inline]
# A reference count that decides whether user code kept a tensor is read in the frame that
# holds the tensor, never in a Python function it is passed to.  How many references a call's
# argument costs depends on the interpreter's state, not on our code: CPython 3.11 moves the
# arguments of a Python-to-Python call into the callee's frame, but once a PEP 523 frame
# evaluator is installed (Dynamo installs one the first time it runs in a process, e.g. to
# judge a custom backward) calls are not inlined and the caller's stack keeps its own
# reference too.  _OWNED_REFS read one frame down was 6 in a process where Dynamo never ran
# and 7 where it had: a constant right for one stole the grad a custom backward also kept in
# the other (found 2026-11-28; tests/test_no_grad_copy.py's fresh-process test).

def _owned_input(o: torch.Tensor, grads: list, free: frozenset) -> bool:
    """The rest of the test for a passed-through grad no user code holds (the caller has read
    the reference count): the graph uses that input nowhere else, no other tensor shares it."""
    return any(g is o and i in free for i, g in enumerate(grads)) and \
        o._use_count() == 1 and _storage_use_count(o.untyped_storage()._cdata) <= 2


def _views_input(o: torch.Tensor, grads: list) -> bool:
    ptr = o.untyped_storage().data_ptr()
    return any(g is not None and g.untyped_storage().data_ptr() == ptr for g in grads)


# Note [ZeroTensors from opaque calls]
# A custom backward or hook may return torch._efficientzerotensor (or a result computed from
# one: ZeroTensor * x is one).  It has no storage: Inductor's kernels would read a null
# pointer, and the step's own checks (stealing, views) cannot look at its storage.  It goes on
# as a dense zero tensor of the traced layout -- the values eager computes -- and the graph's
# later backwards run eager autograd (Step.eager_after), as for a sparse grad.  What eager
# does differently on that one backward: the ZeroTensor-ness flows on (eager's `.grad` may
# then be a ZeroTensor, which its next in-place accumulation refuses with "ZeroTensors are
# immutable"); here the results are dense zeros.  A ZeroTensor the graph takes as an input
# (saved, root, leaf) makes the walk fall back (walk/walk.py Note [ZeroTensors]).


def _zeros(spec: tuple, strides) -> torch.Tensor:
    """Zeros where the graph holds an output of this (shape, dtype, device), in its layout."""
    shape, dtype, device = spec
    return torch.empty_strided(shape, strides, dtype=dtype, device=device).zero_()


def _check_dense(o, label: str) -> None:
    if o.layout != torch.strided:
        raise NotDense(
            f"compiled_bw: {label} returned a {o.layout} grad where the captured graph "
            "holds a dense (strided) tensor (opaque calls are dense). This backward could "
            "not be completed; later backwards of this graph run eager autograd (see "
            "stats().fallback_reasons). Run it without compiled_bw.enable() to avoid this "
            "error, or make the backward return a dense grad.")
    if python_dispatch(o):
        # Note [Subclasses stay outside the graph]: the graph was traced with a dense grad
        # here; what it would compute from a subclass is not what eager computes.
        raise RuntimeError(
            f"compiled_bw: {label} returned a tensor subclass ({type(o).__name__}) grad "
            "where the captured graph holds a dense tensor (opaque calls are dense). Run "
            "this backward without compiled_bw.enable(), or make the Function return a "
            "dense grad.")


_LIB.impl("opaque", _opaque_impl, "CompositeExplicitAutograd")
opaque = torch.ops.compiled_bw.opaque.default
# Never dead code: an opaque call runs user code (a hook, a custom backward) that eager runs
# whether or not the graph uses what it returns (a traced backward that ignores its grad).
torch.fx.node.has_side_effect(opaque)


LAYOUT_HINTS: dict = {}     # (site, kept output) -> strides, set while a graph is recaptured
#                             with the layouts a run found (Note [Opaque output layout])


def found_layouts(real_layouts: dict, observed: frozenset) -> dict:
    """The dense real layouts a run found where the graph promised others, where user code
    can see them (`observed_layouts`)."""
    return {k: v[1] for k, v in real_layouts.items() if v[2] is None and k in observed}


def _hinted(site: int, specs: tuple, strides: tuple) -> tuple:
    """Per kept output: the strides LAYOUT_HINTS holds for it (of its rank), else `strides`'."""
    shapes = [sp[0] for sp in specs if sp is not None]
    out = []
    for j, st in enumerate(strides):
        hint = LAYOUT_HINTS.get((site, j))
        out.append(hint if hint is not None and len(hint) == len(shapes[j]) else st)
    return tuple(out)


@torch.library.register_fake("compiled_bw::opaque", lib=_LIB)
def _opaque_fake(site: int, grads: list[torch.Tensor | None], label: str) -> list[torch.Tensor]:
    s = THREAD.step.sites[site]
    if s.out_strides is None:
        s.out_strides = _guess_strides(s.out_specs, grads, s.known_strides)
        if LAYOUT_HINTS:
            s.out_strides = _hinted(site, s.out_specs, s.out_strides)
    specs = (sp for sp in s.out_specs if sp is not None)
    return [torch.empty_strided(shape, strides, dtype=dtype, device=device)
            for (shape, dtype, device), strides in zip(specs, s.out_strides, strict=True)]
