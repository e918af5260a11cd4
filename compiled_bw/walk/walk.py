"""Walk: run on every backward call, so it must stay cheap.

Consumes the root edges of one backward/grad call; produces a Walk: the reachable nodes in
a deterministic discovery order, their edges as indices, the flat list of this step's
saved tensors (future graph inputs), the leaves, and a hashable `signature` that holds
everything the traced graph bakes in (Note [What the signature holds]).  Iterative, never
recursive: graphs have 10^4+ nodes.
"""
from __future__ import annotations

import operator

import torch

from ..calls import unpacked
from ..checkpoint.recompute import checkpoint_entry
from ..graph.aot import saved_of
from ..graph.custom import (
    AUTO_DYNAMO,
    auto_traced,
    class_refusal,
    ctx_state,
    fwd_info,
    materializes,
    reads_grad_buffers,
    safe_ctx_state,
)
from ..graph.hooks import COUNTS, RETAINED, leaf_hooks, node_hooks, retained_by_node
from ..graph.nodes import (
    AOT,
    CUSTOM,
    LEAF,
    OPAQUE,
    RUN_OPAQUE,
    TRACE,
    TRACE_CUSTOM,
    UNSUPPORTED,
    entry_kind,
    hidden_state_unknown,
    node_kind,
)
from ..graph.packed import traceable_entry
from ..graph.saved import SLOTS_KEY, foreign_saved_hooks, input_meta, input_metadata, sequence_nr
from ..graph.subclass import PLAIN, SubclassUnsupported, layout_of
from ..torchapi import autograd as torch_autograd
from .saved_slots import PySlots, install_slots

# Note [What the signature holds]
# Per node, in discovery order: its class, its edges (child index, input_nr; -1 = invalid),
# every saved non-tensor value, the metadata of every saved tensor, its `_input_metadata`
# (the metadata that validate_outputs checks its parents' grads against).  Per leaf: shape,
# stride, dtype, device, requires_grad.  A tensor subclass's metadata is its subclass.Layout
# (type, flatten ctx, outer metadata, inner tensors' metadata).  Then the execution order: the
# permutation that sorts the nodes' sequence numbers.  Plus the roots and the call options
# (added by the caller).
# Hidden per-class state is handled by nodes.py (Note [Hidden saved state]).

_STRIDED = torch.strided


class WalkUnsupported(Exception):
    """The graph holds something we do not compile; the message is the fallback reason."""


# Note [ZeroTensors]: torch._efficientzerotensor (a forward-mode tangent of a tensor captured
# from outside a jvp, some formulas' zero grads under create_graph) has no storage: eager's ops
# short-circuit it through its dispatch key; Inductor's kernels would read a null pointer (a
# crash), and a graph keyed on a dense tensor must not take one.  Such a backward falls back
# (both walks: here and _fastwalk_walk.cpp tensor_key).
ZERO_TENSOR = ("an efficient ZeroTensor (torch._efficientzerotensor: no storage; a jvp's "
               "tangent of a captured tensor, a create_graph zero grad) in the graph")


def tensor_meta(t: torch.Tensor) -> tuple:
    if t.is_nested:
        raise WalkUnsupported(f"a nested tensor ({t.layout}) in the graph (nested tensors are "
                              "not compiled)")
    if t.layout is not _STRIDED:
        raise WalkUnsupported(f"non-strided tensor ({t.layout}) in the graph")
    if t._is_zerotensor():
        raise WalkUnsupported(ZERO_TENSOR)
    if type(t) not in PLAIN:
        # flattened at the graph boundary: Note [Subclasses stay outside the graph]
        try:
            return layout_of(t, tensor_meta)
        except SubclassUnsupported as e:
            raise WalkUnsupported(str(e)) from None
    if t.dtype.is_complex:
        return (t.shape, t.stride(), t.dtype, t.device, t.is_conj(), t.is_neg())
    return (t.shape, t.stride(), t.dtype, t.device)


