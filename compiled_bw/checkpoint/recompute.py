"""Non-reentrant checkpoint regions traced into the backward graph (their recomputation).

Consumes, at walk time, built-in nodes whose saved tensors are non-reentrant
torch.utils.checkpoint holders; produces per checkpointed region (one _CheckpointFrame) a
Region: its signature part, its inputs (the module's parameters and buffers and the region's
saved arguments) as Box inputs, and the region's recomputation traced once (make_fx of a
functional_call) into a small aten graph whose outputs are the tensors the region saves, in
pack order.  While the backward is traced, the first unpack of a region's saved tensor runs
that graph on the region's placeholders, so its ops land in the backward graph right before
their first use, and every holder unpacks to its recomputed tensor.

Note [Traced recomputation]
Eager recomputes a region at the first unpack of any of its saved tensors (checkpoint's unpack
hook runs `fn(*args)` again under enable_grad, with its saved-tensor pack hook catching the
k-th saved tensor for the k-th holder) and hands each holder its tensor.  We do the same at
trace time, on placeholders: the region's parameters, buffers and arguments are graph inputs
(never constants), and the recomputed tensors are computed by the graph.  This is exact only
when the recomputation is a function of exactly those inputs and of what the key holds, so a
region is traced only when (else: its nodes run as hooked opaque calls, nodes.py Note [Hooked
saved tensors], which recompute as eager does):
  - fn is an nn.Module (or its bound __call__/forward) whose every submodule's class is
    torch.nn's own or declares `compiled_bw_traceable = True` (the class states its forward
    reads nothing but its inputs, parameters, buffers and plain attributes, and has no Python
    side effect); no module hooks (instance or global);
    every plain attribute of every submodule (training included) is in the key, keyed with
    its type; any other attribute value declines (it could change unseen); so is each
    class's `forward` (by identity: a forward patched on the class between steps is a new
    graph);
  - or fn is any other module, bound __call__/forward or functools.partial(function, module,
    **kwargs) (Hugging Face's) that Dynamo traces whole with no side effect, and whose
    Dynamo guards hold at this backward: the capture they select is in the key, a tensor in
    the partial's keywords is a graph input, a tensor read from anywhere else declines
    (guarded.py Note [Guarded recomputation]); no module hooks but ones known to do
    nothing at this backward (inert.py Note [Inert hooks]);
  - no context_fn other than selective checkpointing's (Note [Selective recomputation]), no
    autocast, no debug, the default determinism check, no saved_tensors_hooks around the
    region's saved arguments but an enclosing checkpoint's (Note [Nested regions]), no
    GraphExecGroup;
  - the trace (fake tensors) succeeds, mutates no input (BatchNorm's running stats; in-place
    ops on tensors the region itself made, a GRU cell's, are functionalized), and where it
    draws random numbers (dropout): if checkpoint restores
    only the CPU generator (preserve_rng_state, a CPU region), the graph is functionalized and
    its random ops draw from the forward's saved RNG state, a region input (rng.py Note
    [Functional RNG in recomputation]); else (preserve_rng_state=False: eager draws from the
    global generator at backward time) it declines; leaves the module's attributes as they were, and saves as
    many tensors as the forward did, with the forward's shapes, dtypes and devices (what
    checkpoint's own determinism check compares).
The trace stops at the region's last saved tensor when the frame's early stop is on (eager's
recomputation raises there), so what follows it is neither traced nor checked.
The verdict and the traced region are cached by the region's key (module tree, parameter,
buffer and argument metadata, the forward's saved metadata, early stop, whether its RNG can be
replayed).  Eager's recomputation has no
effect outside the frame (RNG forked and restored -- the graph's draws never touch the global
generator --, no side effects by the rules above), so
skipping it at run time is unobservable; with retain_graph=False the nodes' saved variables
(holders, frame, saved arguments) are freed after the run, as eager frees them.

Note [Nested regions]
A region checkpointed inside another's forward (timm's poolformer checkpoints its stages and,
in each, its blocks) has its arguments saved under the enclosing region's hooks (torch's Note
[Nestable Checkpoint], rule 2): they are that frame's holders, and eager's recomputation of
the inner region unpacks them, which recomputes the enclosing region first (detached, as
recomputed tensors are; the unpacked argument requires grad as it did).  So an inner region's
argument is not a graph input: it is the enclosing region's recomputed tensor k (an _Outer),
read from the enclosing region's traced graph when the inner one first runs; the enclosing
region is traced even when none of its own nodes is (it may save nothing but its blocks'
arguments), and its trace runs the real checkpoint call of the inner region on fake tensors
(rule 1: the inner region's own saved tensors go to the inner frame, not to ours, as in the
forward).  The inner region is traced and guarded on an uninitialized stand-in of the outer
trace's metadata for that tensor (shape, strides, dtype, device, requires_grad: its key
part); each region's key and its inputs enter the signature at its first mention, an
enclosing region's with the first inner region that reads it.  Declined (the inner nodes
run hooked, recomputing as eager does): an argument packed by a user's hooks, or by an
enclosing region that is declined or selective (its SAC entries are consumed only where its
own nodes run).  Eager's recomputation of either has no effect outside the frames (the
rules above), so computing them in the graph is unobservable.

Note [Symbolic recomputation]
A region's trace (make_fx on fake tensors) bakes in its sizes, so over varying sizes (Hugging
Face fine-tuning with dynamic padding) every length was another static graph, and the root
backed off to eager autograd (runtime/cache.py Note [Recapture storms]).  A region that writes
no buffer and is not selective (Traced.retraceable) keeps its
recomputation as a function (Region.retrace, _recomputation: the same call on any inputs,
holding none of the step's tensors), and in a dynamic graph's trace (trace/dynamic.py Note
[Dynamic shapes]) its first unpack runs that function on the trace's placeholders instead of
the static graph: the region's ops land in the dynamic graph with sizes computed from its
symbolic inputs (the region's arguments and keyword tensors are Box inputs like saved tensors,
and trace/dynamic.py `_classify_region` maps the sizes and strides its key holds to them), and
any size the module's Python code decides on is a guard of that graph.  Its random ops
(dropout) draw from the forward's RNG state, a Box input, through rng.DrawsFrom: the state
chain the static trace's rng.rewrite makes, in eager's order (graph/rng.py Note [Functional
RNG in a symbolic recomputation]); its in-place ops on tensors it made (dropout's
`bernoulli_`, an MoE's `index_add_`) stay in place in the dynamic graph (the eager backend runs
them so, Inductor's retrace functionalizes them).  Each tensor it saves
is checked against the forward's metadata (_symbolic: dtype, device, and every size equal to
the forward's, itself a SymInt input where it varies), so a step whose forward saved other
sizes than the recomputation gives fails the graph's guards instead of computing what eager
would raise on (checkpoint's determinism check).  A region judged by Dynamo (guarded.py) keeps
one capture over the sizes once its Dynamo guards are symbolic (Note [Guarded recomputation
over varying sizes]).  Once a region's recomputation was traced symbolically, a key that
differs from its key only in sizes (_size_free) is not traced statically at walk time (the
trace, ~0.2 s for a Llama block, was paid at every new length): Region.pending makes it where
a static graph or an enclosed region needs it (a static trace that then declines fails that
capture: eager autograd runs the step, recorded; so does one whose static trace draws random
numbers where the region it stands in for did not, or the other way round).  Other regions
(a buffer write, SAC), or ones that hold
an argument no key position maps (a nested region's argument: the enclosing region's tensor,
keyed with the metadata that region's own trace gives), keep the graph static where those
sizes change.

Note [Selective recomputation]
A region checkpointed with create_selective_checkpoint_contexts recomputes under torch's
_CachedTorchDispatchMode: each op (but SAC_IGNORED_OPS) takes the next index of its own
counter and looks up storage[op][index], which the forward's caching mode filled: RECOMPUTE
runs the op, a saved output is returned instead (and the entry becomes CONSUMED: a second
recomputation raises "backward an extra time"), a missing or consumed entry raises, a saved
tensor whose version changed raises unless allow_cache_entry_mutation.  The policy runs only
in the forward (torch 2.13: the recomputation reads verdicts, never the policy), so what a
stateful policy (a counter saving every other mm), one reading a global flag, or Hugging
Face's and torchtitan's policies decided is data of this step: the storage.  So the key holds
per op, per index, its verdict and the saved outputs' metadata (a different verdict is
another graph, whatever the policy read to reach it), and the saved tensors are Box inputs
(ckpt<region>_sac<k>), never constants.  The trace runs the region under SacReplay, the same
lookup: a saved op's outputs are those inputs (it is not traced), every other op is traced as
in a plain region.  It declines (the nodes run hooked, eager's lookup raises or runs) when the
storage holds a CONSUMED entry (a second backward after retain_graph=True), a mutated saved
tensor, a key that is not an op (a torch.compile'd region inside), a saved value that is not
a plain tensor or plain value, or when the trace asks for an entry the storage lacks.  The
entries the trace answered are the ones eager's recomputation consumes (early stop included);
they are marked CONSUMED before a run that computes any of the region's nodes (consume_saved),
which also drops the storage's reference: the Box frees each saved output at its last use.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import traceback
import weakref

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..core import fake_work
from ..core.dispatch_tls import kept as kept_dispatch_state
from ..graph import rng
from ..graph.custom import NOT_PLAIN, plain_key
from ..graph.fake_ops import GroupedMmOnFakes
from ..graph.mutated import assign, input_of, written_args
from ..graph.native import release_node
from ..graph.saved import raw_saved
from ..torchapi import checkpoint as ckpt
from ..torchapi.dynamo import OpOverload, pytree
from . import guarded, inert

# positions in a region's key (_region's `sig`): its arguments' keys, the forward's saved
# tensors' metadata, the partial's keyword tensors, the call's keywords
SIG_ARGS, SIG_SAVED_META, SIG_EXTRA, SIG_KWARGS = 3, 5, 6, 10
ATTR = "ckpt"       # saved_node keys of region inputs: (node index, ATTR, (region, j, name))
INPUT_PREFIX = "ckpt"   # their graph placeholders: ckpt<region>_<name>

# module __dict__ entries that are not attributes the forward reads (hooks are checked apart)
_INTERNAL = frozenset((
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks", "_is_full_backward_hook", "_forward_hooks_always_called",
))


@dataclasses.dataclass
class Region:
    frame: weakref.ref          # weak: the frame (and its saved arguments) dies with its nodes
    number: int                 # order of first sight in this walk
    sig: tuple                  # the key part (module tree, metadata)
    traced: torch.fx.GraphModule
    keys: list                  # saved_node keys of its Box inputs
    holder_index: dict          # id(holder) -> position in frame.weak_holders
    consumed: tuple = ()        # SAC entries (op, index) the recomputation reads
    nodes: list = dataclasses.field(default_factory=list)
    # `traced`'s inputs in order: a key of `keys`, or an _Outer (Note [Nested regions])
    ins: list = dataclasses.field(default_factory=list)
    saved_meta: tuple = ()      # per saved tensor: its metadata and requires_grad
    emitted: bool = False       # its key part is in the walk's signature already
    inputs: list | None = None  # the tensors of `keys`, until they join the Box's (_emit)
    # its recomputation on any inputs (retraceable regions only), for the symbolic trace, and
    # where in `sig` its input tensors' metadata is: Note [Symbolic recomputation]
    retrace: object = None
    sites: dict = dataclasses.field(default_factory=dict)
    # its static trace, not made yet (a region whose key differs only in sizes from one
    # traced symbolically: Note [Symbolic recomputation]); made where a static graph or an
    # enclosed region needs it
    pending: object = None
    rng: bool = False           # its last input is the forward's RNG state (Traced.rng)

    def settle(self) -> bool:
        """Its static trace made (if pending); False where that trace declines (or draws
        random numbers where the region it stood in for did not, or the other way round: its
        inputs would not match)."""
        if self.pending is not None:
            t, self.pending = self.pending(), None
            if t is None or t.rng != self.rng:
                self.traced = None
                return False
            self.traced, self.consumed, self.saved_meta = t.gm, t.consumed, t.saved_meta
        return self.traced is not None


@dataclasses.dataclass(frozen=True, eq=False)
class _Outer:
    """An input of a nested region: tensor k its enclosing region `region` saves."""
    region: Region
    k: int


@dataclasses.dataclass(frozen=True)
class Sac:
    """A SAC region's storage as its trace reads it (Note [Selective recomputation])."""
    sig: tuple          # per op: per index, its verdict and saved outputs' metadata
    answers: dict       # (op, index) -> None (recompute) | (spec, leaves: ("t", k) | ("c", v))
    tensors: list       # the saved outputs' tensors (Box inputs), k-th is ("t", k)


