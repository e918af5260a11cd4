"""Dynamic graphs at run time: looked up after the static key missed, captured on a size change.

Consumes a step whose static CacheKey missed (runtime/run.py `_call`); produces (Compiled
entry bound to this step's sizes, Slots or None, the Python Walk to run it with), or None:
the static path goes on as before.  trace/dynamic.py Note [Dynamic shapes] says what is
symbolic and what the guards check.  A step whose walk key (the C++ walk's) a dynamic graph
served before is served again by one lookup (Note [Dynamic hits by walk key]); any other step
that misses the static key is walked again by the Python walk (walk.py), whose signature is
masked at the dynamic positions and looked up.
Graphs with user code inside (hooks, custom Functions, nodes run opaquely: their output
shapes are fixed in the capture), leaf hooks, tensor subclasses, other backends than "eager"
and "inductor", or a changed root grad shape stay static; AOT backwards of compiled forwards
are spliced with their symints symbolic (trace/dynamic.py Note [Dynamic AOT backwards]).
On Inductor with background compile a dynamic graph compiles in the worker (Note [Dynamic
graphs compile in the background]).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time

import torch

from ..backends.compile_worker import foreign_ops
from ..backends.eager import compile_eager
from ..graph.nodes import AOT, LEAF, TRACE
from ..passes import run_passes
from ..torchapi.dynamo import size_oblivious, symbolic_fakes, symint
from ..trace.dynamic import (
    TWO_VALUES,
    DynSpec,
    DynWalk,
    Guards,
    NotDynamic,
    all_size_paths,
    input_exprs,
    size_diff,
)
from ..trace.dynamic import values_at as _values_at
from ..trace.trace import TraceFailed, trace_backward
from . import background, warm
from .cache import Compiled
from .slots import box_owned, slots_of

# Note [Dynamic graphs compile in the background]; False: Inductor compiles a dynamic graph
# in the step that captured it
COMPILE_IN_BACKGROUND = True
STATIC = None   # step()'s answer (STATIC, slots): the static path, with these Slots
_DYN_HOW = (TRACE, LEAF, AOT)   # the node kinds a dynamic graph may hold


# Note [Dynamic hits by walk key]
# A dynamic hit found through the Python walk (step() below) walks the graph a second time in
# Python, masks its signature, looks it up and checks the guards: ~5 ms on a 2-layer
# transformer, where a static hit is one C++ walk and one dict lookup.  The step's own
# CacheKey (the C++ walk's bytes: the structure and every size, stride and saved size, also
# those the Python signature holds) decides all of that but one input of the guards: the
# storage offsets of the saved tensors they check (not in the key).  So once a dynamic graph
# served a step, that step's CacheKey remembers the answer (KnownHit: which graph, bound to
# which SymInt values, and the storage offsets it was checked with), and a later step with the
# same key -- the same sizes -- takes it after comparing those offsets (a different one: the
# Python path decides), as cheap as a static hit's lookup.  Nothing else changes the answer:
# the static key is still looked up first (a static entry of the key wins, as on the Python
# path); the Python path takes the first dynamic graph of the root whose key and guards match,
# and entries are only appended (the ones before the remembered one failed for these sizes,
# and still do); the cache and the remembered keys are cleared together.  Steps with sizes not
# seen before still take the Python path, once per set of sizes.
_KNOWN_MAX = 512    # remembered keys per cache (each holds a walk key: tens of KB on large
#                     graphs); then forgotten all at once, and remembered again as used


@dataclasses.dataclass
class KnownHit:
    bound: Compiled     # the dynamic graph's entry bound to the key's SymInt values
    offsets: tuple      # (w.saved position, storage offset) of every tensor the guards check


@dataclasses.dataclass
class DynEntry:
    base: tuple          # (root edges, root meta, options, backend): equal, or no hit
    spec: DynSpec
    compiled: Compiled   # its fn takes the box plus the SymInt inputs' values
    guards: Guards
    # (Compiled, Guards): its background Inductor compile and the guards it holds for, set at
    # once when the compile lands (Note [Dynamic graphs compile in the background])
    fast: tuple | None = None


def _base(key) -> tuple:
    return (key.root_edges, key.root_meta, key.options, key.backend)


def _eligible(state, w, key) -> bool:
    return (state.backend in ("eager", "inductor") and not key.options.leaf_observed
            and not w.hooks)


def _bound(compiled: Compiled, ints: list) -> Compiled:
    """A dynamic graph's entry for one step's sizes: its fn appends the SymInt inputs to the
    box; its C entry point (Note [C++ hit path] in runtime/run.py, an Inductor graph compiled
    with the C++ wrapper) takes them as 0-dim int64 tensors after the box (native_tail), made
    here once: the generated module's own wrapper would make them on every call."""
    fn = compiled.fn    # (fixed: the guards that chose it hold for this fn, Note [Dynamic
    #                     graphs compile in the background])

    def run(box: list) -> list:
        box.extend(ints)
        return fn(box)
    tail = tuple(torch.tensor(v, dtype=torch.int64) for v in ints) \
        if compiled.native is not None else ()
    return dataclasses.replace(compiled, fn=run, native_tail=tail)