class Walk:
    __slots__ = (
        "edges",
        "feature_notes",
        "hooks",
        "in_meta",
        "kinds",
        "leaves",
        "nodes",
        "observe",
        "regions",
        "released_nodes",
        "root_edges",
        "saved",
        "saved_node",
        "signature",
        "slot_only",
        "unpack",
        "unpack_nodes",
    )

    def __init__(self) -> None:
        self.nodes: list = []          # autograd node objects, discovery order
        self.kinds: list = []          # NodeKind per node
        self.edges: list = []          # per node: tuple of (child index | -1, input_nr)
        self.in_meta: list = []        # per node: tuple of (shape, dtype, device) per input slot
        self.saved: list = []          # real saved tensors, flattened (graph inputs)
        self.saved_node: list = []     # (node index, attr, list position | -1), parallel to `saved`
        self.slot_only: list = []      # keys of saved tensors real nodes unpack (not inputs)
        self.leaves: dict = {}         # node index -> leaf tensor (AccumulateGrad.variable)
        self.hooks: dict = {}          # node index -> NodeHooks
        self.signature: tuple = ()
        self.root_edges: list = []     # (node index, input_nr) per root
        self.regions: dict = {}        # id(checkpoint frame) -> recompute.Region | None
        # recompute.py: why a region was not traced, where a feature is off on this torch
        # release (torchapi features_off()); a capture notes each
        self.feature_notes: set = set()
        # unpacked.py Note [Unpack calls]: node index -> attrs of its hooked saved tensors;
        # (record, traced metas or None); node index -> (record, attrs) for one-call runs
        self.unpack_nodes: dict = {}
        self.unpack = None
        self.observe: dict = {}
        self.released_nodes: list = []  # fastwalk.py Note [Released nodes]

    # ---- the walk interface (walk/fastwalk.py FastWalk implements the same) ----
    # Saved-tensor life cycle: install (Slots, to trace), take_saved (into the Box),
    # release_nodes (what eager's engine does after a node with retain_graph=False); leaf
    # delivery (accumulate, leaf_observed); streams; run_native (the C++ hit path).

    frees_saved_itself = False   # without Slots the nodes keep their saved tensors (FastWalk: no)

    def released(self) -> list:
        """Indices of the nodes a retain_graph=False backward already ran (fastwalk.py Note
        [Released nodes])."""
        return self.released_nodes

    def install(self):
        """Slots on the saved tensors the graph reads (saved_slots.py PySlots)."""
        ext = extension(always=True)
        if ext is None:     # no way to free them but Slots (docs/semantics.md: known deviations)
            keys = self.saved_node + self.slot_only
            return PySlots(install_slots(self.nodes, keys), len(self.saved_node),
                           [k[0] for k in keys])
        # a custom Function's saved tensors get no Slot: its real node unpacks them (eager's
        # objects) and Node::release_variables frees them after the run, as the C++ walk does;
        # so for every node run opaque (state of its own: a C++ custom Function's ctx, a
        # CopySlices' inner node)
        opaque = {k[0]: self.nodes[k[0]] for k in self.slot_only}
        opaque.update((i, self.nodes[i]) for i, k in enumerate(self.kinds) if k.how == OPAQUE)
        return PySlots(install_slots(self.nodes, self.saved_node), len(self.saved_node),
                       [k[0] for k in self.saved_node], opaque, ext.release_nodes)

    def take_saved(self, box: list) -> None:
        """Move the saved tensors into `box` (the Walk keeps no reference: Note [Box
        ownership] in runtime/run.py)."""
        box.extend(self.saved)
        self.saved = None

    def release_nodes(self, indices) -> None:
        """Nothing: with the Python walk, Slots free the saved tensors (frees_saved_itself)."""

    def accumulate(self, leaf_idx: list, grads: list) -> bool:
        """Deliver grads[k] to the AccumulateGrad of leaf leaf_idx[k] directly (C++: grad mode
        off, the grad moved in), emptying `grads`; False, touching nothing, if the extension is
        not loaded or any of those nodes has a hook (runtime/run.py Note [Direct delivery])."""
        if not leaf_idx:
            return True
        ext = extension()
        return False if ext is None else ext.accumulate_nodes(
            [self.nodes[i] for i in leaf_idx], grads)

    def leaf_observed(self) -> bool | None:
        """Whether any leaf's AccumulateGrad has a hook of any kind (C++ ones such as DDP's
        included: only C++ sees them); None if the extension is not loaded (unknown)."""
        ext = extension(always=True)   # also with the Python walk chosen: C++ hooks
        return None if ext is None else ext.leaves_observed([self.nodes[i] for i in self.leaves])

    def forward_streams(self) -> list | None:
        """The distinct (device type, device index, stream id) that the nodes ran their
        forward on (non-CPU devices), or None when the extension is not loaded."""
        ext = extension()
        return None if ext is None else ext.node_streams(list(self.nodes))

    def run_native(self, *args):
        """The C++ hit path needs the C++ walk's tensors: never here."""
        return False

    def python_walk(self, root_edges):
        """This walk as a Python Walk (runtime/dynamic.py reads its signature entries)."""
        return self