@dataclasses.dataclass(frozen=True)
class Traced:
    gm: torch.fx.GraphModule
    consumed: tuple     # SAC entries the trace answered, in order
    rng: bool = False   # its random ops draw from an RNG state input (the last one)
    saved_meta: tuple = ()  # per output: (shape, stride, dtype, device, requires_grad)
    # no buffer write, no SAC: its recomputation may be traced again with symbolic sizes
    # (Note [Symbolic recomputation]; random ops drawing from the state chain there too)
    retraceable: bool = False


_LIFT_FRESH_COPY = torch.ops.aten.lift_fresh_copy.default
_COPY = torch.ops.aten.copy_.default
_TRACED: dict = {}      # region key -> Traced | None (declined)
# region keys without sizes (_size_free) whose recomputation was traced symbolically -> whether
# it draws random numbers: a key that differs from one only in sizes is traced when a static
# graph needs it (Region.pending)
_SYMBOLIC: dict = {}
_MAX_TRACED = 256
# a pending region's trace until it is made, by whether it draws random numbers
_PENDING = {r: Traced(None, (), rng=r, retraceable=True) for r in (False, True)}


def _module_of(fn):
    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module) and getattr(fn, "__func__", None) in (
            type(owner).__call__, type(owner).forward):
        return owner
    return None