def _choose(state, entry: DynEntry, ints: list, saved: list):
    """(Compiled, Guards) of the entry that holds for these sizes, or (None, why not): its
    background Inductor compile where that one's guards pass, else the graph it was captured
    as (the eager backend's; Note [Dynamic graphs compile in the background])."""
    fast = entry.fast   # (read once: the job thread sets it)
    if fast is not None:
        why = fast[1].check(ints, saved)
        if why is None:
            return fast
    why_not = entry.guards.check(ints, saved)
    if why_not is not None:
        return None, why_not
    if fast is not None:
        state.note(f"a guard that Inductor's background compile of a dynamic graph added "
                   f"failed, these sizes run it on the eager backend: {why}")
    return entry.compiled, entry.guards


def step(state, w, root_edges, opts, grad_tensors, key, root_key):
    """(Compiled bound to this step's sizes, Slots or None, walk) for a dynamic hit or fresh
    capture; (STATIC, Slots): a dynamic capture failed, the static path captures with the
    Slots it installed;
    None: the static path goes on as if this module did not exist."""
    known = state.cache.dynamic_keys.get(key)   # Note [Dynamic hits by walk key]
    if known is not None and _offsets_match(w, known.offsets):
        state.cache.last[root_key] = key
        state.stats.cache_hits += 1
        state.cache.hit(root_key)
        state.stats.dynamic_hits += 1
        return known.bound, None, w
    # unpack calls (calls/unpacked.py) stay in static graphs
    if any(k.hooked for k in w.kinds) or not _eligible(state, w, key) or \
            any(k.how not in _DYN_HOW for k in w.kinds):
        why = _why_static(state, w, key, root_key)
        if why is not None:     # runtime/cache.py Note [Recapture storms]
            state.cache.static_sizes(root_key, why)
        return None     # (before a second walk: custom Functions' and hooked nodes' state)
    base = _base(key)
    cache = state.cache
    if state.dynamic is not True and (root_key, base) not in cache.last_py and \
            not cache.dynamic.get(root_key):
        # the first miss of this root: the walk below would only be remembered, and a
        # stored graph holds it (runtime/warm.py Note [Stored walk signature])
        stored = warm.stored_walk_signature(state, key, key.options)
        if stored is not None:
            cache.last_py[(root_key, base)] = (base, stored, key)
            return None
    pw = w.python_walk(root_edges)
    if pw is None or pw.hooks or any(k.how not in _DYN_HOW for k in pw.kinds):
        return None
    if pw is not w and list(w.saved_node) != list(pw.saved_node):
        return None     # (the run uses w: its saved tensors must be the Python walk's)
    for entry in cache.dynamic.get(root_key, ()):
        if entry.base != base or not entry.spec.matches(pw.signature):
            continue
        vals = _values_at(pw.signature, entry.spec.paths)
        ints = [vals[k] for k in entry.spec.int_inputs]
        compiled, guards = _choose(state, entry, ints, pw.saved)
        if compiled is not None:
            cache.last[root_key] = key
            state.stats.cache_hits += 1
            state.cache.hit(root_key)
            state.stats.dynamic_hits += 1
            bound = _bound(compiled, ints)
            _remember(cache, key, bound, guards, pw)
            return bound, None, w
        state.log_recompile(f"a dynamic graph's shape guard failed: {guards}")
        if TWO_VALUES in str(guards):   # Note [One symbol for sizes that changed together]
            cache.unshared.add((root_key, base))
    if cache.pinned and (root_key, base, _structure(pw.signature)) in cache.pinned:
        return None     # Note [Dynamic graphs that pin a size]
    prev = cache.last_py.get((root_key, base))      # the last miss with the same options
    cache.last_py[(root_key, base)] = (base, pw.signature, key)
    if state.dynamic is True:
        paths = all_size_paths(pw)
    elif prev is not None and prev[0] == base:
        paths = size_diff(prev[1], pw.signature)
        if not paths:
            return None
        # the sizes that varied before vary still: one graph for all of them
        for entry in cache.dynamic.get(root_key, ()):
            if entry.base == base and _same_structure(entry.spec.masked, pw.signature):
                paths = list(paths) + list(entry.spec.paths)
    else:
        return None
    if cache.stopped(root_key, state.cache_size_limit):
        return None     # the static path says so (runtime/cache.py Note [Cache policy])
    try:
        spec = DynSpec.build(pw, paths)
    except NotDynamic as e:
        state.log_recompile(f"sizes changed but the graph stays static: {e}")
        cache.static_sizes(root_key, str(e))     # runtime/cache.py Note [Recapture storms]
        return None
    return _capture(state, w, pw, opts, grad_tensors, key, root_key, spec, base, prev)


