"""Run one backward/grad call through compiled_bw: walk, look up or capture, run, deliver.

Consumes the arguments torch.autograd hands its engine (`_engine_run_backward`); produces
what the engine would return (grad(): the grads; backward(): None, with `.grad`s written),
or raises Fallback so the caller runs eager autograd and records why.

Note [Delivery through the real engine]
Leaf grads are not written by us: the compiled graph runs inside the backward of a tiny
autograd.Function (`_Deliver`) run by the real engine, so `queue_callback` /
`_current_graph_task_id()` work for code run inside the graph and final callbacks run after
it.  Each leaf's real AccumulateGrad node gets its grad either at a delivery point inside the
graph (Note [Delivery points]) or, when nothing can observe when that happens, from the
engine after the graph (the leaves are `_Deliver`'s inputs): tensor hooks, the layout
contract, post-accumulate-grad hooks and node hooks (also C++ ones we cannot see) behave as in
eager.

Note [Delivery points]
Eager runs a leaf's AccumulateGrad (and its hooks: DDP's reducer hook, which hands a bucket to
allreduce; FSDP2's per-group post-backward reads and clears `.grad`) as soon as its last grad
arrived, interleaved with the rest of the backward in ready-queue order.  So whenever that can
be observed -- some leaf's AccumulateGrad has a hook of any kind (CWalk.leaf_observed: C++
sees C++ hooks too; part of the cache key), or user code runs inside the graph (hooks, custom
Functions) -- the trace makes every leaf's AccumulateGrad a delivery point, a
`compiled_bw::deliver` call placed where our engine (engine.cpp's order) runs the node
(calls/deliver.py; with Inductor kept in graph order by backends/inductor.py Note [Inductor:
call order]).  It
runs the real node as the engine does (graph/native.py run_leaf), inside `_Deliver`'s graph task.
Errors: a backward that fails half-way has then already delivered exactly the leaves eager
had delivered before the failing node, and no other.  Graphs without delivery points (nothing
observes) compute every grad before any leaf is touched: an error there (an untraceable
built-in node raising, out of memory) leaves every `.grad` as it was, where eager keeps the
grads of the leaves it delivered first.  A grad only the graph holds is taken by
AccumulateGrad as eager takes it (Note [Stealing at delivery points]); others are copied
into `.grad` where eager might steal them (values equal; strides of size-1 dims may differ).
Without the C++ extension, a graph that needs delivery points runs eagerly (fallback reason
says so).

Note [Direct delivery]
When the graph holds no opaque call or delivery point (no custom Function, hook or
untraceable node: no user code runs inside it), going through the engine buys nothing but its
cost (a GraphTask, the _Deliver node, one engine step per leaf: about a quarter of an
overhead-bound backward).  Then
the graph is called directly with grad mode off, as the engine would run it, and each leaf's
AccumulateGrad node is called directly from C++ (the walk's `accumulate`) with the grad moved in,
so it steals, accumulates and honours the layout contract exactly as in eager.  That is only
done when none of those nodes has a hook of any kind (C++ sees all of them, also hooks Python
cannot list); otherwise, or without the C++ extension, the grads go through _Deliver.

Note [C++ hit path]
A cache hit of a graph Inductor compiled with its C++ wrapper (backends/inductor.py Notes
[Inductor: C++ wrapper], [Inductor: C entry point]),
walked in C++, with no opaque call (and, for backward(), no hook on any leaf's AccumulateGrad):
the whole run is one C++ call, CWalk.run_native (_fastwalk_run.cpp).  It hands the root grads and
the walk's saved tensors to the graph's C entry point as tensor handles and gives each leaf's
AccumulateGrad its grad, as Note [Direct delivery] does (grad(): returns the grads asked for,
the only Python tensors it makes).  No saved tensor or leaf grad becomes a Python tensor (on
the overhead-bound benchmark that was ~130 Python tensors made and freed per step, plus the
wrapper's conversions).  A dynamic graph (runtime/dynamic.py) takes it too: its SymInt inputs
follow the saved tensors, as the 0-dim int64 tensors the C entry point reads them from, made
once per set of sizes (Compiled.native_tail).  Everything else takes the Python path below,
which is also what the first run of a graph takes.

Note [Box ownership]
With retain_graph=False, eager autograd frees each node's saved tensors when the node has
run.  Our graph frees its inputs after their last use (the backends' boxed calling
convention), which frees memory only if the Box holds the only reference.  So before the
graph runs: the Walk's list is dropped, and the Slot (Note [Slots]) of every saved tensor
of a node the graph computes is released, so the autograd graph no longer owns it either.
Saved tensors of nodes run opaquely stay in their Slots until the run is over: the real node
unpacks them at run time (so do nodes whose hooks run opaquely: they stay too).  With
retain_graph=True, the Slots keep everything.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import time

import torch
from torch.autograd.graph import GradientEdge

from ..backends.compile_worker import deterministic, foreign_ops, precision
from ..backends.eager import compile_eager
from ..calls.opaque import LAYOUT_HINTS, NotDense, found_layouts, relayout
from ..calls.run_hooks import HookRegisteredDuringBackward
from ..checkpoint.recompute import consume_saved, release_regions
from ..core import dispatch_tls
from ..core.thread import THREAD, current_step
from ..graph.custom import _orig_apply as _raw_apply
from ..graph.defined import evaluate
from ..graph.nodes import CUSTOM
from ..graph.saved import ERR_BACKWARD_TWICE, gradient_edge
from ..graph.subclass import flatten, rebuild
from ..passes import run_passes
from ..torchapi import autograd as torch_autograd
from ..torchapi import dynamo as torch_dynamo
from ..trace.differentiable import not_differentiable
from ..trace.trace import MAY_RAISE, Options, TraceFailed, needed_and_captured, trace_backward
from ..walk import fastwalk
from ..walk.walk import WalkUnsupported, tensor_meta
from . import background, cudagraphs, dynamic, engine_state, real_strides, repro, streams, verify, warm
from .cache import CacheKey, Compiled, Fallback, FallbackToEager, OptionsKey, RootKey
from .slots import box_owned, slots_of

_ENGINE = torch_autograd.ENGINE
# eager's error (python_engine.cpp) for a grad() input with no grad and allow_unused=False;
# torch 2.13 added the input's index to it
ERR_UNUSED = (("The differentiated Tensor at index {} appears" if torch_autograd.RELEASE >= (2, 13)
               else "One of the differentiated Tensors appears") +
              " to not have been used in the graph. Set allow_unused=True if this is the desired "
              "behavior.")
_ANCHOR = torch.empty(0, requires_grad=True)


class _Deliver(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor, run, *leaves):
        ctx.run = run
        return torch.empty(0)

    @staticmethod
    def backward(ctx, _grad):
        run, ctx.run = ctx.run, None
        return (None, None, *run())


class Step:
    """What opaque calls and engine-state queries read at run time (calls/opaque.py,
    runtime/engine_state.py): this step's nodes, input metadata and hooks."""
    __slots__ = ("_will_ids", "captured_ids", "checks", "current", "eager_after", "hooks",
                 "hooks_changed", "in_meta", "memo", "nodes", "notes", "originals", "plan",
                 "real_layouts", "shared", "sites", "stealable", "tls", "undefined", "walk")

    def __init__(self, w, plan, opts=None) -> None:
        self.walk = w            # engine_state.py's execution order reads its edges
        self.nodes = w.nodes
        self.in_meta = w.in_meta
        self.hooks = w.hooks
        self.plan = plan
        self.sites = plan.opaque_sites if plan is not None else []
        self.current = None     # index of the node whose user code runs (engine_state.py)
        self.hooks_changed = False  # graph/hooks.py Note [Hooks registered during the backward]
        self.notes: list = []
        self._will_ids = None
        self.tls = None          # dispatch_tls.Restorer of the TLS when the graph starts
        self.undefined: set = set()   # opaque outputs that came back None (graph/defined.py)
        self.memo: dict = {}
        self.stealable: dict = {}  # id -> weakref of opaque outputs nobody else references
        # id -> deliveries left of a stealable tensor several delivery points get
        # (calls/opaque.py Note [One grad for several leaves]): only the last may take it
        self.shared: dict = {}
        self.real_layouts: dict = {}  # (site, output) -> (shape, strides) where the guess was wrong
        # id(copy) -> (weakref of the copy, what user code returned): calls/opaque.py
        # Note [The tensor user code returned, to user code]
        self.originals: dict = {}
        # backends/eager.py Note [Sparse grads from opaque calls], calls/opaque.py Note
        # [ZeroTensors from opaque calls]: what returned one, if any
        self.eager_after: str | None = None
        # site -> saved tensors it checks once it ran (trace/trace.py Note [Saved tensors
        # modified during the backward]); None: nothing to check
        self.checks: dict | None = None
        # grad(): the nodes whose grads are captured (eager's exec_info captures_)
        self.captured_ids = frozenset() if opts is None or opts.accumulate else \
            frozenset(id(w.nodes[i]) for i, _ in opts.inputs if i >= 0)

    def will_execute_ids(self) -> set:
        if self._will_ids is None:
            self._will_ids = {id(self.nodes[i]) for i in self.plan.will_execute}
        return self._will_ids


