"""Trace: our engine, run once per signature under make_fx(tracing_mode="fake").

Consumes a Walk and the call options; produces an FX GraphModule of aten ops (plus
`compiled_bw::opaque` calls) and a Plan saying what its inputs and outputs mean.  The
engine follows torch/csrc/autograd/engine.cpp as specified in shared/ENGINE.md:
dependency counting (1.2), ready-queue order with libstdc++ tie breaking (1.5), input
buffers summed in arrival order (2), validate_outputs (3), pruning for `inputs=` (1.6).
Graph inputs: the defined root grads, then every saved tensor, in walk order, each tensor
subclass among them flattened into its inner tensors; subclass outputs are flattened too
(Note [Subclasses stay outside the graph] in subclass.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import traceback
from typing import NamedTuple

import torch
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.fx.experimental.symbolic_shapes import (
    GuardOnDataDependentSymNode,
    free_unbacked_symbols,
)

from ..calls.deliver import deliver
from ..calls.opaque import (
    OpaqueSite,
    as_list,
    observed_layouts,
    opaque,
    register_site,
    view_chains,
)
from ..calls.opaque import label as opaque_label
from ..checkpoint import recompute
from ..core import fake_work
from ..core.dispatch_tls import kept as kept_dispatch_state
from ..core.thread import THREAD, current_step
from ..graph import custom, defined
from ..graph.aot import SpliceFailed, aot_plan, trace_aot
from ..graph.distinct import one_object_per_input
from ..graph.heap import StdHeap
from ..graph.mutated import mutated_inputs, read_inputs
from ..graph.nodes import AOT, CUSTOM, EAGER_LAYOUT, LEAF, SKIPPED_CHECKS, TRACE, TRACE_CUSTOM
from ..graph.saved import sequence_nr
from ..graph.subclass import Layout, SubclassUnsupported, flatten, layouts_of, rebuild
from ..graph.validate import validate_outputs
from ..torchapi.dynamo import (
    FakeTensor,
    SqueezesDecided,
    fake_tensor,
    pool_sizes_without_parity_guards,
)
from ..walk import fastwalk
from . import unpack_probes
from .dynamic import (
    RELEASE_META,
    NotDynamic,
    grad_mode_branch,
    learn_branches,
    own_formula,
    plain_branch,
)
from .holders import Holders, dense

# the node of an in-place write into a view, run as an opaque call of the real node
COPY_SLICES = "CopySlices"

# Failures of fake tensors on a node's formula: that node becomes an opaque call instead.
_FAKE_FAILURES = (
    fake_tensor.DataDependentOutputException,
    fake_tensor.DynamicOutputShapeException,
    fake_tensor.UnsupportedOperatorException,
    GuardOnDataDependentSymNode,
)


# The opaque-call reason of a node whose formula raised (Note [Built-in formulas fake tensors
# reject]); runtime/run.py reads it in the plan's opaque names.
REJECTED = "opaque: its formula raised on fake tensors"
# ... of a node whose traced formula would skip a check eager makes (graph/nodes.py Note [Checks
# fake tensors skip]); both may raise eager's error, so the graph delivers leaf grads in it
SKIPS_CHECK = "opaque: traced, its formula would skip"
MAY_RAISE = (REJECTED, SKIPS_CHECK)

# Note [Built-in formulas fake tensors reject]
# A built-in node's formula that raises on fake tensors runs as the real node, opaquely,
# instead of failing the whole capture: a formula that reads tensor data
# (PackPaddedSequenceBackward0 reads its batch sizes; fake tensors have none), or one whose
# meta kernel rejects what the CPU kernel accepts (GroupedMmBackward0: `_grouped_mm`'s meta
# demands bf16, the CPU kernel takes float32, as in Hugging Face's MoE experts: where we have
# a copy of its formula, that copy is traced instead, dynamic.py own_formula and graph/fake_ops.py
# Note [Grouped mm on fake tensors]).  The real node at run time computes what eager computes, or raises eager's error at eager's point:
# such a node may well raise (a derivative "not implemented"), so the graph delivers leaf
# grads where eager does (runtime/run.py Note [Delivery points]), and a backward failing there
# leaves exactly the `.grad`s eager leaves.
# Not for a hooked node's unpack calls (one already placed would run twice:
# Tracer.unpack_calls fails the trace instead), and not for custom backwards traced by opt-in
# (a user's backward that raises on fake tensors fails the capture, as before).


class TraceFailed(Exception):
    """The trace met something eager would reject (eager_error) or we cannot express."""

    def __init__(self, reason: str, eager_error: bool = True) -> None:
        super().__init__(reason)
        self.eager_error = eager_error


@dataclasses.dataclass
class Options:
    accumulate: bool                 # backward() (True) or grad() (False)
    retain_graph: bool
    inputs: tuple                    # per input: (node index | -1, input_nr)
    allow_unused: bool
    create_graph: bool = False       # results carry history (trace/differentiable.py Note [create_graph])


@dataclasses.dataclass
class Plan:
    root_defined: tuple              # per root grad: passed as a graph input?
    leaf_outputs: tuple              # (leaf node index, output position | None), to deliver
    capture_outputs: tuple           # per grad() input: output position | None
    executed: tuple                  # node indices run (apply), in eager's order
    will_execute: tuple              # node indices run or captured (_will_engine_execute_node)
    opaque_sites: tuple              # OpaqueSite per `compiled_bw::opaque` call in the graph
    opaque_names: tuple              # node class names run opaquely
    in_layouts: tuple | None = None  # per graph input tensor: None or its subclass Layout
    out_layouts: tuple | None = None  # per output: None or the Layout to rebuild it with
    out_defined: tuple | None = None  # per output: its defined.py formula; None: all defined
    delivers: bool = False           # leaf grads delivered inside (Note [Delivery points])
    relayout: tuple = ()             # grad() results to put in eager's layout: opaque.view_chains
    layout_observed: frozenset = frozenset()  # opaque outputs whose layout user code sees
    version_checks: tuple = ()       # (site, ((saved position, traced reader | None), ...)):
    #                                  Note [Saved tensors modified during the backward]
    auto_traced: tuple = ()          # custom Functions traced without opt-in (custom.py Note)
    mutated_inputs: tuple = ()       # (graph input position, eager's version bumps): Note
    #                                  [Graph inputs the backward mutates] (mutated.py)
    read_inputs: frozenset = frozenset()  # with mutated_inputs: the input positions it uses

    # leaf_outputs split, for every step's delivery (runtime/run.py): computed once per plan
    @functools.cached_property
    def leaf_nodes(self) -> list:
        return [i for i, _ in self.leaf_outputs]

    @functools.cached_property
    def leaf_positions(self) -> tuple:
        return tuple(p for _, p in self.leaf_outputs)


# Note [Saved tensors modified during the backward]
# Eager checks a saved tensor's version when its node unpacks it, i.e. when the node runs
# (SavedVariable::unpack): user code that runs earlier in the same backward -- a hook, an unpack
# hook, a custom backward, a post-accumulate-grad hook -- and modifies it in place makes that
# node raise "modified by an inplace operation".  The walk unpacks every saved tensor before
# the graph runs, and a traced formula reads its saved tensors as graph inputs, so that check
# alone would miss such changes and compute with the modified values.  Only our calls run user
# code inside the graph (opaque calls and delivery points), so each traced node's saved tensors
# are re-checked by the last call placed before the node in eager's order, right after it ran:
# every change made before the node is then seen, and nothing observable lies between that call
# and the node, so eager's error (saved.modified_message) is raised at eager's point.  Kernels
# Inductor runs ahead of the call (backends/inductor.py Note [Inductor: call order]) read the
# unmodified values only in a backward that then raises.  Not checked, as in eager: the
# no-version-check tensors of AOT backwards.  Tensors packed by traceable saved-tensor hooks and
# the inputs of traced checkpoint regions (recompute.py) are checked too: eager has no check
# there and reads them modified, but the graph may have read them before, so a modified one
# raises compiled_bw's error naming what reads it.  Nodes run opaquely unpack through their
# Slots at run time, which check.  A traced custom backward's saved tensors are checked even if
# it does not read them (eager then would not).  Cost: one version read per checked tensor per
# step, only in graphs with calls.


def needed_and_captured(w, opts):
    """Per node: whether the call runs it (eager's exec_info needed_; all without inputs);
    and node index -> [(input position, input_nr)] of grad()'s captures."""
    n = len(w.nodes)
    if not opts.inputs:
        return [True] * n, {}
    parents: list = [[] for _ in range(n)]
    for p, es in enumerate(w.edges):
        for c, _ in es:
            if c >= 0:
                parents[c].append(p)
    needed = [False] * n
    captures: dict = {}
    queue = []
    for pos, (c, nr) in enumerate(opts.inputs):
        if c < 0:
            continue
        if opts.accumulate:
            needed[c] = True
        else:
            captures.setdefault(c, []).append((pos, nr))
        queue.append(c)
    seen = set(queue)
    while queue:
        t = queue.pop()
        for p in parents[t]:
            needed[p] = True
            if p not in seen:
                seen.add(p)
                queue.append(p)
    return needed, captures


def _add(buf: list, nr: int, g, df, holders: Holders) -> None:
    if g is None:
        return
    old = buf[nr]
    if old is not None and old.dtype != g.dtype:
        # only into a leaf with grad_dtype None (validate_outputs casts everything else):
        # eager's InputBuffer adds in place into whichever buffer it may reuse
        raise TraceFailed(f"grads of dtypes {old.dtype} and {g.dtype} are summed for a leaf "
                          "whose grad_dtype is None", eager_error=False)
    holders.add(buf, nr, g, df)     # Note [Eager's in-place sums and copied leaf grads]


class TraceStep:
    """What opaque calls see while tracing: the sites registered so far; per AUTO_DYNAMO
    custom node, Dynamo's verdict (custom.py Note [Traced without opt-in])."""

    def __init__(self, verdicts: dict | None = None) -> None:
        self.sites: list = []
        self.verdicts = verdicts or {}
        self.auto_traced: list = []     # names of the Functions traced without opt-in
        self.rejected: dict = {}        # node index -> why fake tensors rejected its formula


def _dynamo_verdicts(w) -> dict:
    """Node index -> Dynamo's verdict (None: safe) for each custom node traced without opt-in
    (custom.py Note [Traced without opt-in]), asked before make_fx (Dynamo refuses to run
    inside an FX trace), from the real saved tensors and the grads' metadata."""
    verdicts = {}
    todo = [i for i, k in enumerate(w.kinds) if k.how == TRACE_CUSTOM]
    if not todo:
        return verdicts
    saved: dict = {}
    for t, (i, attr, j) in zip(w.saved, w.saved_node, strict=True):
        if attr == "tensors":
            saved[(i, j)] = t
    for i in todo:
        node = w.nodes[i]
        if custom.auto_traced(type(node)) != custom.AUTO_DYNAMO:
            continue
        n = len(node._raw_saved_tensors)
        ts = tuple(saved.get((i, j)) for j in range(n))
        metas = tuple(tuple(m[:3]) for m in w.in_meta[i])
        verdicts[i] = custom.dynamo_verdict(node, ts, metas)
    return verdicts


class EngineResult(NamedTuple):
    """What our engine's run under make_fx gives the Plan."""
    outputs: list                # graph outputs (grads), in emission order
    leaf_outputs: tuple          # (leaf node index, output position | None), to deliver
    capture_outputs: tuple       # per grad() input: output position | None
    executed: tuple              # node indices run, in eager's order
    will_execute: tuple          # node indices run or captured
    out_defined: tuple | None    # per output: its defined.py formula; None: all defined
    version_checks: tuple        # Plan.version_checks


def _run_engine(w, opts, root_grads: list, opaque_names: list, placeholders: dict,
                delivers: bool = False) -> EngineResult:
    """Runs on fake tensors under make_fx.  placeholders: saved-tensor key (node, attr, pos) ->
    graph placeholder.  delivers: each leaf's AccumulateGrad becomes a delivery point in the
    graph, here in eager's order (runtime/run.py Note [Delivery points]), rather than a graph
    output."""
    eng = _Engine(w, opts, opaque_names, placeholders, delivers)
    eng.start(root_grads)
    while len(eng.heap):
        eng.run_node(eng.heap.pop())
    return eng.result()


# Note [Sparse grads of built-in nodes run opaquely]
# Embedding's and EmbeddingBag's backward with sparse=True (and gather's with sparse_grad=True)
# return a sparse COO grad.  Traced, the fake result is sparse and what takes it is decided at
# the capture; run as an opaque call (saved-tensor hooks on it: a hooked node; or a formula
# fake tensors reject), its output would be promised dense, and a consumer the graph cannot
# hand a sparse tensor (another opaque call: a custom backward, a hook) would make that
# backward raise NotDense half-way, where eager passes the sparse grad on (PyTorch's
# test_no_grad_copy_sparse under saved-tensor hooks).  The node's own saved flag says so
# before anything runs: such a backward runs eager autograd, with this reason.  A sparse grad
# that only reached a leaf ran as eager's before too, and its graph's later backwards eager.


class _Engine:
    """engine.cpp's evaluate loop over the walk (ENGINE.md): dependency counts, input buffers,
    the ready queue; each node's grads traced (or an opaque call); the graph's outputs."""

    def __init__(self, w, opts, opaque_names: list, placeholders: dict, delivers: bool) -> None:
        self.w, self.opts, self.delivers = w, opts, delivers
        self.opaque_names, self.placeholders = opaque_names, placeholders
        n = len(w.nodes)
        self.aot_seen: list = []
        self.needed, self.captures = needed_and_captured(w, opts)
        self.captured = [False] * n
        for c in self.captures:
            self.captured[c] = True
        # ENGINE.md 1.6: the start node (one root edge: no GraphRoot) is always evaluated, but
        # when it is neither needed nor captured that means its tensor and retains_grad hooks
        # only -- no node hooks, no apply, and _will_engine_execute_node says False
        start = w.root_edges[0][0] if len(w.root_edges) == 1 else -1
        self.start_only = start if start >= 0 and not (
            self.needed[start] or self.captured[start]) else -1
        self.deps = deps = [0] * n
        for es in w.edges:
            for c, _ in es:
                if c >= 0:
                    deps[c] += 1
        self.buffers: dict = {}
        self.heap = StdHeap()
        self.seq = [sequence_nr(node) for node in w.nodes]
        # nodes with a subclass among their saved tensors: they must not run opaquely
        self.sub_saved = {key[0] for key, v in placeholders.items() if type(v) is not FakeTensor}
        self.df = defined.Tracker()      # Note [Undefined grads] (defined.py)
        # holders.py Note [Eager's in-place sums and copied leaf grads]
        self.holders = Holders(opts.create_graph)
        self.holders.hold(placeholders.values())
        self.outputs: list = []
        self.out_versions: list = []    # Note [Returned grads written in place later]
        self.leaf_outputs: list = []
        self.capture_pos: list = [None] * len(opts.inputs)
        self.executed: list = []
        self.out_defined: list = []
        # Note [Saved tensors modified during the backward]: node -> positions in w.saved
        # whose version eager checks when the node unpacks them; site -> positions to check
        # (a packed tensor of traceable hooks, graph/packed.py, or an input of a traced
        # checkpoint region, checkpoint/recompute.py, carries what reads it)
        self.checked_saved: dict = {}
        for k, (i, attr, pos) in enumerate(w.saved_node):
            if attr != "novc":              # eager does not check these (aot.py)
                reader = None
                if type(pos) is tuple:
                    reader = (f"checkpoint recomputation before {w.kinds[i].name}"
                              if attr == recompute.ATTR else
                              f"saved-tensor unpack (traceable_saved_tensors_hooks) of "
                              f"{w.kinds[i].name}")
                self.checked_saved.setdefault(i, []).append((k, reader))
        self.version_checks: dict = {}

    def start(self, root_grads: list) -> None:
        """The root grads, validated as eager does, into the first nodes' buffers."""
        w, df = self.w, self.df
        root_meta_edges = tuple(w.root_edges)
        self.holders.hold(root_grads)
        grads = validate_outputs("", root_grads, root_meta_edges, w.in_meta)
        if len(w.root_edges) == 1:
            (c, nr), = w.root_edges
            buf = self.buffers[c] = [None] * len(w.in_meta[c])
            _add(buf, nr, grads[0], df, self.holders)
            self.heap.push((0, self.seq[c]), c)
        else:
            grads = validate_outputs("GraphRoot", grads, root_meta_edges, w.in_meta)
            for c, _ in w.root_edges:
                self.deps[c] += 1
            self.send(w.root_edges, grads)

    def send(self, edges, grads) -> None:
        """ENGINE.md 1.4: every valid edge counts down; pruned nodes get nothing."""
        deps, buffers, holders = self.deps, self.buffers, self.holders
        for g in grads:                 # eager's outputs vector holds them while it sends
            holders.take(g)
        for (c, nr), g in zip(edges, grads, strict=True):
            holders.drop(g)
            if c < 0:
                continue
            deps[c] -= 1
            if not (self.needed[c] or self.captured[c] or c == self.start_only):
                continue
            b = buffers.get(c)
            if b is None:
                b = buffers[c] = [None] * len(self.w.in_meta[c])
            _add(b, nr, g, self.df, holders)
            if deps[c] == 0:
                self.heap.push((0, self.seq[c]), c)

    def emit(self, t) -> int | None:
        """t becomes a graph output; its position."""
        if t is None:
            return None
        self.holders.hold((t,))
        self.outputs.append(t)
        self.out_versions.append(t._version)
        self.out_defined.append(self.df.of(t))
        return len(self.outputs) - 1

    def run_node(self, i: int) -> None:
        """One node popped from the ready queue: captures (grad()), then the node itself."""
        w, opts, df = self.w, self.opts, self.df
        kind = w.kinds[i]
        buf = self.buffers.pop(i, None)
        if buf is None:
            buf = [None] * len(w.in_meta[i])
        for g in buf:
            self.holders.drop(g)
        h = w.hooks.get(i)
        if self.captured[i]:
            buf = self.capture(i, kind, buf, h)
        elif i == self.start_only:
            self.tensor_hooks_only(i, kind, buf, h)
        if not self.needed[i]:
            return
        self.executed.append(i)
        if kind.how == LEAF:         # its hooks run in the real engine (delivery)
            if opts.accumulate and self.delivers:
                self.holders.hold(buf)      # the real node, and its hooks, get it
                _deliver_call(i, kind.name, buf[0], df)
            elif opts.accumulate:
                g = self.holders.leaf_grad(buf[0], w.leaves[i])
                if g is not buf[0]:
                    df.set(g, df.of(buf[0]))
                self.leaf_outputs.append((i, self.emit(g)))
            return
        if h is not None and h.has_pre():
            _dense_only(f"the hooks of {kind.name}", buf)
            buf = self.hook_call(i, kind.name, "pre", buf, [])
            self.opaque_names.append(f"{kind.name} hooks")
        outs = self.apply(i, kind, buf, h)
        # nodes.py Note [Hooked saved tensors]: eager frees them right after the node (and its
        # post-hooks) ran; the last opaque call of the node does
        if h is not None and h.post:
            _dense_only(f"the post-hooks of {kind.name}", list(outs) + list(buf))
            outs = self.hook_call(i, kind.name, "post", outs, buf,
                                  kind.hooked and not opts.retain_graph)
            self.opaque_names.append(f"{kind.name} post-hooks")
        self.send(w.edges[i], outs)

    def capture(self, i: int, kind, buf: list, h) -> list:
        """grad()'s captured grads of node i (ENGINE.md 1.6); the buffer the node then runs on."""
        if self.needed[i]:           # the raw slot, before tensor hooks
            for pos, nr in self.captures[i]:
                self.capture_pos[pos] = self.emit(buf[nr])
            return buf
        buf = self.tensor_hooks_only(i, kind, buf, h)    # hooked value kept
        for pos, nr in self.captures[i]:
            self.capture_pos[pos] = self.emit(buf[nr])
        return buf

    def tensor_hooks_only(self, i: int, kind, buf: list, h) -> list:
        """A node evaluated but not run (ENGINE.md 1.6): only its tensor and retains_grad
        hooks."""
        if h is not None and (h.tensor or h.retains):
            _dense_only(f"the tensor hooks of {kind.name}", buf)
            buf = self.hook_call(i, kind.name, "pre-capture", buf, [])
        return buf

    def hook_call(self, i: int, name: str, phase: str, grads: list, extra: list,
                  release: bool = False) -> list:
        """_hook_call; the hooks may keep what they get and what they return (holders.py)."""
        self.holders.hold([*grads, *extra])
        outs = _hook_call(self.w, i, name, phase, grads, extra, self.df, release)
        self.holders.hold(outs)
        return outs

    def apply(self, i: int, kind, buf: list, h) -> list:
        """The node's grads: its traced formula, its AOT backward, or an opaque call."""
        w, node = self.w, self.w.nodes[i]
        outs = None
        if kind.how == AOT:
            outs = _aot_call(w, i, kind, node, buf, self.placeholders, len(self.aot_seen),
                             self.df)
            self.aot_seen.append(i)
        elif kind.how == TRACE_CUSTOM and i in THREAD.step.verdicts:
            why = _auto_call(w, i, kind, node, buf, self.df, self.placeholders)
            if isinstance(why, str):
                return self.opaque_node(i, kind, node, buf, h, f"opaque: {why}")
            outs = why
        elif kind.how == TRACE and kind.hooked:
            outs = self.unpack_calls(i, kind, node, buf, h)
        elif kind.how in (TRACE, TRACE_CUSTOM):
            outs = _traced_call(w, i, kind, node, buf, self.df, self.placeholders)
        if outs is None:   # custom Function, or a node fake tensors cannot run
            return self.opaque_node(i, kind, node, buf, h, THREAD.step.rejected.get(i, ""))
        if kind.how != TRACE or kind.hooked:    # not a built-in formula's own results
            self.holders.hold(outs)
        self.check_saved_after_last_call(i)
        return outs

    def unpack_calls(self, i: int, kind, node, buf: list, h) -> list:
        """unpacked.py Note [Unpack calls]: the formula traced on its unpack calls' outputs."""
        if getattr(self.w, "formulas", None):
            raise TraceFailed(f"{kind.name}: unpack calls in a dynamic graph", eager_error=False)
        with unpack_probes.Probes(self.w, i, kind, buf, self.df) as probes:
            outs = _traced_call(self.w, i, kind, node, buf, self.df, self.placeholders)
        if outs is None or not probes.sites:
            raise TraceFailed(f"{kind.name}: its formula, traced on its saved tensors' unpack "
                              "calls, cannot run on fake tensors", eager_error=False)
        if not self.opts.retain_graph and not (h is not None and h.post):
            probes.sites[-1].release = True     # eager: after the node (no user code between)
        return outs

    def check_saved_after_last_call(self, i: int) -> None:
        """Note [Saved tensors modified during the backward]: node i's saved tensors, which
        its traced formula read, are checked by the last call placed before it."""
        n_sites = len(THREAD.step.sites)
        if n_sites and i in self.checked_saved:
            self.version_checks.setdefault(n_sites - 1, []).extend(self.checked_saved[i])

    def opaque_node(self, i: int, kind, node, buf: list, h, reason: str = "") -> list:
        """The real node (custom Function, hooked or untraceable built-in) called at run time;
        `reason`: why, if not its kind's."""
        w, df = self.w, self.df
        release = kind.hooked and not self.opts.retain_graph
        site_kind = "custom" if kind.how in (CUSTOM, TRACE_CUSTOM, AOT) else (
            "hooked" if kind.hooked else "node")
        _dense_only(f"{kind.name} (run as an opaque call)", buf)
        if i in self.sub_saved or (site_kind == "custom" and custom.fwd_info(node).subclass):
            raise TraceFailed(f"{kind.name} runs as an opaque call but its forward or saved "
                              "tensors hold a tensor subclass (its grads may be subclasses); "
                              "opaque calls take dense tensors only", eager_error=False)
        if site_kind != "custom" and (getattr(node, "_saved_sparse", False) is True
                                      or getattr(node, "_saved_sparse_grad", False) is True):
            # Note [Sparse grads of built-in nodes run opaquely]
            raise TraceFailed(f"{kind.name} runs as an opaque call and returns a sparse grad "
                              "(its sparse=True); opaque calls return dense tensors",
                              eager_error=False)
        if site_kind == "custom" and h is not None and h.post and \
                any(c < 0 for c, _ in w.edges[i]):
            # eager's post-hooks see what the backward returned for an input that needs
            # no grad; an opaque call returns nothing there (its shape is unknown)
            raise TraceFailed(f"{kind.name} runs as an opaque call and has post-hooks, and "
                              "an input that needs no grad (the hooks would see its grad)",
                              eager_error=False)
        self.holders.hold(buf)          # user code may keep what it gets, and what it returns
        outs = _opaque_call(w, i, kind.name, site_kind, buf, df,
                            release and not (h is not None and h.post),
                            getattr(w, "observe", {}).get(i))
        reason = reason or kind.reason
        self.opaque_names.append(f"{kind.name} ({reason})" if reason else kind.name)
        outs = _validate(w, i, kind.name, outs, df)
        # CopySlices' grad for the base is a tensor it makes (tensor.cpp `result`), which no
        # user code sees: only the engine holds it (holders.py Note [Eager's in-place sums and
        # copied leaf grads]); its other outputs are its inner node's, which may be a custom
        # Function
        engine_only = site_kind == "node" and kind.name == COPY_SLICES and outs[0] is not None
        self.holders.hold(outs[1:] if engine_only else outs)
        return outs

    def result(self) -> EngineResult:
        if self.buffers:
            raise TraceFailed("could not compute gradients for some functions")
        n = len(self.w.nodes)
        will = tuple(k for k in range(n) if self.needed[k] or self.captured[k])
        out_defined = self.out_defined
        out_defined = None if all(f is True for f in out_defined) else tuple(out_defined)
        checks = tuple((site, tuple(ks)) for site, ks in sorted(self.version_checks.items()))
        if any(t._version != v for t, v in zip(self.outputs, self.out_versions, strict=True)):
            raise TraceFailed("a grad the graph returns (a leaf's, or grad()'s) was written in "
                              "place after its node took it (a traced custom backward's "
                              "in-place op on a grad another node also got); Note [Returned "
                              "grads written in place later]", eager_error=False)
        return EngineResult(self.outputs, tuple(self.leaf_outputs), tuple(self.capture_pos),
                            tuple(self.executed), will, out_defined, checks)


# Note [Returned grads written in place later]
# A traced custom backward may write into its grad in place (`g.mul_(2)`) where another node
# got that same tensor: AddBackward0 hands one grad to both its inputs, and one is a leaf.
# Eager's AccumulateGrad for that leaf, run before the custom node (engine order), copied the
# grad's values at that moment; our graph returns the leaf's grad at its end, when the write
# has happened.  Each returned grad's version is noted when its node takes it; one written
# after that makes the capture fail, and the backward runs eager autograd with this reason
# (found by a random-program differential with user code, 2026-11-28).

def _dense_only(what: str, grads) -> None:
    """Opaque calls (hooks, custom Functions, untraceable nodes) run user code on real tensors
    through a dense custom op: a subclass grad there would be split into its inner tensors by
    the subclass's own dispatch (the code run once per inner), and a sparse one has no storage
    or strides.  Fall back instead."""
    for g in grads:
        if g is not None and type(g) is not FakeTensor:
            raise TraceFailed(f"{what} would receive a tensor subclass ({type(g).__name__}) "
                              "grad; opaque calls take dense tensors only", eager_error=False)
        if g is not None and g.layout != torch.strided:
            raise TraceFailed(f"{what} would receive a {g.layout} grad; opaque calls take "
                              "dense (strided) tensors only", eager_error=False)


def _validate(w, i: int, name: str, outs, df) -> list:
    try:
        res = validate_outputs(name, outs, w.edges[i], w.in_meta)
    except RuntimeError as e:
        raise TraceFailed(f"validate_outputs of {name}: {e}") from None
    df.carry(list(outs), res)
    return res


def _hook_call(w, i: int, name: str, phase: str, grads: list, extra: list, df,
               release: bool = False) -> list:
    """One opaque call running node i's hooks; outputs keep the grads' metadata (4.9 checks
    that hooks do not change it).  'pre-capture' runs tensor hooks and retains_grad only."""
    specs = tuple(None if g is None else (tuple(g.shape), g.dtype, g.device) for g in grads)
    kind = "post" if phase == "post" else "pre"
    ins = list(grads) + list(extra)
    site = OpaqueSite(i, name, kind, (), specs, n_first=len(grads),
                      in_defined=tuple(df.of(g) for g in ins), release=release)
    if phase == "pre-capture":
        site.kind = "pre-capture"
    sid = register_site(site)
    return _opaque_outputs(sid, specs, opaque(sid, ins, opaque_label(site)), df)


def _opaque_outputs(sid: int, specs, res, df) -> list:
    """An opaque call's outputs: each is defined unless user code returns None for it."""
    res = iter(res)
    outs = [None if sp is None else next(res) for sp in specs]
    kept = 0
    for o in outs:
        if o is not None:
            df.set(o, defined.Any(frozenset([(sid, kept)])))
            kept += 1
    return outs


def _deliver_call(i: int, name: str, grad, df) -> None:
    """A delivery point: the real AccumulateGrad node i runs here (calls/deliver.py), with
    None for a grad that is undefined this step (defined.py)."""
    _dense_only(f"the delivery of a leaf's grad ({name})", [grad])
    site = OpaqueSite(i, name, "leaf", (), (), in_defined=(df.of(grad),))
    sid = register_site(site)
    deliver(sid, grad, opaque_label(site))


def _aot_call(w, i: int, kind, node, buf: list, placeholders: dict, k: int, df):
    """An AOT backward spliced in (graph/aot.py); None (-> opaque call) if it cannot be."""
    plan = aot_plan(type(node))
    info = custom.fwd_info(node)
    if not _materialized(df, node, info, buf):
        return None
    saved = [placeholders.get((i, "tensors", j)) for j in range(len(node._raw_saved_tensors))]
    no_vc = [placeholders.get((i, "novc", j)) for j in range(len(node._tensors_no_vc_check or ()))]
    graph = get_proxy_mode().tracer.graph
    try:
        out = trace_aot(plan, node, saved, no_vc,
                        custom.materialize(node, info, buf, _out_shapes(w, i)),
                        f"aot{k}_", graph, passthrough=_FAKE_FAILURES + (TraceFailed,),
                        symints=getattr(w, "aot_symints", {}).get(i))   # dynamic.py DynWalk
        return _validate(w, i, kind.name, custom.finish(node, info, out), df)
    except _FAKE_FAILURES:
        return None
    except SpliceFailed as e:
        raise TraceFailed(str(e), eager_error=False) from e


def _out_shapes(w, i: int) -> list | None:
    """In a dynamic walk, node i's input shapes (its forward outputs', symbolic where they
    vary): the zeros a custom node materializes for an undefined grad have this step's sizes,
    not those of the forward it was recorded from, which would fix the symbol (a no-grad KV
    cache output of a torch.compile'd model pinned the sequence length)."""
    if not getattr(w, "dynamic", False):
        return None
    return [None if m is None else m[0] for m in w.in_meta[i]]


def _materialized(df, node, info, buf: list) -> bool:
    """A traced Function sees zeros for a grad that may be undefined at run time: exact only
    where eager would materialize zeros for it too (Note [Undefined grads])."""
    if not df.variable(buf):
        return True
    ms = custom.materializes(node, info)
    return all(ms[k] for k, g in enumerate(buf) if g is not None and df.of(g) is not True)


# Note [Formulas and grad mode]
# Eager's engine runs a node with grad mode set to create_graph, and some formulas read it:
# SiluBackward0 computes `GradMode::is_enabled() ? infinitely_differentiable_silu_backward(...)
# : silu_backward(...)` (mish, and others, alike), whose second derivative exists only in the
# first form.  So a create_graph=True trace runs the formulas with grad mode on, and records
# the ops eager would run there (trace/differentiable.py Note [create_graph]).
_FORMULA_GRAD_MODE = [False]


def _traced_call(w, i: int, kind, node, buf: list, df, placeholders: dict):
    """The node's formula traced into the graph, validated; None if fake tensors cannot run
    it or its output shapes depend on data (then it becomes an opaque call)."""
    name = kind.name
    if kind.how == TRACE_CUSTOM and not _materialized(df, node, custom.fwd_info(node), buf):
        return None
    skipped = SKIPPED_CHECKS.get(name)
    if skipped is not None and kind.how == TRACE:
        check = skipped(w.in_meta[i], buf)
        if check:       # Note [Checks fake tensors skip]
            THREAD.step.rejected[i] = f"{SKIPS_CHECK} {check}"
            return None
    formula = getattr(w, "formulas", {}).get(i)     # dynamic.py DynWalk
    if formula is None and kind.how == TRACE:
        if name in RELEASE_META and RELEASE_META[name]():
            THREAD.step.rejected[i] = ("opaque: on this torch release a meta kernel its formula "
                                       "calls lays out its result otherwise than the kernel")
            return None
        plain = plain_branch(w, i, buf)     # dynamic.py Note [Formulas of the plain-tensor branch]
        if plain is not None or grad_mode_branch(name, _FORMULA_GRAD_MODE[0]):
            return _plain_branch_call(w, i, name, plain, buf, df, placeholders)
    try:
        if formula is not None:
            if df.variable(buf):
                raise NotDynamic(f"node {i} {name}: a grad that may be undefined")
            outs = formula(buf, placeholders)
        else:
            # Note [Formulas and grad mode]
            with torch.set_grad_enabled(_FORMULA_GRAD_MODE[0]):
                outs = custom.call_traced_backward(node, buf, _out_shapes(w, i)) \
                    if kind.how == TRACE_CUSTOM else node(*buf)
            if outs is None:        # it wrote its ctx: an opaque call (custom.py Note)
                return None
        outs = as_list(outs)
        dynamic = getattr(w, "dynamic", False)
        for o in outs:
            if o is not None and (free_unbacked_symbols(o) if dynamic else any(
                    isinstance(d, torch.SymInt) for d in o.shape)):
                return None
        if kind.how == TRACE and formula is None and name in EAGER_LAYOUT:
            outs = _in_eager_layout(w, i, EAGER_LAYOUT[name], outs, dynamic)
            if outs is None:
                return None
        if kind.how == TRACE and df.variable(buf):
            try:
                defined.node_outputs(df, lambda gs: as_list(node(*gs)), buf, outs, name)
            except defined.NotRepresentable as e:
                raise TraceFailed(f"which grads of {name} are undefined: {e}",
                                  eager_error=False) from None
        return _validate(w, i, name, outs, df)
    except _FAKE_FAILURES as e:
        traceback.clear_frames(e.__traceback__)    # Note [Dispatch state after a failed trace]
        return None
    except RuntimeError as e:
        # Note [Built-in formulas fake tensors reject]; not in a symbolic trace, where such an
        # error is a size-oblivious check failing (runtime/dynamic.py traces again)
        if kind.how == TRACE and formula is None and not getattr(w, "dynamic", False):
            THREAD.step.rejected[i] = f"{REJECTED}: {type(e).__name__}: {str(e)[:200]}"
            # the failed op's frames may hold torch's dispatch-key guards: freed here, inside
            # the trace, not whenever a log record holding them dies (Note [Dispatch state
            # after a failed trace])
            traceback.clear_frames(e.__traceback__)
            return _own_formula(w, i, name, buf, df, placeholders)
        raise


def _in_eager_layout(w, i: int, layouts: dict, outs: list, dynamic: bool):
    """Node i's traced grads, each of `layouts` copied into the layout of `empty_like` of the
    saved tensor it names (graph/nodes.py Note [Grads in the layout of a saved input]); None
    (the real node, run opaquely) where a symbolic graph would need it."""
    outs = list(outs)
    for k, attr in layouts.items():
        g = outs[k] if k < len(outs) else None
        saved = next((t for t, (n, a, _) in zip(w.saved, w.saved_node, strict=True)
                      if n == i and a == attr), None)
        if g is None or saved is None:
            continue
        like = torch.empty_like(torch.empty_strided(saved.shape, saved.stride(), device="meta"))
        if tuple(g.shape) != tuple(like.shape) or g.stride() == like.stride():
            continue
        if dynamic:
            return None
        outs[k] = torch.empty_strided(like.shape, like.stride(), dtype=g.dtype,
                                      device=g.device).copy_(g)
    return outs


def _plain_branch_call(w, i: int, name: str, plain, buf: list, df, placeholders: dict):
    """Node i's grads by our copy of eager's branch of its formula (plain: None for a node of
    dynamic.py GRAD_MODE_BRANCH); None (the real node, run opaquely) where no copy applies: a
    create_graph=True trace (a copy records no history), a grad that may be undefined, a
    complex grad."""
    why = "create_graph=True" if _FORMULA_GRAD_MODE[0] else (
        "a grad that may be undefined" if df.variable(buf) else
        "on this torch release" if plain is None else "")
    if not why:
        try:
            return _validate(w, i, name, as_list(plain(buf, placeholders)), df)
        except NotDynamic as e:
            why = str(e)
    THREAD.step.rejected[i] = f"opaque: eager's branch of its formula, not traced ({why})"
    return None


def _own_formula(w, i: int, name: str, buf: list, df, placeholders: dict):
    """Node i's grads by our copy of its formula, whose real one fake tensors reject
    (dynamic.py own_formula, graph/fake_ops.py Note [Grouped mm on fake tensors]); None: it runs opaquely."""
    own = own_formula(w, i)
    if own is None or df.variable(buf):
        return None
    try:
        outs = as_list(own(buf, placeholders))
    except NotDynamic as e:
        THREAD.step.rejected[i] += f"; our copy of its formula: {e}"
        return None
    del THREAD.step.rejected[i]
    return _validate(w, i, name, outs, df)


def _auto_call(w, i: int, kind, node, buf: list, df, placeholders: dict):
    """A Function traced without opt-in (custom.py Note [Traced without opt-in]): its traced
    grads, or why it runs as an opaque call instead (Dynamo's verdict, grads that may be
    undefined where Dynamo saw tensors, or our trace of its backward raising: the opaque call
    then raises what eager raises)."""
    why = THREAD.step.verdicts[i]
    if why is not None:
        return why
    info = custom.fwd_info(node)
    ms = custom.materializes(node, info)
    if any(df.of(g) is not True and not ms[k] and info.out_info[k] is not None
           for k, g in enumerate(buf)):
        return "a grad may be undefined (set_materialize_grads(False)); Dynamo saw tensors"
    try:
        outs = _traced_call(w, i, kind, node, buf, df, placeholders)
    except TraceFailed:
        raise
    except Exception as e:  # noqa: BLE001 -- the user's backward on fake tensors
        return f"tracing its backward raised {type(e).__name__}: {e}"
    if outs is None:
        return "its backward wrote its ctx, or fake tensors cannot run it"
    THREAD.step.auto_traced.append(kind.name)
    return outs


def _known_strides(node, name: str, specs: list) -> dict:
    """calls/opaque.py Note [Opaque output layout]: the outputs whose real strides are known
    before the call, {output index: strides}: a CopySlices node's grad for its base, which
    eager makes with the base's strides (a dense base only)."""
    if name != COPY_SLICES or not specs or specs[0] is None:
        return {}
    base = fastwalk.copy_slices_base(node)
    if base is None or tuple(base[0]) != tuple(specs[0][0]) or not dense(*base):
        return {}
    return {0: tuple(base[1])}


def _opaque_call(w, i: int, name: str, site_kind: str, buf: list, df,
                 release: bool = False, observe: tuple | None = None) -> list:
    specs = []
    for c, nr in w.edges[i]:
        if c < 0:
            specs.append(None)
        else:
            meta = w.in_meta[c][nr]
            shape, dtype, device = meta[:3]
            if len(meta) > 3:        # a leaf's grad_dtype (saved.input_meta)
                dtype = meta[3]
                if dtype is None:
                    raise TraceFailed(f"{name} runs as an opaque call and its grad flows into "
                                      "a leaf whose grad_dtype is None (the grad's dtype is "
                                      "known only when it runs)", eager_error=False)
            specs.append((tuple(shape), dtype, device))
    site = OpaqueSite(i, name, site_kind, w.edges[i], tuple(specs),
                      in_defined=tuple(df.of(g) for g in buf), release=release,
                      observe=observe,
                      out_meta=tuple(None if c < 0 else w.in_meta[c][nr] for c, nr in w.edges[i]),
                      known_strides=_known_strides(w.nodes[i], name, specs))
    sid = register_site(site)
    return _opaque_outputs(sid, specs, opaque(sid, list(buf), opaque_label(site)), df)


def _check_no_trace_time_values(gm) -> None:
    """Every graph output must be computed by the graph, and no tensor made at trace time may be
    baked in: a fake tensor (or a subclass wrapping one) in the graph would be returned as a
    gradient.  (Subclass outputs never reach the graph: their inner tensors do, see
    Note [Subclasses stay outside the graph].)"""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            val = getattr(gm, node.target, None)
            if isinstance(val, torch.Tensor) and (
                    isinstance(val, fake_tensor.FakeTensor) or type(val) is not torch.Tensor):
                raise TraceFailed(f"the trace baked in a {type(val).__name__} made at trace time",
                                  eager_error=False)
        if node.op == "output":
            for a in torch.fx.node.map_arg(node.args[0], lambda n: n) or ():
                if not isinstance(a, torch.fx.Node):
                    raise TraceFailed(f"a graph output is a trace-time constant ({type(a).__name__})",
                                      eager_error=False)


def _name_inputs(gm, w, n_roots: int, in_layouts, n_ints: int = 0) -> None:
    """Readable placeholder names: grad_root0, saved_mm2_self (node index 2, attr `self`); the
    inner tensors of a subclass get its name plus their path (saved_mul1_self_a)."""
    names = [f"grad_root{k}" for k in range(n_roots)]
    for i, attr, pos in w.saved_node:
        op = w.kinds[i].name.removesuffix("Backward0").lower()
        if attr == recompute.ATTR:      # a checkpoint region's input (recompute.py)
            names.append(f"{recompute.INPUT_PREFIX}{pos[0]}_{pos[2].replace('.', '_')}")
            continue
        if type(pos) is tuple:      # tensor j of a traceable hook's packed object (packed.py)
            pos = f"{pos[0]}_packed{pos[1]}" if pos[0] >= 0 else f"packed{pos[1]}"
        names.append(f"saved_{op}{i}_{attr}" + (f"_{pos}" if pos != -1 else ""))
    if in_layouts is not None:
        names = [n for name, lay in zip(names, in_layouts, strict=True)
                 for n in ([name] if lay is None else _inner_names(name, lay))]
    names += [f"size{k}" for k in range(n_ints)]
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, name in zip(phs, names, strict=True):
        node._rename(name)
        node.target = node.name
    gm.recompile()


def _read_checks(checks: tuple, saved_node: list, n_roots: int, used) -> tuple:
    """Note [Saved tensors modified during the backward]: the checks without the inputs of
    traced checkpoint regions that the graph never reads (`used`: read_inputs; a checkpointed
    closure's region takes every module of the closure as inputs, timm's checkpoint_seq, and
    another region writes their buffers during the backward: graph/mutated.py Note [Buffer
    writes at the recomputation point]; nothing can read them stale)."""
    if not checks or used is None:
        return checks
    out = []
    for site, ks in checks:
        ks = tuple((k, r) for k, r in ks
                   if n_roots + k in used or saved_node[k][1] != recompute.ATTR)
        if ks:
            out.append((site, ks))
    return tuple(out)


def _inner_names(name: str, lay) -> list:
    out = []
    for a, m in lay.inners:
        out.extend(_inner_names(f"{name}_{a}", m) if type(m) is Layout else [f"{name}_{a}"])
    return out


def trace_backward(w, opts: Options, root_grads: list, slots: list, delivers: bool = False,
                   dyn=None):
    """Returns (GraphModule, Plan).  `slots` (walk/saved_slots.py PySlots or the C++ SlotList) are installed
    on w.saved (same order).  delivers: see _run_engine.  dyn: (DynWalk, fake example tensors,
    SymInt inputs) for a dynamic graph (dynamic.py Note [Dynamic shapes]): the SymInts are
    graph inputs after the saved tensors; NotDynamic raised means: trace it static."""
    root_defined = tuple(g is not None for g in root_grads)
    verdicts = _dynamo_verdicts(w)
    learn_branches()        # (eager autograd, before the trace)
    example = [g for g in root_grads if g is not None] + list(w.saved)
    n_roots = len(example) - len(w.saved)
    try:
        in_layouts = layouts_of(example)
    except SubclassUnsupported as e:
        raise TraceFailed(str(e), eager_error=False) from None
    n_ints = 0
    if dyn is not None:
        if in_layouts is not None:
            raise NotDynamic("a tensor subclass in the graph")
        w, example, ints = dyn
        n_ints = len(ints)
    if in_layouts is not None:
        example = flatten(example)
    opaque_names: list = []
    result: dict = {}

    def program(*flat):
        if n_ints:
            flat = flat[:len(flat) - n_ints]
        if in_layouts is not None:   # trace-time subclasses around the inner placeholders
            flat = rebuild(in_layouts, flat)
        it = iter(flat[:n_roots])
        grads = [next(it) if d else None for d in root_defined]
        slots.set_placeholders(flat[n_roots:])
        placeholders = dict(zip(w.saved_node, flat[n_roots:], strict=True))
        squeezes = SqueezesDecided() if dyn is not None else contextlib.nullcontext()
        try:
            # Note [Traced recomputation]; torchapi/dynamo.py Note [Squeezes in a symbolic trace]
            with recompute.tracing(w, placeholders), squeezes:
                ran = _run_engine(w, opts, grads, opaque_names, placeholders, delivers)
        finally:
            slots.clear_placeholders()
        try:
            out_layouts = layouts_of(ran.outputs)
        except SubclassUnsupported as e:
            raise TraceFailed(f"a gradient: {e}", eager_error=False) from None
        result.update(ran=ran, out_layouts=out_layouts)
        return ran.outputs if out_layouts is None else flatten(ran.outputs)

    example = one_object_per_input(example)     # graph/distinct.py
    trace_step = TraceStep(verdicts)
    sites = trace_step.sites
    was = _FORMULA_GRAD_MODE[0]
    _FORMULA_GRAD_MODE[0] = opts.create_graph      # Note [Formulas and grad mode]
    with kept_dispatch_state():     # Note [Dispatch state after a failed trace]
        try:
            with current_step(trace_step), pool_sizes_without_parity_guards(), \
                    fake_work.ours():      # Note [Meta failures are our fallbacks]
                gm = make_fx(program, tracing_mode="fake")(*example, *(ints if n_ints else ()))
        except (TraceFailed, NotDynamic) as e:
            traceback.clear_frames(e.__traceback__)
            raise
        except Exception as e:  # anything else: eager runs and shows the real behaviour
            traceback.clear_frames(e.__traceback__)
            raise TraceFailed(f"trace failed: {type(e).__name__}: {e}", eager_error=False) from e
        finally:
            _FORMULA_GRAD_MODE[0] = was
    _check_no_trace_time_values(gm)
    _name_inputs(gm, w, n_roots, in_layouts, n_ints)
    ran = result["ran"]
    used = read_inputs(gm) if in_layouts is None else None
    plan = Plan(root_defined, ran.leaf_outputs, ran.capture_outputs, ran.executed,
                ran.will_execute, tuple(sites), tuple(opaque_names), in_layouts,
                result["out_layouts"], ran.out_defined, delivers and opts.accumulate,
                version_checks=_read_checks(ran.version_checks, w.saved_node, n_roots, used),
                auto_traced=tuple(dict.fromkeys(trace_step.auto_traced)),
                mutated_inputs=mutated_inputs(gm) if in_layouts is None else ())
    if plan.mutated_inputs:
        plan.read_inputs = used
    if sites and not opts.accumulate and plan.out_layouts is None:
        plan.relayout = view_chains(gm, plan.capture_outputs)
    if sites:
        size1 = frozenset(p for i, p in plan.leaf_outputs
                          if p is not None and 1 in w.leaves[i].shape)
        plan.layout_observed = observed_layouts(gm, plan.capture_outputs, plan.relayout,
                                                plan.opaque_sites, w.hooks, size1)
    return gm, plan