def _tree_key(module) -> tuple | None:
    """Per submodule (with duplicates): name, class, plain attributes; None if a class is not
    traceable, a module has a hook, or an attribute is not a plain value."""
    out = []
    for name, m in module.named_modules(remove_duplicate=False):
        cls = type(m)
        if not (cls.__module__.startswith("torch.nn.modules.")
                or cls.__dict__.get("compiled_bw_traceable", False) is True):
            return None
        if _has_hooks(m):
            return None
        d = vars(m)
        attrs = []
        for k, v in d.items():
            if k in _INTERNAL or k in inert.HOOK_DICTS:
                continue
            pk = plain_key(v)
            if pk is NOT_PLAIN:
                return None
            attrs.append((k, pk))
        # the class's forward by identity: one patched on the class between steps (the
        # instance's own `forward` attribute is not a plain value, so it declines above)
        out.append((name, cls, cls.forward, tuple(attrs)))
    return tuple(out)


def _frame_ok(frame) -> dict | None:
    """The recompute closure's variables if its settings allow tracing, else None."""
    if frame.unpack_error_cb is not None or frame.metadata_fn is not ckpt.default_meta_extractor:
        return None
    cv = ckpt.closure_vars(frame.recompute_fn)
    if not all(n in cv for n in ckpt.RECOMPUTE_VARS):
        return None
    for n, absent in ckpt.RECOMPUTE_DEFAULTS.items():
        cv.setdefault(n, absent)
    if cv["is_non_strict_tracing"] or cv["is_fx_tracing"]:
        return None
    rc = cv["recompute_context"]
    if not (ckpt.is_noop_context(rc) or ckpt.sac_storage(rc) is not None) or \
            not ckpt.is_noop_context(cv["device_ctx"]):
        return None
    if cv["cpu_autocast_kwargs"]["enabled"]:
        return None
    dev = cv["device_autocast_kwargs"]
    if dev is not None and dev["enabled"]:
        return None
    return cv


_NO_KWARGS = (pytree.tree_flatten({})[1], (), ())


def _call_kwargs(kwargs: dict, tensor_meta):
    """Note [Checkpoint keyword arguments]: (spec, leaves, key) of the keyword arguments
    `checkpoint(fn, *args, **kwargs)` was called with -- leaves ("t", tensor) or ("v", plain
    value) --, or None where a leaf is neither."""
    if not kwargs:      # the usual call: no flattening on every walk of every region
        return _NO_KWARGS
    leaves, spec = pytree.tree_flatten(dict(kwargs))
    out, key = [], []
    for v in leaves:
        if isinstance(v, torch.Tensor):
            out.append(("t", v))
            key.append((tensor_meta(v), v.requires_grad))
        else:
            pk = plain_key(v)
            if pk is NOT_PLAIN:
                return None
            out.append(("v", v))
            key.append(pk)
    return spec, out, (str(spec), tuple(key))


def _autocast() -> bool:
    """Autocast on around the backward: the graph's ops would be cast, eager's recomputation
    runs with the forward's autocast state (decline rather than reason about both)."""
    return torch.is_autocast_enabled("cpu") or (
        torch.cuda.is_available() and torch.is_autocast_enabled("cuda"))


def _sac(storage, mutable: bool, tensor_meta) -> Sac | None:
    """Note [Selective recomputation]: the storage's verdicts and saved outputs, or None where
    eager's lookup would raise or the trace could not stand in for it."""
    sig, answers, tensors = [], {}, []
    for op, entries in storage.items():
        if not isinstance(op, OpOverload):
            return None
        per = []
        for idx in sorted(entries):
            e = entries[idx]
            if e is ckpt.RECOMPUTE:
                answers[(op, idx)] = None
                per.append((idx, None))
                continue
            if e is ckpt.CONSUMED:
                return None
            leaves, spec = pytree.tree_flatten(e)
            out, meta = [], []
            for lf in leaves:
                if type(lf) is not ckpt.VersionWrapper or ckpt.hooked_entry(lf):
                    return None
                v = lf.val
                if isinstance(v, torch.Tensor):
                    if type(v) is not torch.Tensor or (
                            lf.version is not None and not mutable and v._version != lf.version):
                        return None
                    out.append(("t", len(tensors)))
                    meta.append(tensor_meta(v))
                    tensors.append(v)
                    continue
                pk = plain_key(v)
                if pk is NOT_PLAIN:
                    return None
                out.append(("c", v))
                meta.append(pk)
            answers[(op, idx)] = (spec, tuple(out))
            per.append((idx, str(spec), tuple(meta)))
        sig.append((op, tuple(per)))
    return Sac(tuple(sig), answers, tensors)


def _answer(sac: Sac, saved: list, op, idx: int):
    """SacReplay's lookup while tracing: None (trace the op) or its saved outputs."""
    if (op, idx) not in sac.answers:
        raise ckpt.SacMismatch(f"{op} call {idx} has no entry in the forward's storage")
    a = sac.answers[(op, idx)]
    if a is None:
        return None
    spec, leaves = a
    return pytree.tree_unflatten([saved[v] if k == "t" else v for k, v in leaves], spec)


