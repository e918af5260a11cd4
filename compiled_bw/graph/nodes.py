"""Per-class facts about autograd nodes: how the walk reads them and how the trace runs them.

Consumes a node class (e.g. MmBackward0); produces a NodeKind, computed once per class and
cached: which `_saved_*` attributes hold tensors (they become graph inputs) and which hold
values (they go into the signature), and how the node is run:
  TRACE   call the C++ node under make_fx, its aten ops land in the graph;
  OPAQUE  one call_function node that runs this step's real node at run time;
  LEAF    AccumulateGrad: a graph output, delivered through the real engine;
  CUSTOM  a custom autograd.Function that opted out (`compiled_bw_traceable = False`): one
          opaque call with PyNode's semantics (custom.py);
  AOT     the backward of a torch.compile'd forward: spliced into the graph (aot.py), or, when
          its backward module is unavailable, CUSTOM (reason kept);
  TRACE_CUSTOM  any other custom Function: its backward is traced into the graph like a C++
          formula if it opted in (`compiled_bw_traceable = True`) or is safe (custom.py Note
          [Traced without opt-in]), else that node is a CUSTOM opaque call (walk.py, trace.py);
  UNSUPPORTED  fall back to eager autograd (reason given).
A node whose saved tensors carry saved-tensor hooks (known per node, by the walk) runs as one
opaque call of the real node instead: `hooked_kind` (Note [Hooked saved tensors]).
"""
from __future__ import annotations

import dataclasses

from .aot import aot_plan, is_aot_node_class
from .custom import is_custom_node, is_traceable
from .node_table import GENERATED, MISSING

TRACE, OPAQUE, LEAF, UNSUPPORTED = "trace", "opaque", "leaf", "unsupported"
CUSTOM, TRACE_CUSTOM, AOT = "custom", "trace_custom", "aot"

# Note [Hidden saved state]
# torch's codegen exposes no getter for some saved fields (node_table.py lists them per class,
# with the forward input each describes and the inputs whose grad formulas use it).  The
# signature cannot see them, so a graph traced with one value could be reused with another.
#  - 'input_meta' fields (ScalarType, TypeAndSize, TensorOptions, sizes of a forward input X)
#    equal the `_input_metadata` of the next node X's edge points to, which IS in the
#    signature -- when that edge is valid.  A field only matters if a formula that uses it
#    runs, i.e. if the edge of an input whose formula uses it is valid.  So the node is traced
#    unless some field is used (a user edge is valid) but not derivable (its source edge is
#    invalid): then it runs OPAQUE (the real node, with its real fields, at run time).
#    E.g. `x * 2.0` (MulBackward0, `other` needs no grad) traces.
#    Except where a hidden size only places the others: CatBackward0's formula narrows the
#    grad at each input's offset, which the sizes of the inputs before it decide.  The grad's
#    length along `dim` (the node's own input metadata, in the signature) is the sum of them
#    all, so inputs that need no grad (invalid edges, sizes hidden) are told apart by it when
#    every input whose grad is used has all of them on one side: all before it (its offset is
#    the known sizes before it plus the hidden sum, the total minus every known size) or all
#    after it.  Only an input with hidden ones on both sides (`cat([a_nograd, b, c_nograd])`)
#    has an unknown offset: then OPAQUE.  Hugging Face's KV cache concatenates an empty no-grad
#    cache before each layer's new keys in training, so its CatBackward0 traces (and a new
#    sequence length is a size change, not an opaque node keeping the graph static).  The rule
#    ("offsets", "offsets") says so (trace/dynamic.py `_cat` places them the same way).
#  - 'layout' (mm/addmm & co.): only non-strided (sparse) forward inputs change it; the walk
#    falls back to eager whenever it meets a non-strided tensor, so strided is the only value.
#  - 'geometry' (as_strided), 'optbool' (native_dropout's `train`): never derivable -> OPAQUE.
NEVER_TRACE = ("geometry", "optbool")


OFFSETS_ONLY = frozenset(("CatBackward0",))   # Note [Hidden saved state]: sizes that only place
OFFSET_RULES = (("offsets", "offsets"),)


def _edge_rules(args: tuple, hidden: tuple) -> tuple:
    """Per hidden 'input_meta' field: (source edge indices, user edge indices); 'all' when the
    inputs include a tensor list (its edges are not known statically)."""
    rules = []
    single = all(not is_list for _, is_list in args)
    pos = {name: k for k, (name, _) in enumerate(args)}
    for kind, src, users in hidden:
        if kind != "input_meta":
            continue
        if not single or src is None or src not in pos:
            rules.append(("all", "all"))
        else:
            rules.append(((pos[src],), tuple(pos[u] for u in users if u in pos)))
    return tuple(rules)