def in_compiled_run() -> bool:
    return THREAD.nesting > 0


def _nesting() -> int:
    """How many compiled runs are running on this thread, one inside the other (a backward
    called by user code inside a compiled graph runs inside it: Note [Reentrant backward])."""
    return THREAD.nesting


# Eager's engine runs a reentrant backward deeper than 60 levels on another thread (engine.cpp
# MAX_DEPTH), so any depth works; ours nest Python frames.  From this depth on, a backward called
# inside a compiled run runs eager autograd (which then handles any depth).
MAX_NESTED_RUNS = 8


# Note [Profiler]
# Under torch.profiler (or autograd.profiler, emit_nvtx, emit_itt) eager's engine records one
# `autograd::engine::evaluate_function: <Node>` range per node it runs, with that node's ops
# inside.  A compiled graph has no per-node boundaries (Inductor fuses ops of several nodes into
# one kernel), so it cannot record them truthfully: while a profiler is active the backward runs
# eager autograd (a fallback with its reason), so a profile shows what eager shows.  To profile
# the compiled backward itself, set COMPILED_BW_PROFILE=compiled: the graph then runs as usual
# inside one `compiled_bw::backward` range (no per-node events; docs/semantics.md: Known deviations);
# `with compiled_bw.profile_compiled():` does that for a block (benchmarks/memory.py).
PROFILE_COMPILED = os.environ.get("COMPILED_BW_PROFILE", "") == "compiled"
_profiler_enabled = torch_autograd.profiler_enabled


@contextlib.contextmanager
def profile_compiled():
    """Note [Profiler]: under a profiler, run the compiled graph (one range) instead of eager
    autograd while this block runs (process-wide)."""
    global PROFILE_COMPILED
    prev, PROFILE_COMPILED = PROFILE_COMPILED, True
    try:
        yield
    finally:
        PROFILE_COMPILED = prev


# torch.func.vjp's vjp_fn calls grad() on the tensors of its finished transform (functorch's
# GradTrackingTensor wrappers of a level that has exited): their autograd is reachable from C++
# only (Python's get_gradient_edge of such a leaf finds no grad_fn), so eager autograd runs it.
_FUNCTORCH_WRAPPED = ("functorch-wrapped tensors are roots or inputs of the backward (torch.func."
                      "vjp's vjp_fn, called after its transform ended)")


def _precheck(t_outputs, inputs) -> None:
    if _profiler_enabled() and not PROFILE_COMPILED:
        raise FallbackToEager("a profiler is active (eager records one evaluate_function range "
                              "per autograd node; COMPILED_BW_PROFILE=compiled profiles the "
                              "compiled graph instead, Note [Profiler] in runtime/run.py)")
    if torch_dynamo.torch_compiled_autograd_on():
        # the user asked torch's compiled autograd to take this backward: eager autograd's
        # entry point gives it to it, as without compiled_bw
        raise FallbackToEager("torch's compiled autograd is active "
                              "(torch._dynamo.compiled_autograd._enable)")
    if torch_autograd.functorch_transforms_active():   # first: torch.func.grad's own call
        raise FallbackToEager("functorch transforms (vmap/grad) are active")  # has create_graph
    if torch.is_anomaly_enabled():
        raise FallbackToEager("anomaly mode is enabled")
    if engine_state.legacy_vmap_level():
        # eager raises for backward() there and batches grad(); the graph takes dense tensors
        raise FallbackToEager("legacy vmap (torch._vmap_internals, gradcheck's batched grad) "
                              "is active")
    if torch_autograd.current_graph_task_id() != -1 and not in_compiled_run():
        raise FallbackToEager("reentrant backward (called from inside a running eager backward)")
    if _nesting() >= MAX_NESTED_RUNS:
        raise FallbackToEager(f"reentrant backward nested {MAX_NESTED_RUNS} compiled backwards "
                              "deep (eager autograd runs the deeper levels)")
    # Note [Reentrant backward]: called from user code inside a compiled graph (reentrant
    # checkpoint's CheckpointFunction.backward, a hook calling grad()), a backward is its own
    # capture and cache entry, run inside the outer graph's engine task as eager runs a
    # reentrant backward inside the running one; the outer graph stays compiled.
    # Note [GradientEdge roots and inputs]: an edge (node, input_nr) is what the engine
    # takes for a tensor anyway (gradient_edge); torch's _make_grads gave each edge root its
    # grad.  Pipeline parallelism's split backward (stage_backward_weight) runs from the
    # edges its input pass kept to the weights' AccumulateGrad edges.
    for t in t_outputs:
        if type(t) is GradientEdge:
            continue
        if not isinstance(t, torch.Tensor):
            raise FallbackToEager(f"{type(t).__name__} roots are not supported")
        if torch_autograd.functorch_wrapped(t):
            raise FallbackToEager(_FUNCTORCH_WRAPPED)
        if t.grad_fn is None and not t.requires_grad:
            raise FallbackToEager("a root does not require grad", is_error=True)
    for t in inputs:
        if type(t) is GradientEdge:
            continue
        if not isinstance(t, torch.Tensor):
            raise FallbackToEager(f"{type(t).__name__} inputs are not supported")
        if torch_autograd.functorch_wrapped(t):
            raise FallbackToEager(_FUNCTORCH_WRAPPED)
        if not t.requires_grad:
            raise FallbackToEager("an input does not require grad", is_error=True)