def _region(w, i: int, frame, number: int, tensor_meta) -> Region | None:
    if ckpt.RECOMPUTE_OFF is not None:      # this release's checkpoint: torchapi/checkpoint.py
        w.feature_notes.add(ckpt.RECOMPUTE_OFF)
        return None
    if ckpt.get_graph_exec_group() is not None or ckpt.global_module_hooks() or _autocast():
        return None
    cv = _frame_ok(frame)
    if cv is None:
        if ckpt.SAC_OFF is not None and ckpt.is_sac_context(
                ckpt.closure_vars(frame.recompute_fn).get("recompute_context")):
            w.feature_notes.add(ckpt.SAC_OFF)   # Note [SAC storage format]
        return None
    fn = cv["fn"]
    module = _module_of(fn)
    tree = None if module is None else _tree_key(module)
    call = None
    if tree is None:                    # not opted in: Note [Guarded recomputation]
        got = guarded.callee(fn)
        if got is None:
            return None
        module, fkey, call = got
        if inert.active(module):     # Note [Inert hooks]
            return None
    args, arg_sig = [], []
    for a in frame.saved_args:
        if isinstance(a, torch.Tensor) or not hasattr(a, "unpack"):
            pk = plain_key(a)
            if pk is NOT_PLAIN:
                return None
            args.append(a)
            arg_sig.append(pk)
            continue
        if a.unpack_hook is not None:
            # saved by an enclosing region (Note [Nested regions]), else under user hooks
            # (their unpack runs: declined)
            outer = _outer_arg(w, i, a, tensor_meta)
            if outer is None:
                return None
            args.append(outer)
            arg_sig.append(("outer", outer.region.saved_meta[outer.k]))
            continue
        try:
            t = a.unpack()
        except RuntimeError:                # freed or modified: eager's unpack says so
            return None
        args.append(t)
        arg_sig.append((tensor_meta(t), t.requires_grad))
    ckw = _call_kwargs(cv["kwargs"], tensor_meta)
    if ckw is None:
        return None
    kw_spec, kw_leaves, kw_key = ckw
    state = ckpt.forward_rng_state(cv)     # Note [Functional RNG in recomputation]
    sac = None
    stored = ckpt.sac_storage(cv["recompute_context"])
    if stored is not None:
        sac = _sac(*stored, tensor_meta)
        if sac is None:
            return None
    nested = any(type(a) is _Outer for a in args)
    shown = _stand_ins(args) if nested and call is not None else args
    extra = {}
    if call is not None:
        extra = guarded.partial_tensors(fn)
        cap = guarded.lookup(fn, fkey, tuple(shown), cv["kwargs"],
                             judging=functools.partial(inert.hidden, module))
        if cap is None:
            return None
        # Dynamo guards the module's attributes, not its classes' `forward`s: a forward
        # patched on a class between steps would reuse the capture (a stale graph)
        tree = ("guarded", cap.number, tuple(type(m).forward for m in module.modules()))
    params = list(module.named_parameters())
    buffers = list(module.named_buffers())
    sig = (tree, tuple((n, tensor_meta(t), t.requires_grad) for n, t in params + buffers),
           len(params), tuple(arg_sig), len(frame.weak_holders),
           tuple(tuple(sorted(m.items())) for m in frame.x_metadatas),
           tuple((k, str(spec), tuple((tensor_meta(t), t.requires_grad) for t in ts))
                 for k, (spec, ts) in extra.items()),
           bool(frame.early_stop), None if sac is None else sac.sig, state is not None,
           kw_key)
    try:
        hash(sig)
    except TypeError:
        return None
    def trace(shown=shown):
        if nested and shown is args:
            shown = _stand_ins(args)
        traced = _trace_region(module, params + buffers, shown, frame, call, extra, sac,
                               rng_ok=state is not None, call_kw=(kw_spec, kw_leaves),
                               first_buffer=len(params))
        if len(_TRACED) >= _MAX_TRACED:
            _TRACED.clear()
        _TRACED[sig] = traced
        return traced
    pending = None
    if sig in _TRACED:
        traced = _TRACED[sig]
    elif not nested and _size_free(sig) in _SYMBOLIC:   # Note [Symbolic recomputation]
        traced, pending = _PENDING[_SYMBOLIC[_size_free(sig)]], trace
    else:
        traced = trace()
    del shown
    if traced is None:
        return None
    holder_index = {}
    for k, ref in enumerate(frame.weak_holders):
        h = ref()
        if h is not None:
            holder_index[id(h)] = k
    keys, tensors = [], []
    for j, (n, t) in enumerate(params + buffers):
        keys.append((i, ATTR, (number, j, n)))
        tensors.append(t)
    ins = list(keys)    # `traced`'s inputs: the state, the arguments, then the rest of `keys`
    j = len(params) + len(buffers)
    for a in args:
        if type(a) is _Outer:
            ins.append(a)
        elif isinstance(a, torch.Tensor):
            keys.append((i, ATTR, (number, j, f"arg{j - len(params) - len(buffers)}")))
            tensors.append(a)
            ins.append(keys[-1])
            j += 1
    rest = len(keys)
    for k, (_, ts) in extra.items():
        for m, t in enumerate(ts):
            keys.append((i, ATTR, (number, j, f"kw_{k}" if len(ts) == 1 else f"kw_{k}{m}")))
            tensors.append(t)
            j += 1
    for m, t in enumerate(t for kind, t in kw_leaves if kind == "t"):
        keys.append((i, ATTR, (number, j, f"ckw{m}")))
        tensors.append(t)
        j += 1
    for k, t in enumerate(sac.tensors if sac is not None else ()):
        keys.append((i, ATTR, (number, j, f"sac{k}")))
        tensors.append(t)
        j += 1
    if traced.rng:      # the forward's RNG state: the region's draws start from it
        keys.append((i, ATTR, (number, j, "rng")))
        tensors.append(state)
    ins += keys[rest:]
    retrace = None
    if traced.retraceable:      # Note [Symbolic recomputation]
        rgs = [t.requires_grad for _, t in params + buffers]
        rgs += [a.region.saved_meta[a.k][4] if type(a) is _Outer else a.requires_grad
                for a in args if type(a) is _Outer or isinstance(a, torch.Tensor)]
        rgs += [t.requires_grad for _, ts in extra.values() for t in ts]
        rgs += [t.requires_grad for kind, t in kw_leaves if kind == "t"]
        retrace, _, _ = _recomputation(module, [n for n, _ in params + buffers], args, frame,
                                       call, extra, None, (kw_spec, kw_leaves), rgs)
        if traced.rng:      # its draws from the state input, the last (rng.py Note
            retrace = _drawing(retrace)     # [Functional RNG in a symbolic recomputation])
    return Region(weakref.ref(frame), number, sig, traced.gm, keys, holder_index,
                  traced.consumed, ins=ins, saved_meta=traced.saved_meta, inputs=tensors,
                  retrace=retrace, pending=pending, rng=traced.rng,
                  sites=_sig_sites(args, extra, kw_leaves, keys, len(params) + len(buffers)))