def _no_extension(always: bool = False):
    return None


# extension(always=False) -> the C++ extension module or None; walk/fastwalk.py installs
# its loader here (always: load it even when the C++ walk is turned off).
extension = _no_extension


_CLASS_INFO: dict = {}


def class_info(cls) -> tuple:
    """(NodeKind, getter of saved values, getter of saved tensors), once per class."""
    info = _CLASS_INFO.get(cls)
    if info is None:
        kind = node_kind(cls)
        vget = (operator.attrgetter(*("_saved_" + a for a in kind.value_attrs))
                if kind.value_attrs else None)
        tget = (operator.attrgetter(*("_saved_" + a for a in kind.tensor_attrs))
                if kind.tensor_attrs else None)
        info = _CLASS_INFO[cls] = (kind, vget, tget, len(kind.value_attrs) == 1,
                                   len(kind.tensor_attrs) == 1)
    return info


def walk_graph(root_edges: list) -> Walk:
    """root_edges: list of (node, input_nr) with node never None.  Discovery order: roots
    first, then DFS (the stack pops the last pushed); indices are assigned on first sight, so
    the same structure always yields the same numbering."""
    w = Walk()
    index: dict = {}
    stack: list = []
    sig: list = []
    per_node: list = []   # (index, NodeKind, edges, input metadata), in processing order
    seqs: list = []       # (sequence_nr, index) of the non-leaf nodes, in processing order
    hooks = _HookReader()
    for node, nr in root_edges:
        w.root_edges.append((_see(w.nodes, index, stack, node), nr))
    while stack:
        i = stack.pop()
        node = w.nodes[i]
        info = class_info(type(node))
        kind = info[0]
        if kind.how == UNSUPPORTED:
            raise WalkUnsupported(kind.reason)
        e = tuple((-1, 0) if child is None else (_see(w.nodes, index, stack, child), nr)
                  for child, nr in node.next_functions)
        try:
            meta = input_meta(node)
        except RuntimeError:    # torch's binding: "std::get: wrong index for variant"
            if any(m.is_nested_tensor for m in input_metadata(node)):
                raise WalkUnsupported(f"node {kind.name}: its grad is a nested tensor (nested "
                                      "tensors are not compiled)") from None
            raise
        entry = [i, kind.name, e, meta]
        if kind.how == LEAF:   # sequence_nr is UINT64_MAX for every AccumulateGrad
            _leaf_entry(w, i, node.variable, entry)
        else:
            seqs.append((sequence_nr(node), i))
            kind = entry_kind(kind, _node_entry(w, i, node, info, meta, entry, hooks))
        sig.append(tuple(entry))
        per_node.append((i, kind, e, meta))
    _per_node_lists(w, per_node)
    # Execution order (ENGINE.md 1.5) depends only on the relative order of sequence numbers:
    # the signature holds that permutation, not the numbers (they grow every step).
    order = sorted(range(len(seqs)), key=lambda k: seqs[k][0])
    sig.append(("execution order", tuple(seqs[k][1] for k in order)))
    w.signature = tuple(sig)
    if w.unpack_nodes:
        unpacked.choose(w, w.unpack_nodes)
    return w