def compiled_call(state, t_outputs, grad_tensors, keep_graph, create_graph, inputs,
                  allow_unused, accumulate):
    """One backward()/grad() call: checked, then run by _call (inside one profiler range when
    Note [Profiler] asks).  state: api._State (cache, stats, backend).  Raises FallbackToEager."""
    _precheck(t_outputs, inputs)
    opts = (bool(keep_graph), bool(allow_unused), accumulate, bool(create_graph))
    if PROFILE_COMPILED and _profiler_enabled():    # Note [Profiler]
        with torch.autograd.profiler.record_function("compiled_bw::backward"):
            return _call(state, t_outputs, grad_tensors, inputs, *opts)
    return _call(state, t_outputs, grad_tensors, inputs, *opts)


def _call(state, t_outputs, grad_tensors, inputs, keep_graph: bool, allow_unused: bool,
          accumulate: bool, create_graph: bool):
    """The call stage by stage: walk -> key -> look up or capture (trace, passes, compile) ->
    run."""
    root_edges = _root_edges(t_outputs)
    if state.cache.storms and not state.strict:     # runtime/cache.py Note [Recapture storms]
        _backoff(state, root_edges, grad_tensors, t_outputs)
    w = _walk(root_edges, create_graph)
    in_edges = _input_edges(w, inputs, accumulate)
    order = None
    if len(in_edges) > 1 and any(a > b for a, b in itertools.pairwise(in_edges)):
        order = sorted(range(len(in_edges)), key=in_edges.__getitem__)   # Note [Input order]
        in_edges = tuple(in_edges[k] for k in order)
    opts = Options(accumulate, keep_graph, in_edges, allow_unused, create_graph)
    released = w.released()
    if released:    # walk/fastwalk.py Note [Released nodes]
        needed = needed_and_captured(w, opts)[0]
        if any(needed[i] for i in released):
            raise FallbackToEager(ERR_BACKWARD_TWICE, is_error=True)
    key, root_key = _keys(state, w, root_edges, grad_tensors, opts,
                          any(type(t) is GradientEdge for t in t_outputs))
    got = slots = None
    hit = state.cache.get(key)      # one lookup: the key's hash and equality are not free
    if state.dynamic is not False and hit is None and not create_graph:
        got = dynamic.step(state, w, root_edges, opts, grad_tensors, key, root_key)
    if got is not None and got[0] is dynamic.STATIC:    # a dynamic capture failed: static
        slots = got[1]
        got = None
    if got is not None:
        entry, slots, w = got
    else:
        entry, slots = _lookup_or_capture(state, w, opts, grad_tensors, key, root_key, slots,
                                          hit)
    if slots is None and not opts.retain_graph and not w.frees_saved_itself:
        slots = slots_of(w)     # Python walk: Slots free the saved tensors after the run
    try:
        if state.verify and verify.due(state, entry, w, opts):      # Note [Verify]
            result = verify.checked(
                state, entry, w, opts, t_outputs, grad_tensors,
                inputs if order is None else tuple(inputs[k] for k in order), key, root_key,
                lambda: _run_first_or_hit(state, entry, w, opts, list(grad_tensors), slots))
        else:
            result = _run_first_or_hit(state, entry, w, opts, list(grad_tensors), slots)
    except NotDense as e:   # no leaf was touched; this graph runs eagerly from now on
        state.cache.put(root_key, key, Fallback(f"an opaque call returned a sparse grad: "
                                                f"{str(e).split(' where ')[0]}"))
        raise
    except HookRegisteredDuringBackward:
        state.cache.put(root_key, key, Fallback("user code inside the backward registered a "
                                                "hook on a node that had not run yet"))
        raise
    if entry.eager_after:   # Notes [Sparse grads from opaque calls], [ZeroTensors from opaque calls]
        state.cache.put(root_key, key, Fallback(f"an opaque call returned a grad the graph "
                                                f"does not hold: {entry.eager_after}"))
    if order is not None and result:
        result = tuple(result[k] for k in sorted(range(len(order)), key=order.__getitem__))
    if result is not None and not opts.allow_unused and None in result:
        # eager's check after running (python_engine.cpp), for a grad user code left undefined
        raise RuntimeError(ERR_UNUSED.format(result.index(None)))
    return result


# Note [Input order]
# grad(outputs, inputs) and backward(inputs=) run the same graph whatever the order of
# `inputs`; only grad()'s results follow it.  The key takes the input edges sorted (by walk
# index, input_nr) and the results are put back in the caller's order: pipeline parallelism's
# weight pass passes a param group's weights from a set, in another order each step.


def _backoff(state, root_edges, grad_tensors, t_outputs) -> None:
    """runtime/cache.py Note [Recapture storms]: raise FallbackToEager, before any walk, where
    this backward's root is backing off (its RootKey, as _keys makes it for plain roots)."""
    if any(type(t) is GradientEdge for t in t_outputs):
        return
    try:
        names, root_meta = _root_parts(root_edges, grad_tensors)
    except WalkUnsupported:
        return
    storm = state.cache.backoff(RootKey(names, root_meta, state.backend_key))
    if storm is not None:
        raise FallbackToEager(f"this root captured a static graph per backward, never reused "
                              f"({storm.why}): eager autograd runs it for a while (runtime/"
                              "cache.py Note [Recapture storms])")