def walk_signature(state, key, root_key):
    """The Python walk's signature step() took at this miss of `key` (the last miss under
    root_key with its options), or None (runtime/warm.py Note [Stored walk signature])."""
    prev = state.cache.last_py.get((root_key, _base(key)))
    return prev[1] if prev is not None and prev[2] is key else None


def _offsets_match(w, offsets: tuple) -> bool:
    """Whether the saved tensors at these positions have these storage offsets (read in C++
    for the C++ walk: its saved tensors stay C++ ones for the C++ hit path)."""
    if not offsets:
        return True
    pos = [s for s, _ in offsets]
    cw = getattr(w, "cw", None)
    got = cw.saved_offsets(pos) if cw is not None else [w.saved[s].storage_offset() for s in pos]
    return all(a == off for a, (_, off) in zip(got, offsets, strict=True))


def _remember(cache, key, bound: Compiled, guards: Guards, pw) -> None:
    if len(cache.dynamic_keys) >= _KNOWN_MAX:
        cache.dynamic_keys.clear()
    offsets = tuple((s, pw.saved[s].storage_offset()) for s in guards.checked_saved())
    cache.dynamic_keys[key] = KnownHit(bound, offsets)


def _why_static(state, w, key, root_key) -> str | None:
    """A graph of this root was captured before, and this one cannot be dynamic: say why (the
    static path then says what changed)."""
    if state.dynamic is False or not state.cache.count(root_key):
        return None
    if state.backend not in ("eager", "inductor"):
        why = f"backend {state.backend!r}"
    elif key.options.leaf_observed:
        why = "a leaf's grad is observed (hooks or retains_grad)"
    elif w.hooks:
        i = min(w.hooks)
        why = f"node {i} {w.kinds[i].name} has hooks"
    elif any(k.hooked for k in w.kinds):
        i = next(k for k, kind in enumerate(w.kinds) if kind.hooked)
        why = (f"node {i} {w.kinds[i].name} unpacks its saved tensors through hooks (a call of "
               "the real node)")
    else:
        i = next(k for k, kind in enumerate(w.kinds) if kind.how not in _DYN_HOW)
        why = (f"node {i} {w.kinds[i].name} is not traced from a formula here ({w.kinds[i].how}:"
               " a custom Function or a node run opaquely)")
    state.log_recompile(f"the graph stays static: {why}")
    return why