def _sig_sites(args: list, extra: dict, kw_leaves, keys: list, n_state: int) -> dict:
    """Where in a region's key (_region's `sig`) each of its input tensors' metadata
    (walk.py tensor_meta) is -> that input's saved_node key (Note [Symbolic recomputation])."""
    out = {}
    it = iter(keys[n_state:])
    for a, x in enumerate(args):
        if isinstance(x, torch.Tensor):
            out[(SIG_ARGS, a, 0)] = next(it)
    for e, (_, ts) in enumerate(extra.values()):
        for m in range(len(ts)):
            out[(SIG_EXTRA, e, 2, m, 0)] = next(it)
    for m, (kind, _) in enumerate(kw_leaves):
        if kind == "t":
            out[(SIG_KWARGS, 1, m, 0)] = next(it)
    return out


def _outer_arg(w, i: int, a, tensor_meta) -> _Outer | None:
    """Note [Nested regions]: the _Outer of a region's saved argument `a` that the enclosing
    region packed (its frame's holder), or None where that region is not traced here."""
    frame = ckpt.checkpoint_frame(a.unpack_hook)
    if frame is None or type(a.data) is not ckpt.Holder:
        return None
    outer = _region_of(w, i, frame, tensor_meta)
    if outer is None or not outer.settle() or outer.consumed:
        # (consumed: a SAC region's entries, consumed by its nodes)
        return None
    k = outer.holder_index.get(id(a.data))
    return None if k is None else _Outer(outer, k)


def _stand_ins(args: list) -> list:
    """args with each _Outer replaced by an uninitialized tensor of its metadata: what the
    region's trace and Dynamo's guards are shown (freed when they are done with it)."""
    out = []
    for a in args:
        if type(a) is _Outer:
            shape, stride, dtype, device, rg = a.region.saved_meta[a.k]
            a = torch.empty_strided(shape, stride, dtype=dtype, device=device).requires_grad_(rg)
        out.append(a)
    return out


def _region_of(w, i: int, frame, tensor_meta) -> Region | None:
    """The walk's Region of a checkpoint frame (made at its first sight), None if declined."""
    regions = w.regions
    reg = regions.get(id(frame), False)
    if reg is False:
        number = len(regions)
        regions[id(frame)] = None       # its number is taken (an enclosing region's is next)
        reg = regions[id(frame)] = _region(w, i, frame, number, tensor_meta)
    return reg


def _is_random(node) -> bool:
    """Whether a graph node draws random numbers (rng.is_random)."""
    return rng.is_random(node.target, node.args, node.kwargs)


def _mutates(node) -> bool:
    t = node.target
    return isinstance(t, OpOverload) and t._schema.is_mutable


def _has_hooks(m) -> bool:
    """Whether module `m` itself has an instance hook."""
    d = vars(m)
    return any(d.get(h) for h in inert.HOOK_DICTS)


class _Adapter(torch.nn.Module):
    """A guarded region's call as a module, for functional_call: `target` is the region's
    module (its parameters and buffers are `target.<name>`)."""

    def __init__(self, target, call, mode=None) -> None:
        super().__init__()
        self.target = target
        self.call = call
        self.mode = mode        # SacReplay of a SAC region: around the call only, as eager's

    def forward(self, args, extra):
        with self.mode if self.mode is not None else contextlib.nullcontext():
            return self.call(self.target, args, extra)


def _call_module(m, args, kwargs):
    return m(*args, **kwargs)


class _Stop(Exception):
    """Early stop: the region's last saved tensor is recorded."""


def _recomputation(module, names: list, args: list, frame, call, extra: dict, sac,
                   call_kw: tuple, rgs: list):
    """(f, recorded_rg, last_mode): f(*flat) recomputes the region on `flat` (its state tensors, tensor
    args, the partial's keyword tensors, the call's keyword tensors, a SAC region's saved
    outputs) and returns the tensors it saves in pack order; recorded_rg their
    requires_grad and last_mode[0] its SacReplay (the entries it consumed), both of the last
    call.  Holds no tensor of `args`, `extra` or `call_kw`
    (only where tensors go): a Region keeps f for the symbolic trace (Note [Symbolic
    recomputation]) without keeping the step's tensors alive."""
    kw_spec, kw_leaves = call_kw
    is_t = [isinstance(a, torch.Tensor) or type(a) is _Outer for a in args]
    arg_tpl = [None if t else a for a, t in zip(args, is_t, strict=True)]
    extra_tpl = [(k, spec, len(ts)) for k, (spec, ts) in extra.items()]
    kw_tpl = [(kind, None if kind == "t" else v) for kind, v in kw_leaves]
    n_names = len(names)
    recorded: list = []
    recorded_rg: list = []
    stop_at = len(frame.weak_holders) if frame.early_stop else -1
    frame_mode = [None]
    del args, extra, kw_leaves

    def pack(x):
        recorded_rg.append(x.requires_grad)
        recorded.append(x.detach() if x.requires_grad else x)
        if len(recorded) == stop_at:    # eager's recomputation stops here (early stop)
            raise _Stop

    def unpack(_x):
        raise RuntimeError("compiled_bw: a tensor saved while tracing a checkpointed region "
                           "was unpacked (a backward inside the region)")

    def f(*flat):
        flat = [t.requires_grad_() if rg else t for t, rg in zip(flat, rgs, strict=True)]
        params = dict(zip(names, flat[:n_names], strict=True))
        it = iter(flat[n_names:])
        cargs = tuple(next(it) if t else a for a, t in zip(arg_tpl, is_t, strict=True))
        kw = {k: pytree.tree_unflatten([next(it) for _ in range(n)], spec)
              for k, spec, n in extra_tpl}
        # the call's own keywords after the partial's, as `partial(...)(**kwargs)` merges
        kw.update(pytree.tree_unflatten(
            [next(it) if kind == "t" else v for kind, v in kw_tpl], kw_spec))
        mode = None
        if sac is not None:     # Note [Selective recomputation]
            mode = ckpt.SacReplay(functools.partial(_answer, sac, list(it)))
        frame_mode[0] = mode
        recorded.clear()
        recorded_rg.clear()
        # GroupedMmOnFakes: graph/fake_ops.py Note [Grouped mm on fake tensors]
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, unpack), \
                GroupedMmOnFakes():
            try:
                if call is None and mode is None:
                    torch.func.functional_call(module, params, cargs, kw)
                else:
                    torch.func.functional_call(
                        _Adapter(module, call or _call_module, mode),
                        {f"target.{n}": t for n, t in params.items()}, (cargs, kw))
            except _Stop:
                pass
        out = list(recorded)
        recorded.clear()
        return out
    return f, recorded_rg, frame_mode