# Note [Checks fake tensors skip]
# Some formulas of torch's FunctionsManual.cpp check their arguments only where no tensor is
# "subclass-like" (`at::isTensorSubclassLike`): a check that reads tensor data (`allclose`,
# `.item()`) cannot run under functorch or on fake tensors.  Traced on fake tensors, such a
# formula takes the subclass branch, so its check is not in the graph: where eager raises, the
# graph returned a grad.  Where the check applies, the node runs as one opaque call of the real
# node instead (the trace's rejected nodes), which raises eager's error at eager's point, with
# eager's `.grad`s delivered before it.  SKIPPED_CHECKS maps the node class to when that is:
# f(input metadata [(shape, dtype, device) | None per grad], grads) -> the check's name or "".
#  - LinalgEigBackward0, LinalgEighBackward0 (linalg_eig_backward): "The eigenvectors in the
#    complex case are specified up to multiplication by e^{i phi}.  The specified loss function
#    depends on this quantity, so it is ill-defined" -- complex eigenvectors whose grad is
#    defined (tests/test_bad_input.py test_an_eigenvector_phase_dependent_loss_raises_eagers_error).


def _eigenvector_phase(meta, grads) -> str:
    vectors = meta[1] if len(meta) > 1 else None
    if vectors is None or len(grads) < 2 or grads[1] is None or not vectors[1].is_complex:
        return ""
    return "linalg_eig_backward's eigenvector phase check"


SKIPPED_CHECKS = {
    "LinalgEigBackward0": _eigenvector_phase,
    "LinalgEighBackward0": _eigenvector_phase,
}


# Note [Grads in the layout of a saved input]
# A formula's subclass branch (Note [Checks fake tensors skip]) may build a grad another way than
# eager's plain branch, equal in values but not in strides: ormqr_backward's plain branch writes
# each column of the input's grad into `zeros_like(self)` (self's layout: geqrf's
# column-major result gives a column-major grad), the subclass branch concatenates the
# columns (row-major).  EAGER_LAYOUT maps such a node class to {output index: the saved tensor
# whose `empty_like` layout eager's grad has}; the traced grad is copied into that layout
# (tests/test_wrong_values.py test_ormqr_grad_has_the_inputs_layout).  A strides-only sweep of
# every OpInfo op's backward, plain and under a dispatch mode, found ormqr only (torch 2.13).
EAGER_LAYOUT = {"OrmqrBackward0": {0: "self"}}


# Non-generated C++ nodes that are pure functions of their inputs and saved state, run opaque.
KNOWN_OPAQUE = {"CopySlices", "UndefinedGradBackward", "Error", "DelayedError", "CppFunction"}

# Note [CopyBackwards is traced]
# Non-generated C++ nodes traced like generated ones: the real node called on fake tensors
# records its ops.  CopyBackwards (`dst.copy_(src)`, functions/tensor.cpp) returns
# `zeros_like(grad)` for dst's old history and `grad.to(src_options)` for src: `real(grad)`
# first for a real src and a complex grad; with src's dtype and device that is the very tensor
# it got.  Traced, that grad is one value in the graph, so the holders see that only the engine
# holds it and sum into it in place where eager does (trace/holders.py); run opaque, its
# output counted as user code's and every sum into it stayed out of place (size-1 strides
# unlike eager's: tests/test_buffer_sums.py test_a_sum_into_copybackwards_pass_through_is_in_place).
# It saves nothing but `src_options`, which the next node's input metadata (in the signature)
# repeats where the grad is sent.
TRACED_BUILTIN = {"CopyBackwards"}


@dataclasses.dataclass(frozen=True)
class NodeKind:
    name: str
    how: str
    tensor_attrs: tuple[str, ...]     # names X with `_saved_X` and `_raw_saved_X`
    value_attrs: tuple[str, ...]      # names X with only `_saved_X`
    edge_rules: tuple = ()            # see Note [Hidden saved state]
    reason: str = ""
    hooked: bool = False              # its saved tensors carry hooks: hooked_kind


_KINDS: dict[type, NodeKind] = {}


def node_kind(cls: type) -> NodeKind:
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _classify(cls)
    return kind