def _see(nodes: list, index: dict, stack: list, node) -> int:
    """The node's index, assigned (and the node pushed to be processed) on first sight."""
    i = index.get(node)
    if i is None:
        i = index[node] = len(nodes)
        nodes.append(node)
        stack.append(i)
    return i


def _leaf_entry(w: Walk, i: int, var, entry: list) -> None:
    """A leaf's signature entry: its tensor's metadata, requires_grad, its hooks."""
    entry += [tensor_meta(var), var.requires_grad]
    if var._backward_hooks:   # run by us only where grad() captures the leaf
        h = w.hooks[i] = leaf_hooks(var)
        entry.append(h.signature())
    w.leaves[i] = var


class _HookReader:
    """Node hooks, read only when some exist in the process (hooks.py COUNTS)."""
    __slots__ = ("dicts", "foreign", "on", "retained")

    def __init__(self) -> None:
        self.retained = retained_by_node() if len(RETAINED) else None
        # Note [C++ hooks on interior nodes] (_fastwalk.h): only C++ sees hooks registered from
        # C++, and (Note [Hooks registered before compiled_bw]) node hooks registered before
        # compiled_bw was imported, read from the node (`hook_dicts`); tensor hooks registered
        # then fall back.  Without the extension (it failed to build) this walk cannot see them
        # and they are dropped (hooks.py).
        ext = extension(always=True)
        self.foreign = None if ext is None else ext.foreign_hook
        self.dicts = None if ext is None else ext.hook_dicts
        self.on = COUNTS.tensor or COUNTS.node or len(RETAINED) or self.dicts is not None


def _node_entry(w: Walk, i: int, node, info: tuple, meta, entry: list,
                hooks: _HookReader) -> bool:
    """A non-leaf node's signature entry (hooks, then saved state); whether its saved tensors
    carry hooks that are not ours (nodes.py Note [Hooked saved tensors])."""
    if hooks.foreign is not None:
        why = hooks.foreign(node, hooks.retained)  # Note [C++ hooks on interior nodes]
        if why is not None:
            raise WalkUnsupported(why)
    if hooks.on:
        h = node_hooks(node, hooks.retained, hooks.dicts)
        if h is not None:
            w.hooks[i] = h
            entry.append(h.signature())
    how = info[0].how
    if how == CUSTOM or how == TRACE_CUSTOM or how == AOT:
        return _custom_entry(w, i, node, how, meta, entry)
    return values_entry(w, i, node, info, entry)


def _per_node_lists(w: Walk, per_node: list) -> None:
    """w.edges, w.in_meta, w.kinds by node index (processing order differs from it); a node
    whose hidden state cannot be told from its edges runs opaquely (nodes.py Note [Hidden
    saved state])."""
    per_node.sort(key=_first)
    w.edges = [p[2] for p in per_node]
    w.in_meta = [p[3] for p in per_node]
    w.kinds = kinds = [p[1] for p in per_node]
    for i, kind in enumerate(kinds):
        if kind.edge_rules and kind.how == TRACE and hidden_state_unknown(kind, w.edges[i]):
            kinds[i] = _as_opaque(kind)


# Set by walk/fastwalk.py when its extension loads: saved_hooks_in(node, attrs) -> bool.
saved_hooks_in = None


def foreign_hooks(node, attrs) -> bool:
    """Whether the node's saved tensors carry hooks that are not ours, found without unpacking
    anything (nodes.py Note [Hooked saved tensors]): the C++ extension's check, or, before it
    is loaded or without it, saved.foreign_saved_hooks."""
    if SLOTS_KEY in node.metadata:     # our own Slots (saved.py): an earlier retained walk
        return False
    return (saved_hooks_in or foreign_saved_hooks)(node, attrs)