def _root_edges(t_outputs) -> list:
    root_edges = [gradient_edge(t) for t in t_outputs]
    if any(n is None for n, _ in root_edges):
        raise FallbackToEager("a root has no autograd node", is_error=True)
    return root_edges


def _walk(root_edges, create_graph: bool = False):
    try:
        return fastwalk.walk(root_edges, history=create_graph)
    except WalkUnsupported as e:
        raise FallbackToEager(str(e)) from None
    except RuntimeError as e:   # e.g. modified in place / backward twice: eager raises it
        raise FallbackToEager(f"walk raised {type(e).__name__}: {e}", is_error=True) from None


def _input_edges(w, inputs, accumulate: bool) -> tuple:
    """Per backward(inputs=)/grad() input: (its node's index in the walk | -1, input_nr)."""
    leaf_index = index = None
    in_edges = []
    for t in inputs:
        node, nr = gradient_edge(t)
        if type(node) is torch_autograd.AccumulateGrad:     # a leaf: among the walk's leaves
            if leaf_index is None:
                leaf_index = {id(v): i for i, v in w.leaves.items()}
            i = leaf_index.get(id(node.variable), -1)
            in_edges.append((i if i >= 0 and w.nodes[i] is node else -1, nr))
            continue
        if accumulate:
            # eager runs up to that node (and its hooks) and stores nothing for an edge;
            # a non-leaf tensor gets retain_grad() first
            raise FallbackToEager("backward(inputs=...) with a non-leaf input")
        if index is None:
            index = {id(n): i for i, n in enumerate(w.nodes)}
        in_edges.append((index.get(id(node), -1), nr))
    return tuple(in_edges)


def _root_parts(root_edges, grad_tensors) -> tuple:
    """The roots' node class names and grad metadata, the parts of a RootKey (raises
    WalkUnsupported for a grad the walk does not take)."""
    return (tuple(type(n).__name__ for n, _ in root_edges),
            tuple(None if g is None else tensor_meta(g) for g in grad_tensors))


def _keys(state, w, root_edges, grad_tensors, opts: Options, edge_roots: bool) -> tuple:
    """The CacheKey of this call and the RootKey it is counted and explained under.
    edge_roots: some root is a GradientEdge; its RootKey also has the graph's size (pipeline
    parallelism's weight pass starts one call per param group from nodes of one class and
    grad shape: each its own root, not recaptures of one)."""
    try:
        names, root_meta = _root_parts(root_edges, grad_tensors)
    except WalkUnsupported as e:
        raise FallbackToEager(f"root grad: {e}") from None
    # Note [Delivery points]: whether a leaf's AccumulateGrad has a hook (also one only C++ sees)
    observed = w.leaf_observed() if opts.accumulate else False
    options = OptionsKey(opts.accumulate, opts.retain_graph, opts.inputs, opts.allow_unused,
                         observed, opts.create_graph, deterministic(), precision())
    key = CacheKey(w.signature, tuple(w.root_edges), root_meta, options, state.backend_key)
    root_key = RootKey(names + (len(w.nodes),) if edge_roots else names, root_meta,
                       state.backend_key)
    return key, root_key


def _lookup_or_capture(state, w, opts, grad_tensors, key: CacheKey, root_key: RootKey,
                       slots=None, hit=None):
    """The cache entry for `key` (Compiled; a Fallback raises), captured on a miss; and the
    Slots installed for the capture (None on a hit).  slots: already installed on w.  hit:
    the entry the caller just looked up (None: look it up)."""
    entry = hit if hit is not None else state.cache.get(key)
    if isinstance(entry, Compiled) and entry.layout_found is not None:
        entry, slots = _relayout_recapture(state, w, opts, grad_tensors, key, root_key, entry,
                                           slots)
    elif entry is None:
        entry, slots = _miss(state, w, opts, grad_tensors, key, root_key, slots)
    else:
        state.cache.last[root_key] = key
        if isinstance(entry, Compiled):     # a remembered failed capture is a fallback only
            state.stats.cache_hits += 1
            state.cache.hit(root_key, key)
    if isinstance(entry, Fallback):
        raise FallbackToEager(entry.reason, entry.is_error)
    return entry, slots


def _miss(state, w, opts, grad_tensors, key: CacheKey, root_key: RootKey, slots=None):
    reason = state.cache.miss_reason(root_key, key)
    if state.cache.stopped(root_key, state.cache_size_limit):    # runtime/cache.py
        state.stop_compiling(root_key, reason)                      # Note [Cache policy]
        raise FallbackToEager(
            f"this root recaptures without reuse ({state.cache.count(root_key)} graphs, "
            f"{state.cache.hits.get(root_key, 0)} hits; cache_size_limit "
            f"{state.cache_size_limit} kept at a time); last change: {reason}. Raise "
            "enable(cache_size_limit=...) or make the graph stable")
    loaded = _warm_load(state, w, opts, key)     # no trace: no trace lock, no Slots
    if loaded is not None:          # runtime/warm.py Note [Warm start]: run as a hit runs
        state.cache.put(root_key, key, loaded, state.cache_size_limit)
        state.stats.warm_loads += 1
        state.record_capture(loaded)
        return loaded, slots
    if slots is None:
        slots = slots_of(w)
    t0 = time.perf_counter()
    with background.trace_lock():   # one tracer at a time (runtime/background.py)
        entry = state.cache.get(key)    # another thread may have captured it meanwhile
        if entry is None:
            state.log_recompile(reason)
            entry = _capture(state, w, opts, list(grad_tensors), slots, key.options.leaf_observed)
            if isinstance(entry, Compiled) and entry.start_compile is not None and \
                    state.cache.dynamic.get(root_key):
                entry.compile_on_repeat = True      # Note [Compile on repeat]
            if isinstance(entry, Compiled):
                warm.prepare(state, entry, w, opts, key, _example(w, grad_tensors),
                             dynamic.walk_signature(state, key, root_key))
            state.cache.put(root_key, key, entry, state.cache_size_limit)
            state.stats.compile_seconds += time.perf_counter() - t0
            fresh = True
            if isinstance(entry, Compiled) and state.cache.storms and not state.strict:
                storm = state.cache.captured_static(root_key)
                if storm is not None:       # runtime/cache.py Note [Recapture storms]
                    state.note(f"{root_key.root_types[0]}: a static graph per backward, never reused "
                               f"({storm.why}): the next {storm.skip} backwards run eager "
                               "autograd, then compiled_bw looks again")
        else:
            fresh = False
            if isinstance(entry, Compiled):
                state.stats.cache_hits += 1
                state.cache.hit(root_key, key)
    if fresh and isinstance(entry, Compiled):
        _counted(state, entry)
    return entry, slots