def _same_structure(masked: tuple, sig: tuple) -> bool:
    """Whether sig equals a masked signature up to ints (at the DYN positions or elsewhere)."""
    if masked == "<dyn>":
        return type(sig) is int
    if isinstance(masked, tuple):
        return (isinstance(sig, tuple) and len(masked) == len(sig)
                and all(_same_structure(a, b) for a, b in zip(masked, sig, strict=True)))
    return (type(masked) is int and type(sig) is int) or (
        type(masked) is type(sig) and masked == sig)


def _capture(state, w, pw, opts, grad_tensors, key, root_key, spec, base, prev):
    t0 = time.perf_counter()
    slots = slots_of(w)     # the step's own walk's Slots (C++ ones for the C++ walk)
    old = _old_values(pw, spec, prev)
    with background.trace_lock():
        try:
            shared = frozenset() if (root_key, base) in state.cache.unshared else \
                _shared_values(pw, spec, old)
            entry = _trace_and_compile(state, pw, opts, grad_tensors, spec, slots, base,
                                       shared)
        except Exception as e:  # noqa: BLE001 -- NotDynamic, TraceFailed, a symbolic-shape
            # failure in torch: the static capture goes on with the Slots installed here
            why = str(e) if isinstance(e, (NotDynamic, TraceFailed)) else \
                f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            state.log_recompile(f"sizes changed but the graph stays static: {why}")
            return STATIC, slots
    state.stats.compile_seconds += time.perf_counter() - t0
    changed = _describe(pw, spec, old)
    state.log_recompile(f"sizes changed, capturing a dynamic graph ({changed})")
    cache = state.cache
    pinned = _pinned_size(entry.guards) if state.dynamic is not True else None
    if pinned is not None:                  # Note [Dynamic graphs that pin a size]
        cache.pinned.add((root_key, base, _structure(pw.signature)))
        state.log_recompile(f"the dynamic graph fixes {pinned}: later size changes of this "
                            f"graph capture static graphs")
    cache.dynamic.setdefault(root_key, []).append(entry)
    cache.per_root[root_key] = cache.per_root.get(root_key, 0) + 1
    cache.last[root_key] = key
    state.stats.captures += 1
    state.stats.dynamic_captures += 1
    state.record_capture(entry.compiled)
    vals = _values_at(pw.signature, spec.paths)
    bound = _bound(entry.compiled, [vals[k] for k in spec.int_inputs])
    entry.compiled.start_compile = None     # started once, by this step (run.py)
    return bound, slots, w


# Note [Dynamic graphs that pin a size]
# A dynamic capture can come out fixing a size it made symbolic: tracing masked_select's
# backward (its grad's size is the mask's count) fixed the batch to its value (range [9, 9];
# the count stayed symbolic).  Each later batch then failed its guards and made another such
# capture -- a symbolic trace (~3x a static capture's cost) every step, and one more failing
# guard check per step after.  When a symbol of a dynamic graph is fixed to a value above 1
# (its range one value, or replaced by a number; sizes of 0 and 1 are specialized on purpose,
# trace/dynamic.py Note [Sizes of one]), later size changes of that root, options and
# structure capture static graphs instead (reused when a size repeats; the cache limit then
# runs eager autograd, with its reason).  Not with dynamic=True, where the user asked for
# symbolic sizes.
def _pinned_size(guards) -> str | None:
    """The label of a SymInt input's symbol (a size that changed) the guards fix to one value
    above 1, or None.  (A saved tensor's dims have symbols too, fixed where they never
    changed.)"""
    syms: list = []
    for e in guards.int_syms:
        syms += sorted(getattr(e, "free_symbols", ()), key=str)
    fixed = {s: e for s, e in guards.replacements if not getattr(e, "free_symbols", ())}
    for s in syms:
        r = guards.ranges.get(s)
        v = fixed.get(s, r[0] if r is not None and r[0] == r[1] else None)
        if v is not None and v > 1:
            return f"{guards.labels.get(s, s)} = {v}"
    return None