def _classify(cls: type) -> NodeKind:
    name = cls.__name__
    names = dir(cls)
    raw = {a[len("_raw_saved_"):] for a in names if a.startswith("_raw_saved_")}
    tensor_attrs = tuple(sorted(raw))
    value_attrs = tuple(sorted(
        a[len("_saved_"):] for a in names if a.startswith("_saved_") and a[len("_saved_"):] not in raw
    ))
    if name == "AccumulateGrad":
        return NodeKind(name, LEAF, (), ())
    if is_custom_node(cls):
        if is_aot_node_class(cls):
            why = aot_plan(cls).reason
            return NodeKind(name, CUSTOM if why else AOT, ("tensors",), (), reason=why)
        how = TRACE_CUSTOM if is_traceable(cls) else CUSTOM
        return NodeKind(name, how, ("tensors",), ())
    if name in GENERATED:
        args, hidden = GENERATED[name]
        if any(kind in NEVER_TRACE for kind, _, _ in hidden):
            return NodeKind(name, OPAQUE, tensor_attrs, value_attrs)
        rules = OFFSET_RULES if name in OFFSETS_ONLY else _edge_rules(args, hidden)
        return NodeKind(name, TRACE, tensor_attrs, value_attrs, edge_rules=rules)
    if name in TRACED_BUILTIN:
        return NodeKind(name, TRACE, tensor_attrs, value_attrs)
    if name in KNOWN_OPAQUE:
        return NodeKind(name, OPAQUE, tensor_attrs, value_attrs)
    why = f" ({MISSING})" if MISSING else ""     # Note [A node table for every release]
    return NodeKind(name, UNSUPPORTED, (), (), reason=f"unknown autograd node kind {name}{why}")


def hidden_state_unknown(kind: NodeKind, edges: tuple) -> bool:
    """True if a hidden field this node's formulas would use is not in the signature."""
    for src, users in kind.edge_rules:
        valid = [c >= 0 for c, _ in edges]
        if src == "offsets":
            return _offset_unknown(valid)
        used = any(valid) if users == "all" else any(valid[u] for u in users if u < len(valid))
        known = all(valid) if src == "all" else all(valid[k] for k in src if k < len(valid))
        if used and not known:
            return True
    return False


def _offset_unknown(valid: list) -> bool:
    """Note [Hidden saved state]: some input whose grad is used has inputs with hidden sizes
    both before and after it."""
    first = last = None
    for k, v in enumerate(valid):
        if not v:
            first = k if first is None else first
            last = k
    return first is not None and any(valid[first:last + 1])


# Note [Hooked saved tensors]
# A SavedVariable that carries hooks (saved_tensors_hooks, save_on_cpu, non-reentrant
# checkpoint) holds the *packed* object; unpacking calls the user's unpack hook (checkpoint
# recomputes its region there).  Eager unpacks them when the node runs -- each once, in the
# node's own order, with `_current_autograd_node()` that node -- and with retain_graph=False
# frees them (hooks and packed objects) right after it.  So the walk never unpacks them: the
# node runs as ONE opaque call of the real node (site kind "hooked", or "custom" for custom
# Functions and AOT backwards), which unpacks them exactly as eager does; the call releases
# the node's variables after it ran when retain_graph=False (calls/opaque.py).  The
# signature marks such a node ("hooked"), so a graph traced with it is never reused for a step
# without hooks there, nor the other way round.  Its saved tensors are not graph inputs.
# Three kinds of hooks are traced instead: traceable pairs (packed.py Note [Traceable saved-tensor
# hooks]) and non-reentrant checkpoint regions that qualify (recompute.py Note [Traced
# recomputation]), whose nodes keep their class's kind, and plain hooks on a built-in node once a
# run recorded what its unpacks return (unpacked.py Note [Unpack calls]: the formula is traced,
# each unpack an opaque call; its kind is the class's with hooked=True).
HOOKED_REASON = "saved tensors carry hooks, unpacked by the node"
_HOOKED: dict = {}


RUN_OPAQUE = "opaque"       # walk.py: a traced Function runs opaque this step
_RUN_OPAQUE: dict = {}


def entry_kind(kind: NodeKind, how_run) -> NodeKind:
    """The kind a node runs as, from what its signature entry builder returned: False (its
    class's kind), True (hooked_kind), RUN_OPAQUE (a custom Function's PyNode call) or another
    string (the same, for that reason)."""
    if how_run is False:
        return kind
    if how_run is True:
        return hooked_kind(kind)
    v = _RUN_OPAQUE.get((kind, how_run))
    if v is None:
        reason = how_run if how_run is not RUN_OPAQUE else (
            "its ctx or what its backward reads holds a value the cache key cannot follow "
            "(custom.py Note [What a traced function may read])")
        v = _RUN_OPAQUE[(kind, how_run)] = dataclasses.replace(kind, how=CUSTOM, reason=reason)
    return v


def hooked_kind(kind: NodeKind) -> NodeKind:
    """The kind a node of `kind` runs as when its saved tensors carry hooks: the real node as
    one opaque call (custom Functions / AOT backwards: their PyNode call)."""
    v = _HOOKED.get(kind)
    if v is None:
        how = CUSTOM if kind.how in (CUSTOM, TRACE_CUSTOM, AOT) else OPAQUE
        v = _HOOKED[kind] = dataclasses.replace(kind, how=how, hooked=True, edge_rules=(),
                                                reason=HOOKED_REASON)
    return v