def values_entry(w, i: int, node, info: tuple, entry: list) -> bool:
    """Saved values and saved-tensor metadata of a built-in node (info: its _class_info),
    appended to `entry`; its saved tensors to w.saved / w.saved_node (also walk/fastwalk.py).
    Returns True, reading no saved tensor, when they carry hooks (the node runs as
    nodes.hooked_kind)."""
    kind, vget, tget, one_value, one_tensor = info
    saved, saved_node = w.saved, w.saved_node
    if tget is not None and foreign_hooks(node, kind.tensor_attrs):
        if traceable_entry(w, i, node, kind.tensor_attrs, entry, tensor_meta):
            values = vget(node) if vget is not None else ()
            entry.extend(tuple(v) if type(v) is list else v
                         for v in ((values,) if one_value else values))
            return False
        if extension(always=True) is not None and checkpoint_entry(
                w, i, node, kind.tensor_attrs, entry, tensor_meta):
            # recompute.py Note [Traced recomputation]: its formula is traced
            values = vget(node) if vget is not None else ()
            entry.extend(tuple(v) if type(v) is list else v
                         for v in ((values,) if one_value else values))
            return False
        entry.append("hooked")      # the real node runs: its saved state is not baked in
        attrs = None
        if type(w) is Walk and extension(always=True) is not None:
            attrs = unpacked.eligible_attrs(node, kind.tensor_attrs)
        if attrs is not None:     # unpacked.py Note [Unpack calls]: maybe traced, values keyed
            values = vget(node) if vget is not None else ()
            entry.extend(tuple(v) if type(v) is list else v
                         for v in ((values,) if one_value else values))
            entry.append(attrs)
            w.unpack_nodes[i] = attrs
        return True
    if vget is not None:
        vals = vget(node)
        if one_value:
            vals = (vals,)
        entry.extend(tuple(v) if type(v) is list else v for v in vals)
    if tget is not None:
        try:
            ts = tget(node)   # unpacks: eager's version-counter / freed checks happen here
        except RuntimeError as e:
            if "backward through the graph a second time" not in str(e):
                raise
            entry.append("released")    # walk/fastwalk.py Note [Released nodes]
            w.released_nodes.append(i)
            return False
        if one_tensor:
            ts = (ts,)
        for k, v in enumerate(ts):
            if v is None:
                entry.append(None)
            elif isinstance(v, torch.Tensor):
                entry.append(tensor_meta(v))
                saved.append(v)
                saved_node.append((i, kind.tensor_attrs[k], -1))
            else:                               # list of optional tensors
                add_saved_list(w, i, kind.tensor_attrs[k], v, entry)
                entry.append(len(v))
    return False


def add_saved_list(w, i: int, attr: str, tensors, entry: list) -> None:
    """A list of optional saved tensors of node i: metadata (None for an undefined one) into
    `entry`, each defined tensor into w.saved with its key (i, attr, position)."""
    for j, t in enumerate(tensors):
        if t is None:
            entry.append(None)
            continue
        entry.append(tensor_meta(t))
        w.saved.append(t)
        w.saved_node.append((i, attr, j))


def _first(p):
    return p[0]


_SUBCLASS_OPAQUE = (
    "its forward inputs/outputs or saved tensors hold a tensor subclass, and a custom Function "
    "runs as an opaque call, which takes dense tensors only (a Function whose backward is "
    "traceable can set compiled_bw_traceable = True)")