def _drawing(f):
    """A recomputation f(*flat) whose random ops draw from a state input after `flat`
    (graph/rng.py Note [Functional RNG in a symbolic recomputation])."""
    def drawing(*flat_and_state):
        with rng.DrawsFrom(flat_and_state[-1]):
            return f(*flat_and_state[:-1])
    return drawing


def _trace_region(module, state: list, args: list, frame, call=None, extra=None, sac=None,
                  *, rng_ok: bool, call_kw: tuple, first_buffer: int):
    """The region's recomputation as an aten graph (a Traced): inputs (state tensors, tensor
    args, the partial's keyword tensors, the call's keyword tensors, a SAC region's saved
    outputs), outputs the tensors it saves in pack order; None where Note [Traced
    recomputation] declines.  `call` (a guarded region, guarded.callee) runs it, else the
    module's __call__.  `call_kw`: the call's keywords as _call_kwargs' (spec, leaves).
    `state[first_buffer:]` are the module's buffers."""
    extra = extra or {}
    _, kw_leaves = call_kw
    names = [n for n, _ in state]
    tensors = [t for _, t in state] + [a for a in args if isinstance(a, torch.Tensor)] + \
        [t for _, ts in extra.values() for t in ts] + \
        [t for kind, t in kw_leaves if kind == "t"] + (sac.tensors if sac is not None else [])
    rgs = [t.requires_grad for t in tensors]
    f, recorded_rg, last_mode = _recomputation(module, names, args, frame, call, extra, sac,
                                               call_kw, rgs)

    before = _tree_key(module)
    # Notes [Dispatch state after a failed trace], [Meta failures are our fallbacks]
    with kept_dispatch_state(), fake_work.ours():
        try:
            gm = make_fx(f, tracing_mode="fake")(*[t.detach() for t in tensors])
        except Exception as e:  # noqa: BLE001 -- data-dependent, unsupported: runs eagerly
            traceback.clear_frames(e.__traceback__)
            return None
    if _tree_key(module) != before:
        return None
    out = gm.graph.find_nodes(op="output")[0].args[0]
    if len(out) != len(frame.weak_holders):
        return None
    saved_meta = []
    for o, meta, rg in zip(out, frame.x_metadatas, recorded_rg, strict=True):
        v = o.meta.get("val")
        if v is None or (tuple(v.shape), v.dtype, v.device) != (
                tuple(meta["shape"]), meta["dtype"], meta["device"]):
            return None
        saved_meta.append((tuple(v.shape), tuple(v.stride()), v.dtype, v.device, rg))
    random = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and _is_random(node):
            random = True
        if node.op == "get_attr" and call is not None and not all(
                u.target is _LIFT_FRESH_COPY for u in node.users):
            # a tensor read from elsewhere: its value is not guarded.  One the region made
            # from Python values (DeBERTa's `torch.tensor(size)`, Falcon's) reaches the
            # graph only through lift_fresh_copy, and Dynamo guards what those values read.
            return None
    if random and not rng_ok:   # Note [Functional RNG in recomputation]
        return None
    writes = _buffer_writes(gm, range(first_buffer, len(state)), tensors)
    if writes is None:
        return None
    mutates = any(n.op == "call_function" and _mutates(n) for n in gm.graph.nodes)
    if random or writes or mutates:
        # in-place ops on tensors the region made (a GRU cell's sigmoid_) become functional;
        # a mutation of an input stays a copy_ into it: a buffer's becomes an assign
        # (graph/mutated.py Note [Buffer writes at the recomputation point])
        _functional_batch_norms(gm)
        gm = _functionalized(gm, tensors)
        if gm is None or not _assigned(gm, writes) or \
                (random and not rng.rewrite(gm, _is_random)):
            return None
    if any(n.op == "call_function" and (_is_random(n) or _mutates(n)) for n in gm.graph.nodes):
        return None
    gm.graph.eliminate_dead_code()
    gm.recompile()
    mode = last_mode[0]
    return Traced(gm, tuple(mode.consumed) if mode is not None else (), random,
                  tuple(saved_meta), not (writes or sac is not None))


# Ops that write the running stats their schema does not declare (eager bumps no version for
# them): op -> (positions of the stats, position of `training` or None).  native_batch_norm's
# writes are rewritten (_functional_batch_norms); a region where another one writes an input
# is declined (cuDNN's and MIOpen's batch norm, SyncBatchNorm's gather).
_aten = torch.ops.aten
_HIDDEN_WRITES = {_aten.native_batch_norm.default: ((3, 4), 5),
                  _aten.cudnn_batch_norm.default: ((3, 4), 5),
                  _aten.miopen_batch_norm.default: ((3, 4), 5),
                  _aten.batch_norm_update_stats.default: ((1, 2), None),
                  _aten.batch_norm_gather_stats.default: ((3, 4), None),
                  _aten.batch_norm_gather_stats_with_counts.default: ((3, 4), None)}
_BN = _aten.native_batch_norm.default
_BN_FUNCTIONAL = _aten._native_batch_norm_legit_functional.default


def _hidden_writes(n) -> list:
    """The running stats an op of _HIDDEN_WRITES writes (those that are not None)."""
    if n.op != "call_function" or n.target not in _HIDDEN_WRITES:
        return []
    stats, training = _HIDDEN_WRITES[n.target]
    if training is not None and not n.args[training]:
        return []
    return [n.args[k] for k in stats if k < len(n.args) and n.args[k] is not None]