def _structure(sig):
    """The signature with every int erased (what _same_structure compares)."""
    if isinstance(sig, tuple):
        return tuple(_structure(x) for x in sig)
    return None if type(sig) is int else sig


def _old_values(pw, spec, prev) -> list | None:
    """The changed sizes' values at the root's last miss (prev), or None where there was none
    or it had another structure (with dynamic=True)."""
    if prev is None or size_diff(prev[1], pw.signature) is None:
        return None
    return _values_at(prev[1], spec.paths)


def _describe(pw, spec, old: list | None) -> str:
    new = _values_at(pw.signature, spec.paths)
    parts = []
    for k, site in enumerate(spec.sites):
        if site.what in ("leaf", "ckmeta", "ckouter") or (site.what == "saved" and site.part == 1):
            continue
        was = f"{old[k]} -> " if old is not None else ""
        parts.append(f"{site.label(pw)}: {was}{new[k]}")
    more = f"; and {len(parts) - 6} more" if len(parts) > 6 else ""
    return "; ".join(parts[:6]) + more


# Note [Size-oblivious trace that fails]
# On the eager backend the symbolic trace runs size-obliviously (trace/dynamic.py Note
# [Sizes of one]): an undecided `a == b` between two symbols is taken as false, not guarded.
# Symbols that are equal at run time but were made independently (no duck sizing: with
# `dynamic=True` every size of every saved tensor gets its own symbol, d_model's included)
# then fail a broadcasting check ("The size of tensor a (s25) must match the size of tensor b
# (s2)": nn.TransformerEncoder).  Such a trace is retried once the way the Inductor backend
# traces: 0 and 1 specialized (range [2, oo)), equalities decided by the sizes at hand and
# kept as guards, so the graph is dynamic (a batch of 1 is another capture); the recompile
# log says so.  A trace that fails that way too leaves the graph static, with its reason.

# Note [One symbol for sizes that changed together]
# Each size that changed gets a symbol of its own; the trace then has sympy prove, op by op,
# that the sizes a formula combines agree (a reshape's saved target sizes against its grad's
# size symbols, a broadcast's two operands): on the benchmark's transformer most of the
# symbolic trace.  Sizes that went from the same old value to the same new value between the
# two captures are one quantity almost always (the batch in every activation, a saved
# `self_sym_sizes[0]`), so they share one symbol from the start (ShapeEnv's duck sizing,
# DimDynamic.DUCK, which shares by value: taken only for values that one (old, new) pair has,
# so sizes with another history never merge).  Sizes equal by chance at both captures merge
# too: the graph then holds only while they stay equal (the step's Guards find "two values for
# one symbol" otherwise, and the next capture keeps them apart) -- another capture, never a
# wrong graph; after such a failure, the root's later dynamic captures share no symbol
# (`cache.unshared`), so sizes equal by chance cost one capture at most.  With dynamic=True
# (no earlier sizes) every size keeps its own symbol.

def _shared_values(pw, spec: DynSpec, old: list | None) -> frozenset:
    """Note [One symbol for sizes that changed together]: the new values of the changed
    sizes that come from one old value only (`old`: _old_values)."""
    if old is None:
        return frozenset()
    pairs: dict = {}
    for o, n in zip(old, _values_at(pw.signature, spec.paths), strict=True):
        pairs.setdefault(n, set()).add(o)
    return frozenset(n for n, olds in pairs.items() if len(olds) == 1 and isinstance(n, int))