def _example(w, grad_tensors) -> list:
    """The graph's inputs for this step: the defined root grads, then the saved tensors."""
    return [g for g in grad_tensors if g is not None] + list(w.saved)


def _warm_load(state, w, opts, key: CacheKey) -> Compiled | None:
    """runtime/warm.py Note [Warm start]: the graph stored under `key`, as a capture would
    have made it (Inductor: its C entry point imported at once, Note [Native first runs], and
    the whole compiled graph loaded on the job thread; the eager backend's fn meanwhile), or
    None.  The walk's saved tensors stay in C++ (w.saved is not read): the C++ hit path takes
    them."""
    data = warm.load(state, key, w, opts)
    if data is None:
        return None
    code, plan, specs = data["graph"], data["plan"], data["specs"]
    if state.backend == "inductor" and data["compiled"] is None:
        return None
    gm = None if data["eager"] is not None else warm.graph_module(code)
    owned = box_owned(w, plan)
    entry = Compiled(data["eager"] or compile_eager(gm, []), plan, gm, owned,
                     tuple(sorted({w.saved_node[k][0] for k in owned})), n_inputs=len(specs),
                     devices=frozenset(s[3] for s in specs if s[3] not in ("cpu", "meta"))
                     | streams.device_types(w.leaves.values()))
    entry.warm = (data["name"], data["blob"], specs, data.get("walk_sig"))
    entry.make_gm = lambda: warm.graph_module(code)     # runtime/warm.py Note [Lazy stored graphs]
    if state.backend == "inductor":
        try:
            entry.native = warm.native_entry(data)
        except Exception as e:  # noqa: BLE001 -- the Python path runs it meanwhile
            state.note(f"warm start: a stored compiled module did not import ({type(e).__name__}: "
                       f"{str(e).splitlines()[0][:160] if str(e) else ''})")
        # after the first run: the job thread's Inductor import (~1.4 s, mostly holding the
        # GIL) slowed a first backward running at the same time 3x (cnn: 63 -> 181 ms)
        entry.after_first_run = lambda: background.load_stored(
            entry, lambda: warm.compiled_bytes(data), specs,
            state.compiled_in_background(entry), state.cache, key)
    return entry


def _counted(state, entry: Compiled) -> None:
    """A fresh capture: counted, its opaque calls worth knowing noted, recorded."""
    state.stats.captures += 1
    for name in entry.plan.opaque_names:
        if "(" in name:         # run opaquely for a reason worth knowing
            state.note(f"opaque call: {name}")
    state.record_capture(entry)


def _record_layouts(entry: Compiled, real_layouts: dict) -> None:
    """calls/opaque.py Note [Opaque output layout]: layouts an opaque call returned that
    its graph did not promise; the next hit recaptures with them, unless they were the
    promise already (a layout that changes from step to step: no recapture storm)."""
    found = found_layouts(real_layouts, entry.plan.layout_observed)
    if not found:
        return
    merged = {**entry.layout_hints, **found}
    if merged != entry.layout_hints:
        entry.layout_found = merged


def _relayout_recapture(state, w, opts, grad_tensors, key: CacheKey, root_key: RootKey,
                        old: Compiled, slots=None):
    """The entry again, traced with the opaque outputs' layouts a run found (same key)."""
    hints, old.layout_found = old.layout_found, None
    state.cache.last[root_key] = key
    if slots is None:
        slots = slots_of(w)
    t0 = time.perf_counter()
    with background.trace_lock():
        state.log_recompile(f"an opaque call returned another layout than its graph promised "
                            f"(site, output: strides) {hints}")
        LAYOUT_HINTS.update(hints)
        try:
            entry = _capture(state, w, opts, list(grad_tensors), slots,
                             key.options.leaf_observed)
        finally:
            LAYOUT_HINTS.clear()
        state.stats.compile_seconds += time.perf_counter() - t0
    if not isinstance(entry, Compiled):
        return old, slots
    entry.layout_hints = hints
    state.cache.entries[key] = entry        # replaces it: not one more entry for the limit
    _counted(state, entry)
    return entry, slots


# Note [Compile on repeat]
# A static graph captured for a root that already has a dynamic graph (runtime/dynamic.py) is a
# shape the dynamic graph could not serve: another autograd graph at a size of 1 (trace/
# dynamic.py Note [Sizes of one]: nn.MultiheadAttention at batch 1), a size of 0, a guard that
# failed.  Such shapes are often one-offs (the last batch of an epoch, an evaluation batch), and
# a background compile of one costs a compile's CPU (seconds, against a few ms of running it on
# the eager backend) and on a small machine slows the steps it overlaps.  So its background
# compile starts at its first hit (the same key again), not after its first run; until then
# it runs on the eager backend, as every new graph's first steps do.  Graphs of a root
# without a dynamic graph (the first capture of a program, structures that alternate) start
# compiling after their first run, as before.
# A graph the worker cannot load (it calls an op defined by the user's script, or one
# registered without torch.library.custom_op: backends/compile_worker.py Note [Ops the worker
# imports]) compiles in this process, which blocks that step for the whole compile (seconds
# to half a minute for a compiled Mixtral's spliced backward), so it follows the same rule:
# it runs on the eager backend first and compiles right after its first run, or, for a root
# with a dynamic graph, after its first hit.  Before, it compiled at capture: a compiled
# Mixtral over varying lengths, whose dynamic graph then pinned the length, paid a
# foreground compile for every new length (12 s per step, 35x eager's).

def _run_first_or_hit(state, entry: Compiled, w, opts, grad_tensors: list, slots):
    """Run the entry; after its first run, start its background compile (if any): the worker
    does not slow that run down (GIL)."""
    start = entry.start_compile
    if start is None:
        after, entry.after_first_run = entry.after_first_run, None
        if after is None:
            return _run(state, entry, w, opts, grad_tensors, slots)
        try:
            return _run(state, entry, w, opts, grad_tensors, slots)
        finally:
            after()
    if entry.compile_on_repeat:     # Note [Compile on repeat]: at its first hit
        entry.compile_on_repeat = False
        return _run(state, entry, w, opts, grad_tensors, slots)
    entry.start_compile = None
    state.stats.inductor_compiles += 1
    entry.watch_strides = True      # Note [Real output strides] (runtime/real_strides.py)
    try:
        return _run(state, entry, w, opts, grad_tensors, slots)
    finally:
        entry.watch_strides = False
        real_strides.adopt(entry.graph_module(), entry.out_strides)
        entry.out_strides = None
        with current_step(Step(w, entry.plan)):     # (_compile_here: fake impls read it)
            start()