def _buffer_writes(gm, buffers, tensors: list) -> dict | None:
    """graph/mutated.py Note [Buffer writes at the recomputation point]: {input position: eager's
    version bumps} of the buffers the region's (unfunctionalized) graph writes, each written by
    one op, or None where it writes another input, a buffer that requires grad, one buffer
    twice, or where an op of _HIDDEN_WRITES other than native_batch_norm writes one (not
    rewritten)."""
    phs = {n: k for k, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    buffers = set(buffers)
    written: dict = {}
    for n in gm.graph.nodes:
        hidden = _hidden_writes(n)
        if hidden:
            if n.target is not _BN and any(input_of(a, phs) is not None for a in hidden):
                return None
            args, bumps = hidden, 0
        elif n.op == "call_function" and _mutates(n):
            args, bumps = written_args(n), 1
        else:
            continue
        for a in args:
            k = input_of(a, phs)
            if k is None:
                continue        # a tensor the region made
            if k not in buffers or tensors[k].requires_grad or k in written:
                return None
            written[k] = bumps
    return written


def _functional_batch_norms(gm) -> None:
    """Each training native_batch_norm writing running stats becomes
    _native_batch_norm_legit_functional (the same kernel on copies of the stats) and a copy_
    of its new stats into them (which _assigned makes assigns with 0 bumps, as eager's)."""
    for n in list(gm.graph.nodes):
        if n.target is not _BN or len(_hidden_writes(n)) != 2:
            continue
        with gm.graph.inserting_after(n):
            f = gm.graph.call_function(_BN_FUNCTIONAL, n.args, n.kwargs)
        n.replace_all_uses_with(f)
        gm.graph.erase_node(n)
        with gm.graph.inserting_after(f):
            rv = gm.graph.call_function(operator.getitem, (f, 4))
            rm = gm.graph.call_function(operator.getitem, (f, 3))
        with gm.graph.inserting_after(rv):
            gm.graph.call_function(_COPY, (f.args[4], rv))
            gm.graph.call_function(_COPY, (f.args[3], rm))
    gm.recompile()


def _assigned(gm, writes: dict) -> bool:
    """graph/mutated.py Note [Buffer writes at the recomputation point]: the functionalized
    graph's `copy_`s into the buffers in `writes` (one each, into the placeholder itself)
    become assigns with eager's bumps; False where any other copy_ into an input is left."""
    phs = {n: k for k, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    seen = set()
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not _COPY:
            continue
        dst = n.args[0]
        k = phs.get(dst)
        if k is None or k not in writes or k in seen or n.kwargs or len(n.args) != 2:
            return False
        seen.add(k)
        with gm.graph.inserting_before(n):
            a = gm.graph.call_function(assign, (dst, n.args[1], writes[k]))
        a.meta["val"] = None
        n.replace_all_uses_with(dst)
        gm.graph.erase_node(n)
    gm.recompile()
    return seen == set(writes)


def _functionalized(gm, tensors: list):
    """The region's graph with its in-place ops made functional (dropout's `bernoulli_` on a
    fresh tensor becomes `bernoulli`); a mutation of an input stays a `copy_` into it (the
    caller declines it).  None if the retrace fails."""
    with kept_dispatch_state(), fake_work.ours():
        try:
            return make_fx(torch.func.functionalize(gm), tracing_mode="fake")(
                *[t.detach() for t in tensors])
        except Exception as e:  # noqa: BLE001 -- the region keeps the per-node path
            traceback.clear_frames(e.__traceback__)
            return None


def checkpoint_entry(w, i: int, node, attrs, entry: list, tensor_meta) -> bool:
    """If every hooked saved tensor of built-in node i is a holder of one traceable checkpoint
    region: its signature part into `entry` (the region's inputs into w.saved on its first
    node), True; else False (the node runs hooked)."""
    regions = getattr(w, "regions", None)
    if regions is None:
        return False
    frame, holders = None, []
    for a in attrs:
        r = raw_saved(node, a)
        for raw in (r if isinstance(r, (list, tuple)) else (r,)):
            if raw is None:
                holders.append(None)
                continue
            hook, p = raw.unpack_hook, raw.data
            if hook is None and p is None:
                holders.append(None)
                continue
            f = ckpt.checkpoint_frame(hook)
            if f is None or (frame is not None and f is not frame) or type(p) is not ckpt.Holder:
                return False
            frame = f
            holders.append(p)
    if frame is None:
        return False
    reg = _region_of(w, i, frame, tensor_meta)
    if reg is None:
        return False
    ks = tuple(None if h is None else reg.holder_index.get(id(h)) for h in holders)
    if any(k is None and h is not None for k, h in zip(ks, holders, strict=True)):
        return False
    # each region's key once, at its first mention (walk order is fixed by the signature)
    entry.append((ATTR, _emit(w, reg), ks))
    reg.nodes.append(i)
    w.slot_only.append((i, ATTR, -1))   # released after the run when executed (holders)
    return True


def _emit(w, reg: Region) -> tuple:
    """A region's part of the signature: its number, and at its first mention its key and
    where its nested inputs come from (each enclosing region's part, Note [Nested regions]);
    its inputs join the Box's then, so a region the signature does not hold has none there."""
    if reg.emitted:
        return (reg.number,)
    reg.emitted = True
    w.saved.extend(reg.inputs)
    w.saved_node.extend(reg.keys)
    reg.inputs = None
    return (reg.number, reg.sig,
            tuple((a.k, _emit(w, a.region)) for a in reg.ins if type(a) is _Outer))


def is_checkpointed(node, attrs) -> bool:
    """Whether a node's saved tensors are non-reentrant checkpoint holders (the C++ walk then
    gives the step to the Python walk, which traces regions)."""
    for a in attrs:
        r = raw_saved(node, a)
        for raw in (r if isinstance(r, (list, tuple)) else (r,)):
            if raw is not None and ckpt.checkpoint_frame(raw.unpack_hook) is not None:
                return True
    return False


def has_traced_recomputation(gm) -> bool:
    """Whether a captured graph holds traced region inputs (placeholders named by trace.py's
    _name_inputs with INPUT_PREFIX)."""
    return any(n.name.startswith(INPUT_PREFIX) for n in gm.graph.find_nodes(op="placeholder"))


def release_regions(w, plan) -> None:
    """Before a run with retain_graph=False: free the saved variables (holders) of every node
    of a traced region that the graph computes, as eager frees them after the node ran, so
    the region's frame and saved arguments die with the Box's last use of them (else they
    would live until the run is over)."""
    regions = getattr(w, "regions", None)
    if not regions:
        return
    computed = set(plan.executed) - {s.node_index for s in plan.opaque_sites}
    for reg in regions.values():
        if reg is None:
            continue
        for i in reg.nodes:
            if i in computed:
                release_node(w.nodes[i])


def consume_saved(w, plan) -> None:
    """Before a run: the SAC entries each traced region's recomputation reads become CONSUMED
    where the graph computes one of its nodes, as eager's lookup marks them when it
    recomputes (Note [Selective recomputation])."""
    regions = getattr(w, "regions", None)
    if not regions:
        return
    computed = None
    for reg in regions.values():
        if reg is None or not reg.consumed:
            continue
        if computed is None:
            computed = set(plan.executed) - {s.node_index for s in plan.opaque_sites}
        frame = reg.frame()
        if frame is None or not any(i in computed for i in reg.nodes):
            continue
        storage, _ = ckpt.sac_storage(ckpt.closure_vars(frame.recompute_fn)["recompute_context"])
        for op, idx in reg.consumed:
            storage[op][idx] = ckpt.CONSUMED


class RegionSlot:
    """The Slot (saved.py Note [Slots]) of a region input: the Box owns the tensor; the node's
    holders are freed with the node (runtime/run.py releases executed nodes)."""
    __slots__ = ("placeholder",)

    def __init__(self) -> None:
        self.placeholder = None

    def release(self) -> None:
        pass


# ---- while tracing ---------------------------------------------------------------------------

class _Group:
    """The graph-execution group the trace unpacks under (checkpoint keys its state by it)."""
    __slots__ = ()


class _Handle:
    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


class _Handles(dict):
    """A holder's handles while tracing: the trace's handle stays after an unpack (a formula
    traced twice unpacks twice; eager unpacks once per node and backward)."""

    def __setitem__(self, key, value) -> None:
        if value is None and type(key) is _Group:
            return
        super().__setitem__(key, value)


class _Recomputed:
    """frame.recomputed[group] while tracing: the first lookup runs the traced region on its
    placeholders (its ops land in the graph there), every lookup answers holder k's tensor."""
    __slots__ = ("all", "outs", "placeholders", "region", "sizes", "symbolic")

    def __init__(self, region: Region, placeholders: dict, all_: dict, symbolic: bool,
                 sizes: dict) -> None:
        self.region, self.placeholders, self.outs, self.all = region, placeholders, None, all_
        self.symbolic, self.sizes = symbolic, sizes

    def __contains__(self, handle) -> bool:
        return type(handle) is _Handle

    def __getitem__(self, handle):
        if self.outs is None:
            ins = [self.all[id(a.region)][_Handle(a.k)] if type(a) is _Outer
                   else self.placeholders[a] for a in self.region.ins]
            if self.symbolic and self.region.retrace is not None:
                self.outs = _symbolic(self.region, ins, self.sizes)
            elif self.region.settle():
                self.outs = self.region.traced(*ins)
            else:
                raise NotSymbolic(f"checkpoint region {self.region.number}: its trace at "
                                  "these sizes declines")
        return self.outs[handle.k]


class NotSymbolic(Exception):
    """A region's recomputation cannot be traced into this capture (its symbolic one differs
    from its forward: the graph stays static; a pending static trace declines: eager autograd
    runs the step, recorded)."""


def _symbolic(region: Region, ins: list, sizes: dict) -> list:
    """Note [Symbolic recomputation]: the region's recomputation run again on the dynamic
    trace's (symbolic) placeholders, its ops recorded into that trace; each saved tensor's
    size checked (a guard of the graph) against the forward's: `sizes` (region number, holder,
    dim) -> its SymInt input where that size varies, else the forward's number."""
    try:
        outs = region.retrace(*[t.detach() for t in ins])
    except rng.NotReplayable as e:
        raise NotSymbolic(f"checkpoint region {region.number}: {e}") from None
    metas = region.frame().x_metadatas
    if len(outs) != len(metas):
        raise NotSymbolic(f"checkpoint region {region.number}: its symbolic recomputation saved "
                          f"{len(outs)} tensors, the forward {len(metas)}")
    for k, (o, m) in enumerate(zip(outs, metas, strict=True)):
        if (o.dtype, o.device, o.dim()) != (m["dtype"], m["device"], len(m["shape"])) or \
                not all(bool(o.shape[d] == sizes.get((region.number, k, d), n))
                        for d, n in enumerate(m["shape"])):
            raise NotSymbolic(f"checkpoint region {region.number}: saved tensor {k} is "
                              f"{o.dtype}{tuple(o.shape)}, the forward's {m['dtype']}"
                              f"{tuple(m['shape'])}")
    if len(_SYMBOLIC) >= _MAX_TRACED:
        _SYMBOLIC.clear()
    _SYMBOLIC[_size_free(region.sig)] = region.rng
    return outs


def _size_free(x):
    """A region key without its sizes and strides (torch.Size, tuples of ints)."""
    if type(x) is torch.Size:
        return "<size>"
    if type(x) is tuple:
        if x and all(type(e) is int for e in x):
            return "<ints>"
        return tuple(_size_free(e) for e in x)
    return x


@contextlib.contextmanager
def tracing(w, placeholders: dict):
    """Around our engine's trace: checkpoint's unpack hook answers from the traced regions."""
    regions = [r for r in (getattr(w, "regions", None) or {}).values() if r is not None]
    if not regions:
        yield
        return
    group = _Group()
    symbolic = getattr(w, "dynamic", False)    # trace/dynamic.py DynWalk
    sizes = getattr(w, "region_sizes", {}) if symbolic else {}
    prev = ckpt.get_graph_exec_group()
    changed = []
    frames = [(reg, reg.frame()) for reg in regions]
    recs: dict = {}     # id(region) -> its _Recomputed (a nested region reads its outer's)
    try:
        for reg, frame in frames:
            frame.is_recomputed[group] = True
            frame.recomputed[group] = recs[id(reg)] = _Recomputed(reg, placeholders, recs,
                                                                  symbolic, sizes)
            for k, ref in enumerate(frame.weak_holders):
                h = ref()
                if h is not None:
                    h.handles = _Handles(h.handles)
                    dict.__setitem__(h.handles, group, _Handle(k))
                    changed.append(h)
        ckpt.set_graph_exec_group(group)
        yield
    finally:
        ckpt.set_graph_exec_group(prev)
        for _, frame in frames:
            frame.is_recomputed.pop(group, None)
            frame.recomputed.pop(group, None)
        for h in changed:
            h.handles = {k: v for k, v in h.handles.items() if k is not group}