def _trace_and_compile(state, pw, opts, grad_tensors, spec: DynSpec, slots, base,
                       shared: frozenset = frozenset()) -> DynEntry:
    roots = [g for g in grad_tensors if g is not None]
    reals = roots + list(pw.saved)
    dims = [set() for _ in roots] + [spec.saved_dims.get(s, set()) for s in range(len(pw.saved))]
    # trace/dynamic.py Note [Sizes of one]: sizes of 1 are not specialized for the eager
    # backend (the trace decides); Inductor's code is not right for them (specialized)
    oblivious = state.backend == "eager"
    while True:
        try:
            with size_oblivious() if oblivious else contextlib.nullcontext():
                _, env, fakes = symbolic_fakes(reals, dims, shared)
                vals = _values_at(pw.signature, spec.paths)
                ints = [symint(env, vals[k], f"size{n}", vals[k] in shared)
                        for n, k in enumerate(spec.int_inputs)]
                dw = DynWalk(pw, spec, ints)
                exprs = input_exprs({s: fakes[len(roots) + s] for s in spec.saved_dims}, ints)
                gm, plan = trace_backward(pw, opts, grad_tensors, slots, delivers=False,
                                          dyn=(dw, fakes, ints))
            break
        except NotDynamic:
            raise
        except Exception as e:
            if not oblivious:
                raise
            oblivious = False
            state.log_recompile(f"the size-oblivious symbolic trace failed ({str(e)[:200]}); "
                                "traced again with sizes of 0 and 1 specialized")
    if plan.opaque_sites or plan.in_layouts is not None or plan.out_layouts is not None:
        raise NotDynamic("the graph holds opaque calls or tensor subclasses")
    if not opts.accumulate and not opts.allow_unused and None in plan.capture_outputs:
        raise NotDynamic("an input of grad() is unused")
    for i, _ in plan.leaf_outputs:
        if not pw.leaves[i].requires_grad:
            raise NotDynamic(f"leaf {i} has requires_grad=False")
    gm = run_passes(gm)
    example = fakes + ints
    fn = compile_eager(gm, example)
    owned = box_owned(pw, plan)
    box_nodes = tuple(sorted({pw.saved_node[k][0] for k in owned}))
    if state.backend == "inductor" and state.background and COMPILE_IN_BACKGROUND and \
            not foreign_ops(gm):
        return _in_background(state, gm, example, DynEntry(base, spec, Compiled(
            fn, plan, gm, owned, box_nodes, n_inputs=len(example)),
            Guards(env, spec, exprs, pw)))
    if state.backend == "inductor":
        state.stats.inductor_compiles += 1
        try:
            # 1 is specialized here (range [2, oo)): size-oblivious is exact, and Inductor
            # then adds no guard for a choice its general path covers (Note [Sizes of one])
            try:
                with size_oblivious():
                    fn = state.compile_fn(gm, example)
            except Exception:  # noqa: BLE001 -- Note [Size-oblivious compile that fails]
                fn = state.compile_fn(gm, example)
        except Exception as e:  # noqa: BLE001 -- the eager backend runs it, recorded
            state.compile_failed(f"Inductor failed to compile a dynamic graph, it runs on the "
                                 f"eager backend: {type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:200]}")
    guards = Guards(env, spec, exprs, pw)     # (after the compile: with Inductor's guards)
    native = None
    if state.backend == "inductor":     # (Inductor is imported: it just compiled)
        from ..backends.inductor_artifact import native_entry
        native = native_entry(fn)
    compiled = Compiled(fn, plan, gm, owned, box_nodes, native=native, n_inputs=len(example))
    return DynEntry(base, spec, compiled, guards)