def _compile_here(state, entry: Compiled, gm):
    """start() of a graph the compile worker cannot load (ops defined outside torch): Inductor
    compiles it in this process, from its placeholders' fake values, and entry.fn becomes
    Inductor's (Note [Compile on repeat])."""
    done = state.compiled_in_background(entry, background=False)

    def start() -> None:
        example = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
        try:
            fn = state.compile_fn(gm, example)
        except Exception as e:  # noqa: BLE001 -- the eager backend's fn stays, recorded
            done(0.0, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", None)
            return
        from ..backends.inductor_artifact import native_entry
        entry.native = native_entry(fn)
        entry.fn = fn
        done(0.0, None, fn)
    return start


def _user_code_inside(w) -> bool:
    """A guess, before the trace, that the graph will hold opaque calls (hooks on interior
    nodes, custom Functions); the trace says for sure (_trace)."""
    return any(i not in w.leaves for i in w.hooks) or any(k.how == CUSTOM or k.hooked
                                                          for k in w.kinds)


def _leaves_maybe_observed(w) -> bool:
    """Without the C++ extension (leaf hooks of C++ code are invisible): a leaf hook Python
    sees, or torch.distributed in use (DDP and FSDP hook leaves from C++)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return True
    return any(v._backward_hooks or v._post_accumulate_grad_hooks for v in w.leaves.values())


def _trace(w, opts, grad_tensors, slots, observed):
    """Note [Delivery points]: trace with them when anything can observe when a leaf gets its
    grad (a hook on a leaf, user code inside the graph); else leaf grads are graph outputs."""
    delivers = opts.accumulate and (bool(observed) or _user_code_inside(w))
    gm, plan = trace_backward(w, opts, grad_tensors, slots, delivers=delivers)
    if opts.accumulate and not delivers and (
            any(s.kind != "node" for s in plan.opaque_sites)
            or any(r in n for n in plan.opaque_names for r in MAY_RAISE)):
        # user code runs inside after all (not only untraceable nodes), or a node that may
        # well raise (trace.py Note [Built-in formulas fake tensors reject], graph/nodes.py Note
        # [Checks fake tensors skip])
        delivers = True
        gm, plan = trace_backward(w, opts, grad_tensors, slots, delivers=True)
    if observed is None and (delivers or _leaves_maybe_observed(w)):
        raise TraceFailed("leaf grads must be delivered where eager delivers them (hooks or "
                          "user code observe them), which needs compiled_bw's C++ extension; "
                          f"it is unavailable ({fastwalk.counters()['error']}); "
                          "see `python -m compiled_bw.build`", eager_error=False)
    return gm, plan


def _capture(state, w, opts, grad_tensors, slots, observed=False):
    try:
        gm, plan = _trace(w, opts, grad_tensors, slots, observed)
    except TraceFailed as e:
        return Fallback(f"capture: {str(e).splitlines()[0]}", is_error=e.eager_error)
    if not opts.accumulate and not opts.allow_unused and None in plan.capture_outputs:
        return Fallback("an input of grad() is unused (eager raises)", is_error=True)
    for i, _ in plan.leaf_outputs:
        if not w.leaves[i].requires_grad:
            return Fallback(f"leaf {i} has requires_grad=False (set after the forward)")
    for why in sorted(w.feature_notes):    # a feature off on this torch release
        state.note(why)
    if opts.create_graph:                   # Note [create_graph]
        why = not_differentiable(gm, plan, w.kinds)
        if why is not None:
            return Fallback(f"create_graph=True: {why}")
    gm = run_passes(gm, opts.create_graph)
    mark_stealing(gm, plan.opaque_sites)
    example = _example(w, grad_tensors)
    if plan.in_layouts is not None:
        example = flatten(example)
    owned = box_owned(w, plan)
    box_nodes = tuple(sorted({w.saved_node[k][0] for k in owned}))
    devices = streams.device_types([*example, *w.leaves.values()])
    if opts.create_graph:
        if state.backend != "eager":
            state.note("create_graph=True: the graph runs its aten ops on the eager backend, "
                       "recording their history (trace/differentiable.py Note [create_graph])")
        return Compiled(compile_eager(gm, example), plan, gm, owned, box_nodes,
                        n_inputs=len(example), devices=devices)
    foreign = foreign_ops(gm) if state.background else ()
    if foreign:     # compiled here: the worker has not loaded these ops
        state.note(f"compiled in this process (not in the background): the graph calls "
                   f"{', '.join(foreign[:3])}, defined outside torch")
    if state.background:    # Note [Background compile]
        entry = Compiled(compile_eager(gm, example), plan, gm, owned, box_nodes,
                         n_inputs=len(example), devices=devices)
        if foreign:         # Note [Compile on repeat]: here, after a run on the eager backend
            entry.start_compile = _compile_here(state, entry, gm)
            return entry
        background.start_worker()
        entry.start_compile = background.prepare(entry, gm, plan.opaque_sites,
                                                 state.compiled_in_background(entry))
        return entry
    if state.backend == "inductor":
        state.stats.inductor_compiles += 1
    with current_step(Step(w, plan)):   # backends may re-run fake impls
        try:
            fn = state.compile_fn(gm, example)
        except Exception as e:      # as a failed background compile: the eager backend
            if state.backend != "inductor":
                raise
            error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            state.compile_failed(f"Inductor failed to compile this graph, it runs on the eager "
                                 f"backend: {error}"
                                 + repro.after_compile_failure(gm, state.backend, error))
            fn = compile_eager(gm, example)
    native = None
    if state.backend == "inductor":     # (Inductor is imported: it just compiled)
        from ..backends.inductor_artifact import native_entry
        native = native_entry(fn)
    return Compiled(fn, plan, gm, owned, box_nodes, native=native, n_inputs=len(example),
                    devices=devices)


# Note [Stealing at delivery points]
# Eager's AccumulateGrad takes the incoming grad itself as `.grad` (no copy) when nothing else
# references it (accumulate_grad.h; `x.grad.data_ptr()` is then the buffer a custom backward
# made).  At a delivery point the graph still holds the grad, so AccumulateGrad would copy.
# Where the grad is a buffer the graph computed and reads nowhere else (calls/deliver.py
# owned_grad: an aten op's fresh result, or views of one, each used once), the node gets a
# fresh alias of it (the call's `owned`, set here and again by the Inductor lowering on the
# graph it compiles, after Inductor's own passes): no user code can hold it, Inductor never
# reuses it or writes into it again (backends/inductor.py Note [Inductor: opaque buffers];
# its lowering keeps the copy where Inductor made the value a graph input, e.g. `x * 1`
# simplified to `x`), and no later graph read can see what a hook does to `.grad` -- as
# eager, which steals the formula's result.  That saves the copy and its memory, and `.grad` gets eager's strides.
# Where the delivered grad is an opaque call's output (a custom backward's or hook's result --
# the only buffers user code can know) that nothing else in the graph uses (mark_stealing, per
# site, after the passes), and user code kept no reference to it when the call returned
# (calls/opaque.py counts references; Step.stealable), the node gets a fresh alias of it
# (native.run_leaf(steal=True)), which it takes or copies by eager's own rules.  The graph
# never touches that buffer again: no other user, and Inductor never reuses a buffer an opaque
# call returned (backends/inductor.py Note [Inductor: opaque buffers]).  Not covered (copied, docs/semantics.md): one tensor
# returned for two inputs (eager gives it to one of them), a grad passed through unchanged
# (opaque calls clone those), and grads computed from opaque outputs in the graph.


def mark_stealing(gm, sites: list) -> None:
    import operator

    from ..calls.deliver import deliver, owned_grad
    from ..calls.opaque import opaque
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is opaque:          # calls/opaque.py Note [One grad for several leaves]
            s = sites[n.args[0]]
            delivered: list | None = []
            s.feeds_delivery = False
            for u in n.users:
                d = next(iter(u.users)) if len(u.users) == 1 else None
                to_leaf = u.target is operator.getitem and d is not None and \
                    d.target is deliver
                s.feeds_delivery = s.feeds_delivery or to_leaf
                if not to_leaf:
                    delivered = None
                elif delivered is not None:
                    delivered.append((order[d], u.args[1]))
            s.free_inputs = frozenset(
                i for i, g in enumerate(n.args[1]) if isinstance(g, torch.fx.Node)
                and g.op != "placeholder" and len(g.users) == 1) \
                if s.kind == "custom" and s.feeds_delivery else frozenset()
            s.deliver_order = None if not delivered else tuple(p for _, p in sorted(delivered))
            s.used_outputs = frozenset(u.args[1] for u in n.users
                                       if u.target is operator.getitem and u.users)
            continue
        if n.target is not deliver:
            continue
        g = n.args[1]
        sites[n.args[0]].steal = (
            isinstance(g, torch.fx.Node) and g.op == "call_function"
            and g.target is operator.getitem and isinstance(g.args[0], torch.fx.Node)
            and g.args[0].target is opaque and len(g.users) == 1)
        if owned_grad(g):
            n.args = (*n.args[:3], True)
            changed = True
    if changed:
        gm.recompile()


def _run(state, entry: Compiled, w, opts, grad_tensors, slots):
    plan = entry.plan
    if entry.devices:                   # Note [Streams] (runtime/streams.py)
        streams.check(w, entry.devices, FallbackToEager)
    versions = None
    if plan.mutated_inputs:             # graph/mutated.py Note [Graph inputs the backward
        versions = _mutated_versions(plan, grad_tensors, w.saved)   # mutates]
    consume_saved(w, plan)              # Note [Selective recomputation] (checkpoint/recompute.py)
    if entry.native is not None and slots is None and versions is None:
        result = _run_native(state, entry, w, opts, grad_tensors)
        if result is not False:
            return result
    box = [g for g in grad_tensors if g is not None]
    w.take_saved(box)
    checks = _versions_to_check(plan, box) if plan.version_checks else None
    if plan.in_layouts is not None:   # Note [Subclasses stay outside the graph]
        box = flatten(box)
    del grad_tensors
    if not opts.retain_graph:           # Note [Box ownership]
        if slots is not None:
            slots.release_positions(entry.box_owned)
            release_regions(w, plan)    # Note [Traced recomputation] (checkpoint/recompute.py)
        elif entry.box_owned:
            # cache hit without Slots (C++ walk): the nodes themselves drop the saved tensors
            # the graph computes with (what eager does after each node, done before the run).
            w.release_nodes(entry.box_nodes)
    # Note [Direct delivery]; backward(create_graph=True) goes through the engine, whose
    # AccumulateGrad runs with grad mode on and which warns as eager's does (Note [create_graph])
    if not plan.opaque_sites and not (opts.create_graph and opts.accumulate):
        result = _run_direct(state, entry, w, opts, box)
    else:
        if state.cudagraphs and entry.devices:
            cudagraphs.skip(entry, state)
        result = _run_in_engine(state, entry, w, opts, box, checks)
    if versions is not None:
        torch_autograd.set_version_counters(*versions)
    if not opts.retain_graph:
        if slots is not None:
            slots.release(plan.executed, len(w.nodes))
        w.release_nodes(plan.executed)  # what eager's engine does after each node
    return None if opts.accumulate else tuple(result)


def _mutated_versions(plan, grad_tensors, saved) -> tuple:
    """graph/mutated.py Note [Graph inputs the backward mutates]: (the inputs the graph
    writes to, the versions eager leaves on them); raises FallbackToEager, before anything
    ran, when another input shares storage with one of them, or two of them share one."""
    box = [g for g in grad_tensors if g is not None] + list(saved)
    ts, vs = [], []
    for p, bumps in plan.mutated_inputs:
        t = box[p]
        ts.append(t)
        vs.append(t._version + bumps)
    ptrs = [t.untyped_storage().data_ptr() for t in ts if t.numel()]
    mine = set(ptrs)
    shared = len(mine) != len(ptrs)     # two written inputs, one storage
    if not shared:
        written = {p for p, _ in plan.mutated_inputs}
        shared = any(k not in written and isinstance(box[k], torch.Tensor) and box[k].numel()
                     and box[k].untyped_storage().data_ptr() in mine for k in plan.read_inputs)
    if shared:
        raise FallbackToEager(
            "the backward writes into a tensor it reads (an AOT backward mutating a forward "
            "input, a custom backward an input, a checkpointed recomputation a buffer) that "
            "another node saved too, or another region writes too: eager checks that "
            "node's saved version when it runs, and the compiled graph assumes its inputs "
            "do not share memory (graph/mutated.py Note [Graph inputs the backward "
            "mutates])")
    return tuple(ts), tuple(vs)


def _run_native(state, entry: Compiled, w, opts, grad_tensors):
    """Note [C++ hit path]: what _run returns (backward(): None, grad(): the grads), or False
    if it does not apply (no grad delivered, no graph run: at most the nodes released their
    box-owned saved tensors, which the Python path does too)."""
    plan = entry.plan
    if plan.opaque_sites or plan.in_layouts is not None or plan.out_layouts is not None:
        return False
    if not opts.retain_graph and entry.box_owned:
        w.release_nodes(entry.box_nodes)     # Note [Box ownership]
    was_running = _nesting()
    THREAD.nesting = was_running + 1
    try:
        roots = [g for g in grad_tensors if g is not None]
        if opts.accumulate:
            ran = w.run_native(entry.native, roots, entry.n_inputs, plan.leaf_nodes,
                               plan.leaf_positions, True, list(entry.native_tail))
        else:
            ran = w.run_native(entry.native, roots, entry.n_inputs, (), plan.capture_outputs,
                               False, list(entry.native_tail))
    finally:
        THREAD.nesting = was_running
    if ran is False:
        return False
    state.stats.native_runs += 1
    if not opts.retain_graph:
        w.release_nodes(plan.executed)
    return None if opts.accumulate else tuple(ran)


def _run_direct(state, entry: Compiled, w, opts, box: list):
    """No user code runs inside the graph: call it without the engine.  Leaf grads go to the
    AccumulateGrad nodes directly when none has a hook, else through the engine (_Deliver).
    enable(cudagraphs=True): CUDA graphs replay it (runtime/cudagraphs.py).  A grad() with
    create_graph=True runs it with grad mode on (trace/differentiable.py Note [create_graph]),
    never replayed (a replay records no history)."""
    plan = entry.plan
    prev = torch.is_grad_enabled()
    torch_autograd.set_grad_enabled(opts.create_graph)   # as the engine runs nodes
    was_running = _nesting()
    THREAD.nesting = was_running + 1
    try:
        if state.cudagraphs and entry.devices and not opts.create_graph:
            outs = cudagraphs.run(entry, box, state)
        else:
            outs = entry.fn(box)
    finally:
        THREAD.nesting = was_running
        torch_autograd.set_grad_enabled(prev)
    if entry.watch_strides:
        entry.out_strides = real_strides.strides_of(outs)
    grads = _pick_outputs(plan, outs, opts.accumulate)
    del outs                            # grads holds the only references: AccumulateGrad steals
    if not opts.accumulate:
        return grads
    if w.accumulate(plan.leaf_nodes, grads):
        return None
    def hand_over() -> list:            # no reference left here: AccumulateGrad steals
        out = grads.copy()
        grads.clear()
        return out
    _deliver(hand_over, [w.leaves[i] for i in plan.leaf_nodes], opts)
    return None


def _pick_outputs(plan, outs, accumulate: bool, step=None) -> list:
    """The graph's outputs that the caller gets: one grad per delivered leaf (accumulate), else
    one per grad() input; subclasses rebuilt (Note [Subclasses stay outside the graph]); None
    where eager's grad is undefined (graph/defined.py Note [Undefined grads])."""
    if plan.out_layouts is not None:
        outs = rebuild(plan.out_layouts, outs)
    positions = plan.leaf_positions if accumulate else plan.capture_outputs
    if step is not None and step.undefined and plan.out_defined is not None:
        forms = plan.out_defined
        return [None if p is None or not evaluate(forms[p], step.undefined, step.memo)
                else outs[p] for p in positions]
    return [None if p is None else outs[p] for p in positions]


def _deliver(run, leaves: list, opts) -> None:
    """Run `run` (-> one grad per leaf) inside the real engine, which then runs each leaf's
    AccumulateGrad with it (Note [Delivery through the real engine]).

    The task's keep_graph is the user's retain_graph (`_get_current_graph_task_keep_graph()`).
    Its exec_info stays empty: built-in nodes run opaquely compute only the outputs their task
    says are needed (`task_should_compute_output`), and the user's nodes are not in this task's
    graph.  What eager's non-empty exec_info of grad() / backward(inputs=...) shows user code,
    `_is_checkpoint_valid()` (reentrant checkpoint checks it), engine_state answers."""
    was_running = _nesting()
    THREAD.nesting = was_running + 1
    try:
        with torch.enable_grad():
            out = _raw_apply(_Deliver, _ANCHOR, run, *leaves)   # not recorded (custom.py)
        # backward() only: eager's engine warns (once) about create_graph=True with
        # accumulate_grad, which grad() does not pass; a grad() task captures the anchor
        acc = opts.accumulate or not opts.create_graph
        with engine_state.task(bool(opts.inputs)):
            _ENGINE.run_backward((out,), (torch.empty(0),), opts.retain_graph,
                                 opts.create_graph, () if acc else (_ANCHOR,), True, acc)
    finally:
        THREAD.nesting = was_running


def _versions_to_check(plan, box: list) -> dict:
    """trace/trace.py Note [Saved tensors modified during the backward]: per site, the saved
    tensors it checks, with their versions now (the walk checked them against the saved ones;
    no user code ran since)."""
    off = sum(plan.root_defined)
    checks = fastwalk.version_checks(box, off, plan.version_checks)
    if checks is not None:      # graph/saved.py Note [Version checks in C++]
        return checks
    return {site: [(box[off + k], box[off + k]._version, packed) for k, packed in ks]
            for site, ks in plan.version_checks}


def _run_in_engine(state, entry: Compiled, w, opts, box: list, checks: dict | None = None):
    plan = entry.plan
    result: list = []
    step = Step(w, plan, opts)
    step.checks = checks

    def run():
        step.tls = dispatch_tls.Restorer(dispatch_tls.snapshot())
        with current_step(step, running=True):
            outs = entry.fn(box)
        if entry.watch_strides:
            entry.out_strides = real_strides.strides_of(outs)
        picked = _pick_outputs(plan, outs, opts.accumulate, step)
        if step.real_layouts:
            _record_layouts(entry, step.real_layouts)
        if step.eager_after:
            entry.eager_after = step.eager_after
        if opts.accumulate:
            return picked
        if plan.relayout and step.real_layouts:
            relayout(plan.relayout, picked, step.real_layouts)
        result.extend(picked)
        return []

    leaves = [w.leaves[i] for i in plan.leaf_nodes] if opts.accumulate else []
    try:
        _deliver(run, leaves, opts)
    finally:
        for note in step.notes:
            state.note(note)
    return result