def _custom_entry(w, i: int, node, how: str, meta: tuple, entry: list):
    """Signature part and saved tensors of a custom autograd.Function node.  Returns True,
    unpacking nothing, when its saved tensors carry hooks (it then runs as one opaque call,
    nodes.hooked_kind: traced and AOT backwards included); RUN_OPAQUE when a traced Function
    runs as an opaque call this step (custom.py Notes [Traced without opt-in], [What a traced
    function may read]);
    else False."""
    name = type(node).__name__
    info = fwd_info(node)
    if info is None:
        raise WalkUnsupported(
            f"custom Function node {name} was created before compiled_bw was imported (its "
            "forward was not recorded); import compiled_bw before building the model")
    if len(info.out_info) != len(meta):
        raise WalkUnsupported(f"custom Function node {name}: {len(info.out_info)} forward "
                              f"outputs but {len(meta)} grad slots")
    if torch_autograd.INPUT_GRAD_BUFFERS and how != AOT and \
            reads_grad_buffers(type(node)._forward_cls.backward):
        raise WalkUnsupported(      # custom.py Note [Grad buffers of a custom backward]
            f"custom Function node {name}'s backward reads ctx.input_grad_buffers: the engine's "
            "grad buffers, in eager's order, which a compiled graph does not have")
    entry[1] = type(node)          # class identity: two classes never share a graph
    entry.append(info.is_var)
    entry.append(info.subclass)    # trace.py: a subclass must not reach an opaque call
    if foreign_hooks(node, ()):
        entry.append("hooked")
        return True
    if how == AOT:
        ts, no_vc, symints, opaque = saved_of(node)
        if opaque:
            raise WalkUnsupported(f"{name}: AOT backward with opaque objects")
        entry.append(symints)
        add_saved_list(w, i, "tensors", ts, entry)
        add_saved_list(w, i, "novc", no_vc, entry)
        return False
    if how == TRACE_CUSTOM:
        entry.append(_zeros_of_nondiff(node, info))
    if getattr(info_cls := type(node)._forward_cls, "clear_saved_tensors_on_access", False):
        # reading ctx.saved_tensors would release them (the user's backward then raises): the
        # real node alone reads them, at run time
        result = False
        if how == TRACE_CUSTOM:
            if not auto_traced(type(node)):
                raise WalkUnsupported(f"custom Function {info_cls.__name__} sets "
                                      "clear_saved_tensors_on_access: its backward is not traced")
            entry.append(RUN_OPAQUE)
            result = RUN_OPAQUE
        if info.subclass:
            raise WalkUnsupported(f"custom Function node {name}: {_SUBCLASS_OPAQUE}")
        return result
    ts = node.saved_tensors        # unpacks: eager's version-counter / freed checks
    result = False
    if how == TRACE_CUSTOM:
        auto = auto_traced(type(node))
        if auto:
            state = safe_ctx_state(node, auto)
            if state is not None and auto == AUTO_DYNAMO:
                why = class_refusal(node, ts, meta)     # custom.py Note [Refused for good]
                if why is not None:
                    entry.append(RUN_OPAQUE)
                    state, result = None, f"opaque: {why}"
        else:
            try:
                state = ctx_state(node)
            except TypeError as e:
                raise WalkUnsupported(str(e)) from None
        if state is not None:
            entry.append(state)
            add_saved_list(w, i, "tensors", ts, entry)
            return False
        if not result:              # something the key cannot hold: run it opaque
            entry.append(RUN_OPAQUE)
            result = RUN_OPAQUE
    # the real node unpacks them at run time; Slots only release them afterwards
    if info.subclass or any(t is not None and type(t) not in PLAIN for t in ts):
        raise WalkUnsupported(f"custom Function node {name}: {_SUBCLASS_OPAQUE}")
    w.slot_only.extend((i, "tensors", j) for j, t in enumerate(ts) if t is not None)
    return result


# Note [Zeros of a non-differentiable output]
# An undefined grad for a custom Function's output becomes zeros of that output as this step's
# forward made it (PyNode::to_py_args; for a non-differentiable output too, unless
# ctx.set_materialize_grads(False) or _materialize_non_diff_grads says no).  A differentiable
# output's shape and dtype are the node's input metadata, in the C++ key; a non-differentiable
# one (mark_non_differentiable: BackwardHookFunction's tensor arguments that need no grad, a
# module full backward hook's grad_input for an attention mask) has none there, so a traced
# backward's entry holds them: a mask of another length or dtype is another graph, never the
# capture's zeros.  Opaque calls materialize at run time, from the real node.


def _zeros_of_nondiff(node, info) -> tuple:
    """Note [Zeros of a non-differentiable output]: (slot, shape, dtype, device) per
    non-differentiable tensor output whose undefined grad the node turns into zeros."""
    ms = materializes(node, info)
    return tuple((k, tuple(o[0]), o[1], o[2])
                 for k, (o, d, m) in enumerate(zip(info.out_info, info.out_diff, ms, strict=True))
                 if m and not d and o is not None)


_OPAQUE_VARIANTS: dict = {}


def _as_opaque(kind):
    import dataclasses

    v = _OPAQUE_VARIANTS.get(kind)
    if v is None:
        v = _OPAQUE_VARIANTS[kind] = dataclasses.replace(kind, how=OPAQUE)
    return v