# Note [Size-oblivious compile that fails]
# Inductor's size-oblivious compile of a dynamic graph (trace/dynamic.py Note [Sizes of
# one]) can fail where a lowering asks a question only the sizes at hand answer: a slice's
# grad with a symbolic end (`x[:n // 2]`: slice_scatter's min(end, size) between independent
# symbols, "evaluate_min(s19, s1) with unbacked symints").  The graph is then compiled once
# more the ordinary way: such a question is decided by the traced sizes and kept as a shape
# guard (in the foreground in the graph's ShapeEnv, which Guards reads after the compile; in
# the worker among the guards it sends back, backends/compile_worker.py), so a step's sizes
# that answer it otherwise recapture (or, in the background, run the eager backend).  Before,
# the graph ran on the eager backend, recorded as a compile failure.

# Note [Dynamic graphs compile in the background]
# A dynamic graph's Inductor compile is the most expensive one of a run (every size symbolic:
# 8.6 s of thread CPU for the benchmark's 2-layer transformer, against ~0.1 s per step), and it
# ran in the step that captured it.  Like a static graph (runtime/background.py Note
# [Background compile]) it now compiles in the worker while the eager backend runs it: the
# worker gets the graph with its symbolic fake values (GraphPickler carries the ShapeEnv; the
# SymInt placeholders get their `val`s here) and compiles it under size_oblivious(), as the
# foreground compile does (trace/dynamic.py Note [Sizes of one]).
# Inductor adds shape guards while it compiles (GPT-2: `Eq(s29, s0)` from a broadcast in its
# embedding-backward decomposition, `s6 > 16` ordering SDPA's input strides), which the
# graph's Guards, made here before the compile, do not hold.  So the worker sends back its
# ShapeEnv's guards, replacements and ranges after the compile (compile_worker.py
# _shape_env_state), and when the compile lands the entry gets `fast` = (Inductor's Compiled,
# the Guards extended with them) in one assignment: no step ever sees Inductor's code with
# the capture's guards only.  A step takes `fast` where its guards pass; sizes that pass the
# capture's guards but not Inductor's run the entry's own Compiled (the eager backend's fn),
# noted, without another capture (_choose).  A bound entry (_bound) holds the fn the guards
# chose, not the entry's current one; the walk keys remembered before the compile landed
# (bound to the eager backend's fn, Note [Dynamic hits by walk key]) are forgotten then, and
# bound again, to Inductor's code where its guards pass, at their next step.
# (The worker takes its loaded fakes as they are: make_fx fakeifying them again checked each
# one's extent against its storage, whose size GraphPickler made symbols no input binds.)

def _in_background(state, gm, example: list, entry: DynEntry) -> DynEntry:
    """Note [Dynamic graphs compile in the background]: the entry runs the eager backend's fn;
    its start_compile (run.py starts it after the first run) has Inductor compile the graph in
    the worker, size-obliviously as in the foreground; when that lands, entry.fast holds the
    compiled graph and the entry's guards plus the worker's."""
    for n, ex in zip(gm.graph.find_nodes(op="placeholder"), example, strict=True):
        n.meta.setdefault("val", ex)    # (SymInt inputs: the worker reads every input's val)
    background.start_worker()
    target = dataclasses.replace(entry.compiled)    # what the compile writes its fn into
    done = state.compiled_in_background(entry.compiled)
    known = state.cache.dynamic_keys

    def switched(seconds: float, error: str | None, fn, shape_env=None) -> None:
        compiled = error is None and fn is not entry.compiled.fn     # (not: nothing to compile)
        if compiled:
            try:
                fast = (target, entry.guards if shape_env is None else
                        entry.guards.extended(shape_env))
            except Exception as e:  # noqa: BLE001 -- the eager backend's fn stays, recorded
                error = f"its guards: {type(e).__name__}: {str(e)[:200]}"
                compiled = False
        done(seconds, error, fn)
        if compiled:
            entry.fast = fast   # at once: the fn and the guards it holds for
            known.clear()       # bound to the eager backend's fn: bound again, to Inductor's
    entry.compiled.start_compile = background.prepare(target, gm, [], switched,
                                                      oblivious=True)
    return entry
