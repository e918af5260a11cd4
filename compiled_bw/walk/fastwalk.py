"""The walk in C++ (optional): the same Walk as walk/walk.py, a faster signature.

Consumes root edges like `walk_graph`; produces a FastWalk with the attributes of walk.Walk
(nodes, kinds, edges and in_meta are built lazily: a cache hit needs none of them) whose
`signature` is a CSig: one bytes key built by _fastwalk_walk.cpp plus the Python-built entries
of custom-Function/AOT nodes and hooks.  `walk(root_edges)` uses it when enabled and built, else
walk.walk_graph.  On by default; COMPILED_BW_FASTWALK=0 (or `enable_fastwalk(False)`) turns it
off.  The extension is compiled on first use, once per machine, torch version and source
(torch.utils.cpp_extension.load, persistent build dir, about 80 s on one core; `python -m
compiled_bw.build` does it ahead); if it cannot be built, a warning says so and the Python walk
is used.  The extension also delivers leaf grads directly (`accumulate`, runtime/run.py), and
runs cache hits of C++-wrapper graphs whole (`CWalk.run_native`, Note [C++ hit path] there):
that is why the walk keeps the saved tensors as C++ tensors until Python asks for `saved`.

Note [Fast walk]
The C++ walk discovers the nodes in the Python walk's order (roots first, DFS popping the last
pushed, indices on first sight) and writes, per node, its index, class, edges and input
metadata, then the bytes that torch's own compiled-autograd visitor `Node::compiled_args`
specializes on (every saved field, also those Python cannot read: MmBackward0's self_layout,
native_dropout's `train`), the SymInts compiled_args lifts out of its key ("size inputs"),
and the metadata of each saved tensor, in the Python walk's order (a SavedVariable's byte
offset in its node is learned once per class from `_raw_saved_X`).  Saved tensors get C++
slots (SavedVariableHooks) instead of Python Slots.  What C++ does not do is called back into
Python, in processing order so the saved-tensor order is the Python walk's:
custom Function / AOT nodes (custom.py, aot.py; a custom node whose memo still holds is not:
Note [Custom node memo]), and classes whose compiled_args is unusable (probed once per class).  Hooks: C++ lists the nodes that have any, Python reads those only.
On a cache hit with retain_graph=False no slots are installed at all: after the run,
`Node::release_variables()` on each executed node frees the saved tensors exactly as eager's
engine does (and a second backward raises eager's error); slots are only needed to trace.
A tensor subclass (leaf or saved tensor) makes it give up: the Python walk flattens subclasses
(subclass.py Note [Subclasses stay outside the graph]).  Deliberate differences from the Python
signature: a node run opaquely for hidden state (nodes.py Note [Hidden saved state]) does not
key on its sizes (the real node runs; the graph bakes none in), and the compiled_args bytes key
on more than Python can see (finer).  A node whose saved tensors carry hooks that are not ours
is never unpacked nor visited by compiled_args: its key part is a marker and it runs as
nodes.hooked_kind (`opaque()` says 2 for it; nodes.py Note [Hooked saved tensors]).

Note [Node-local tensor ids]
compiled_args keys a saved tensor by its TensorArg id, which its AutogradCompilerCall hands out
in order of first sight (deduplicated by TensorImpl).  Each node is visited with a fresh call,
so the ids count from the node's own first saved tensor: a node's bytes are the same wherever
in the walk it is met.  They must be: a retained graph's first capture installs slots and
records each slotted node's bytes from that walk, and a later walk that meets the same node
unslotted (its first backward was a cache hit, which installs nothing) writes fresh bytes; with
walk-wide ids, a trunk shared by two losses keyed differently under its second loss on the
capture step than on the steps after, and was captured twice.  What the key no longer says is
whether two nodes saved one tensor; the graph does not depend on it (one graph input per
SavedVariable, read-only), and the Python walk's signature never said it either.

Note [Released nodes]
A backward with retain_graph=False frees the saved tensors of the nodes it ran, and only
those: grad(z, [w]) runs what lies between z and w.  A later grad() from a root below can
still run (eager never touches the freed nodes unless they lie on a path to its inputs):
pipeline parallelism's weight pass (torch.distributed.pipelining stage_backward_weight) runs
one param group after another from the edges its input pass kept, and each group's
retain_graph=False frees what the next group's walk passes through on its way to other
weights.  compiled_args raises eager's "backward through the graph a second time" on such a
node: the walk keys it as released (a marker, `opaque()` says 3), reads nothing of it, and
goes on to its edges; runtime/run.py runs eager autograd (which raises that error as it
would) if the call needs a released node, and the trace never reaches one that is not needed.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import struct
import sys
import threading
import time

import torch

from ..calls.run_hooks import check_single
from ..calls.unpacked import eligible_attrs
from ..checkpoint.recompute import is_checkpointed
from ..core.paths import build_base, import_extension, write_atomic
from ..graph import packed
from ..graph.custom import (
    AUTO_OP,
    FWD_KEY,
    MATERIALIZE_KEY,
    auto_traced,
    constant_key_record,
    fwd_info,
    on_verdict_change,
)
from ..graph.hooks import (
    COUNTS,
    RETAINED,
    TENSOR_HOOKS_KEY,
    NodeHooks,
    _ident,
    hooks_and_signature,
    leaf_hooks,
    retained_by_node,
)
from ..graph.native import _S
from ..graph.nodes import (
    AOT,
    CUSTOM,
    LEAF,
    TRACE,
    TRACE_CUSTOM,
    UNSUPPORTED,
    entry_kind,
    hidden_state_unknown,
    hooked_kind,
)
from ..graph.nodes import node_kind as _node_kind
from ..graph.saved import SLOTS_KEY, input_meta, input_metadata, raise_modified, raw_saved
from ..torchapi import autograd as torch_autograd
from . import walk as _walk_module
from .saved_slots import install_slots
from .walk import WalkUnsupported, _as_opaque, _custom_entry, class_info, values_entry, walk_graph

log = logging.getLogger("compiled_bw")

_HERE = os.path.dirname(os.path.abspath(__file__))
# The extension's sources, by job (_fastwalk.h says which does what), compiled as one translation
# unit (_UNIT includes them all: torch's headers are most of a unit's compile time).  _UNIT and
# _HEADERS are not compiled on their own but are part of the source hash, as each of _SRC is.
_SRC = [os.path.join(_HERE, "cpp", f"_fastwalk_{job}.cpp") for job in ("walk", "slots", "run", "bindings")]
_UNIT = os.path.join(_HERE, "cpp", "_fastwalk_all.cpp")
_HEADERS = [_UNIT, os.path.join(_HERE, "cpp", "_fastwalk.h")]


class GiveUp(Exception):
    """The C++ walk cannot do this step (the Python walk does it)."""


_MAX_PYTHON_ROOTS = 64


def build_key() -> str:
    """Everything the built extension depends on besides its source (source_hash, a compiler
    flag): torch's release, commit, CUDA version and install location (its headers
    and libraries; two virtual environments with the same torch would otherwise rebuild each
    other's build on every switch, since the include paths are part of the build), the
    Python ABI, and the checkout the sources come from (two checkouts of different commits
    rebuilt each other's build, minutes each, under one lock that stalled the other)."""
    from importlib.machinery import EXTENSION_SUFFIXES  # (sysconfig's import: ~1.7 ms)
    ident = "|".join((torch.__version__, str(torch.version.git_version),
                      str(torch.version.cuda), os.path.dirname(os.path.realpath(torch.__file__)),
                      sys.version, EXTENSION_SUFFIXES[0],
                      os.path.dirname(os.path.realpath(_SRC[0]))))
    tag = torch.__version__.replace("+", "_")
    return f"torch{tag}-{hashlib.sha1(ident.encode()).hexdigest()[:12]}"


def source_hash() -> str:
    """The content hash of every source file and header of the extension.  It is passed as a
    compiler flag, so a change to any of them changes the build command: torch's loader (which
    hashes the .cpp files and the flags, not the headers) and ninja (which otherwise compares
    modification times, which a reinstall can leave older than the build) both rebuild."""
    h = hashlib.sha1()
    for path in _SRC + _HEADERS:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()[:16]


def _build_path() -> str:
    return os.path.join(build_base(), f"fastwalk-{build_key()}")


def build_dir() -> str:
    d = _build_path()
    os.makedirs(d, exist_ok=True)
    return d


_LOAD_LOCK = threading.Lock()


def load(verbose: bool = False):
    """The extension module, built on first use (minutes) and then loaded from the build dir.
    Threads arriving while another loads it wait (else they would walk in Python meanwhile)."""
    if _S.tried:
        return _S.ext
    with _LOAD_LOCK:
        if _S.tried:
            return _S.ext
        ext = _load_once(verbose)
        _S.tried = True
        return ext


@contextlib.contextmanager
def _build_lock(d: str):
    """Note [Stale build lock]: torch's cpp_extension marks a build in progress with a `lock`
    file and makes every other process wait for it to go away; a build killed half-way
    (Ctrl-C on the first backward) leaves it, and every later process would wait forever,
    silently.  Each of our builds first takes an OS lock (flock: released when its process
    dies, however it dies) on its own file in the build dir; holding it, no other builder is
    alive, so a `lock` file there is stale and is removed."""
    try:
        import fcntl
    except ImportError:         # not POSIX: torch's own lock only
        yield
        return
    with open(os.path.join(d, "compiled_bw.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(d, "lock"))
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_STAMP = "compiled_bw_source.txt"


def _built_so(d: str) -> str | None:
    """Note [Loading a built walk]: the path of the extension built in d from these sources, or
    None (not built, or built from other sources)."""
    so = os.path.join(d, "compiled_bw_fastwalk.so")     # (torch's loader's name for it)
    try:
        with open(os.path.join(d, _STAMP)) as f:
            if f.read() != source_hash() or not os.path.exists(so):
                return None
    except OSError:
        return None
    return so


def _built(d: str):
    """Note [Loading a built walk]: the extension built from these sources, imported directly,
    or None (not built, or built from other sources: torch's loader builds it)."""
    so = _built_so(d)
    return None if so is None else import_extension("compiled_bw_fastwalk", so)


# Note [Loading a built walk]
# torch.utils.cpp_extension.load checks a build with ninja and imports setuptools on the way:
# ~0.1 s of every process's first backward, also when nothing is to be built.  After a build
# (same folder: build_key) the source hash it was built from is written beside it; a process
# whose sources hash the same imports the .so directly.


def _load_once(verbose: bool):
    t0 = time.perf_counter()
    try:
        d = build_dir()
        ext = _built(d)
        if ext is None:
            from torch.utils.cpp_extension import load as _load
            with _build_lock(d):
                ext = _load("compiled_bw_fastwalk", [_UNIT], build_directory=d,
                            extra_cflags=["-O2", f"-DCOMPILED_BW_FASTWALK_SOURCE={source_hash()}"],
                            verbose=verbose)
                write_atomic(os.path.join(d, _STAMP), source_hash().encode())
        ext.init(WalkUnsupported, GiveUp, _classify, _list_svs, _py_node)
        ext.set_strip_backward(torch_autograd.unpack_error_strips_backward())
        ext.memo_init((FWD_KEY, MATERIALIZE_KEY, SLOTS_KEY, torch.Size, torch.dtype,
                       torch.device, torch.layout, torch.memory_format))
        on_verdict_change(ext.memo_clear)
        global _HOOK_NAMES
        _HOOK_NAMES = (TENSOR_HOOKS_KEY, NodeHooks, hooks_and_signature, _ident, ext.hook_dicts)
        from ..calls import opaque  # (it imports this module)
        ext.hooks_init(opaque._after_user_code, opaque._outputs, check_single, raise_modified)
        opaque.HOOK_CALL = ext.tensor_hooks_call
        ext.custom_init(opaque._custom_tail, COUNTS, FWD_KEY)
        opaque.CUSTOM_CALL = ext.custom_call
        _walk_module.saved_hooks_in = ext.saved_hooks_in   # the Python walk's check too
    except Exception as e:  # noqa: BLE001 -- any build/load failure: the Python walk works
        lines = str(e).strip().splitlines()
        errs = [ln.strip() for ln in lines if "error" in ln.lower() and "ninja" not in ln][:3]
        _S.error = f"{type(e).__name__}: {'; '.join(errs or lines[-1:])}"
        log.warning("compiled_bw: the C++ walk is unavailable (%s); using the Python walk",
                    _S.error)
        return None
    _S.build_seconds = time.perf_counter() - t0
    if _S.build_seconds > 5:    # a build, not a load: say why this backward took so long
        log.warning("compiled_bw: compiled the C++ walk in %.0f s (once per machine, torch "
                    "version and source; `python -m compiled_bw.build` does it ahead)",
                    _S.build_seconds)
    _S.ext = ext
    return ext


def load_if_built() -> None:
    """Load the C++ walk now if it is on and already built for these sources (never build):
    compiled_bw's import does it, so a process's first backward does not pay the import
    (runtime/warm.py Note [Prefetch at import])."""
    if not _S.tried and _S.enabled and _built_so(_build_path()) is not None:
        load()


def enable_fastwalk(on: bool = True) -> bool:
    """Turn the C++ walk on/off for this process; True if it is (now) in use."""
    _S.enabled = on
    return bool(on and load() is not None)


def in_use() -> bool:
    return _S.enabled and load() is not None


def counters() -> dict:
    """Steps walked in C++ / in Python while enabled, why the C++ walk gave up, and custom-node
    entries taken from memos (Note [Custom node memo])."""
    hits = _S.ext.memo_stats()[1] if _S.ext is not None else 0
    return {"fast_walks": _S.fast_walks, "py_walks": _S.py_walks, "gave_up": dict(_S.gave_up),
            "error": _S.error, "build_seconds": _S.build_seconds, "memo_hits": hits}


def memo_size() -> int:
    """How many custom-node memos the C++ walk keeps (Note [Custom node memo])."""
    return _S.ext.memo_stats()[0] if _S.ext is not None else 0


# ---- callbacks from C++ --------------------------------------------------------------------

def _classify(node, addr: int) -> tuple:
    """Once per C++ node type: (how, name, reason, edge rules, ((attr, offset | -1), ...),
    NodeKind)."""
    cls = type(node)
    kind = _node_kind(cls)
    how = kind.how
    H = _S.ext.HOW      # the C++ enum How (_fastwalk.h), its only definition
    if how == UNSUPPORTED:
        return H["unsupported"], kind.name, kind.reason, (), (), kind
    if how == LEAF:
        return H["leaf"], kind.name, "", (), (), kind
    if how in (CUSTOM, TRACE_CUSTOM, AOT):
        return H["py"], kind.name, "", (), (), kind
    ext = _S.ext
    ok, why = ext.probe_compiled_args(node)
    attrs = []
    for a in kind.tensor_attrs:
        raw = raw_saved(node, a)
        if isinstance(raw, (list, tuple)):
            attrs.append((a, -1))
            continue
        off = ext.saved_variable_address(raw) - addr
        if not 0 < off < 1 << 16:
            ok, why = False, f"saved {a} is not inside the node (offset {off})"
        attrs.append((a, off))
    if not ok:
        log.info("compiled_bw fastwalk: %s read by Python (%s)", kind.name, why)
        return H["py"], kind.name, "", (), (), kind
    return ((H["trace"] if how == TRACE else H["opaque"]), kind.name, "", kind.edge_rules, tuple(attrs),
            kind)


def _list_svs(node, attr: str) -> list:
    addr = _S.ext.saved_variable_address
    return [addr(sv) for sv in raw_saved(node, attr)]


class _Sink:
    """What walk.py's entry builders append to (saved tensors and their keys)."""
    __slots__ = ("saved", "saved_node", "slot_only")

    def __init__(self, saved, saved_node, slot_only) -> None:
        self.saved, self.saved_node, self.slot_only = saved, saved_node, slot_only


def _py_node(i: int, node, saved: list, py_keys: list, slot_only: list):
    """A node C++ leaves to Python: (its signature entry (the part after index/edges/meta), its
    NodeKind, the memo C++ keeps for it or None: Note [Custom node memo])."""
    cls = type(node)
    kind = _node_kind(cls)
    sink = _Sink(saved, py_keys, slot_only)
    memo = None
    if kind.how in (CUSTOM, TRACE_CUSTOM, AOT):
        # the C++ key holds every node's input metadata already (meta_key): the entry needs
        # only the slot count, not walk.py's (shape, dtype, device) tuples (~1 us a node)
        meta = input_metadata(node)
        entry = [i, kind.name, None, len(meta)]
        hooked = _custom_entry(sink, i, node, kind.how, meta, entry)
        entry = tuple(entry)
        if kind.how != AOT and hooked is not True:
            memo = _memo_of(node, kind.how, hooked, entry, len(meta))
    else:
        entry = [i, kind.name, None, input_meta(node)]
        hooked = values_entry(sink, i, node, class_info(cls), entry)
        entry = tuple(entry)
    kind = entry_kind(kind, hooked)
    if memo is not None:
        memo = (memo[0], kind, *memo[1:])
    return entry, kind, memo


# Note [Custom node memo]
# On a cache hit the C++ walk would call Python for every custom Function node (the entry of
# walk.py `_custom_entry`: ~6-13 us each).  Instead, after building a node's entry, Python
# hands C++ what that entry was computed from (`_memo_of`), kept per (node class, node index):
# the forward's record (is_var, subclass, output count, each output's shape, dtype and device:
# walk.py Note [Zeros of a non-differentiable output]), set_materialize_grads,
# needs_input_grad, the ctx's attributes (its __dict__, in order; lists copied), the backward's
# constant key (custom.py Note [Constant function keys]: the function, its code, no defaults,
# each global name it may read holding the same object), per saved tensor whether it is defined, and for traced Functions
# the saved tensors' metadata.  The next walk meeting a node of that class at that index
# compares all of it in C++ (_fastwalk_walk.cpp memo_hit): values by exact type and value (int,
# bool, str, None, float by its bits, dtype / layout / memory_format by identity, device by
# equality, tuples / lists / torch.Size item by item), never an object by identity alone (a
# list mutated in place, a user object); the saved tensors unpacked as `node.saved_tensors`
# does (eager's checks).  All equal: it takes the memo's entry and kind, and the saved tensors
# as graph inputs (or slot-only), with no Python call.  Anything different or unusual -- a
# changed attribute, a redefined class (another class object: another memo), a reassigned
# global, saved tensors with hooks, an unpack error, a value of another type -- and the node
# goes through Python as before, which raises eager's errors and makes a new memo.  Not
# memoized (Python every step): AOT nodes, hooked saved tensors, clear_saved_tensors_on_access,
# a ctx value or backward key of any other kind.  What else the entry depends on is per class
# (nodes.node_kind, custom.auto_traced) or custom.py's verdicts: custom.py clears every memo
# when a class verdict changes or on reset().
_COMPARABLE = (int, bool, str, float, type(None), torch.dtype, torch.device, torch.layout,
               torch.memory_format)


def _comparable(v, depth: int = 0) -> bool:
    """Whether memo_hit's comparison knows v's type (exact types, as plain_key's)."""
    t = type(v)
    if t in _COMPARABLE:
        return True
    if (t is tuple or t is list or t is torch.Size) and depth < 4:
        return all(_comparable(x, depth + 1) for x in v)
    return False


def _snapshot(v):
    """A copy of v that its owner cannot change in place (lists copied, all levels)."""
    t = type(v)
    if t is list:
        return [_snapshot(x) for x in v]
    if t is tuple:
        return tuple(_snapshot(x) for x in v)
    return v


def _memo_of(node, how: str, hooked, entry: tuple, n_out: int):
    """Note [Custom node memo]: (Function class, entry, is_var, subclass, output count, ctx
    items, materialize flag | None, needs_input_grad, backward key record | None, defined per
    saved tensor, keyed, saved keys, each output's (shape, dtype, device)), or None when the
    node cannot be memoized."""
    fwd = type(node)._forward_cls
    if getattr(fwd, "clear_saved_tensors_on_access", False):
        return None
    ctx = tuple(vars(node).items())
    if not all(type(k) is str and _comparable(v) for k, v in ctx):
        return None
    ctx = tuple((k, _snapshot(v)) for k, v in ctx)
    bkey = None
    if how == TRACE_CUSTOM and auto_traced(type(node)) != AUTO_OP:
        bkey = constant_key_record(fwd.backward)   # ctx_state / safe_ctx_state read it
        if bkey is None:
            return None
    info = fwd_info(node)
    ts = node.saved_tensors
    i = entry[0]
    return (fwd, entry, info.is_var, info.subclass, n_out, ctx,
            node.metadata.get(MATERIALIZE_KEY), tuple(node.needs_input_grad), bkey,
            tuple(t is not None for t in ts), how == TRACE_CUSTOM and hooked is False,
            tuple((i, "tensors", j) for j in range(len(ts))), info.out_info)


# ---- the walk ------------------------------------------------------------------------------

class CSig:
    """The signature of a FastWalk: equality and hash on (key bytes, Python entries)."""
    __slots__ = ("_hash", "extra", "key", "layout")

    def __init__(self, key: bytes, h: int, extra: tuple, layout: bytes) -> None:
        self.key, self.extra, self.layout = key, extra, layout
        self._hash = hash((h, extra)) if extra else h

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (type(other) is CSig and self._hash == other._hash and self.key == other.key
                and self.extra == other.extra)

    def __len__(self) -> int:
        return len(self.layout) // (4 * len(_S.ext.LAYOUT_FIELDS))

    def __repr__(self) -> str:
        return f"CSig({len(self)} nodes, {len(self.key)} bytes)"


class LazyList:
    """Sequence computed per item on first access."""
    __slots__ = ("_f", "_items")

    def __init__(self, n: int, f) -> None:
        self._items = [None] * n
        self._f = f

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        v = self._items[i]
        if v is None:
            v = self._items[i] = self._f(i)
        return v

    def __iter__(self):
        return (self[i] for i in range(len(self._items)))


class FastWalk:
    """walk.Walk's attributes, from a C++ walk (CWalk)."""
    __slots__ = ("_edges", "_in_meta", "_kinds", "_nodes", "_py_kinds", "_saved_node", "cw",
                 "hooks", "leaves", "root_edges", "signature", "slot_only")
    feature_notes = frozenset()     # checkpointed regions go to the Python walk (walk.Walk)

    def __init__(self, cw, py_kinds: dict) -> None:
        self.cw = cw
        self.slot_only = cw.slot_only
        self.leaves = cw.leaves
        self.root_edges = cw.root_edges
        self.hooks: dict = {}
        self._py_kinds = py_kinds
        self._nodes = self._edges = self._in_meta = self._kinds = self._saved_node = None

    @property
    def saved(self) -> list:
        """The saved tensors as a Python list (made on first use, from then on the same list;
        the C++ hit path never makes it: runtime/run.py Note [C++ hit path])."""
        return self.cw.saved

    @property
    def nodes(self):
        if self._nodes is None:
            self._nodes = LazyList(len(self.cw), self.cw.node)
        return self._nodes

    @property
    def edges(self) -> list:
        if self._edges is None:
            self._edges = self.cw.edges()
        return self._edges

    @property
    def in_meta(self):
        if self._in_meta is None:
            nodes = self.nodes
            self._in_meta = LazyList(len(self.cw), lambda i: input_meta(nodes[i]))
        return self._in_meta

    @property
    def kinds(self) -> list:
        if self._kinds is None:
            kinds = []
            opaque = self.cw.opaque()
            edges = self.edges
            for i, cid in enumerate(self.cw.class_ids()):
                kind = self._py_kinds.get(i) or _S.ext.class_kind(cid)
                if opaque[i] == 2:      # saved tensors with hooks (C++ read the node)
                    kind = hooked_kind(kind)
                elif kind.how == TRACE and (opaque[i] or (
                        i in self._py_kinds and kind.edge_rules and
                        hidden_state_unknown(kind, edges[i]))):
                    kind = _as_opaque(kind)
                kinds.append(kind)
            self._kinds = kinds
        return self._kinds

    @property
    def saved_node(self) -> list:
        if self._saved_node is None:
            self._saved_node = self.cw.saved_keys()
        return self._saved_node

    frees_saved_itself = True   # release_nodes: Node::release_variables, no Slots needed

    def released(self) -> list:
        """Indices of the nodes a retain_graph=False backward already ran (Note [Released
        nodes])."""
        return self.cw.released()

    def take_saved(self, box: list) -> None:
        box.extend(self.cw.saved)
        self.cw.saved.clear()   # in place: the C++ walk's list

    def release_nodes(self, indices) -> None:
        """What eager's engine does after each node with retain_graph=False."""
        self.cw.release_variables(indices)

    def accumulate(self, leaf_idx: list, grads: list) -> bool:
        return True if not leaf_idx else self.cw.accumulate(leaf_idx, grads)

    def leaf_observed(self) -> bool:
        return bool(self.cw.leaf_observed)

    def forward_streams(self) -> list:
        return self.cw.streams()

    def run_native(self, *args):
        """Note [C++ hit path] (runtime/run.py): CWalk.run_native."""
        return self.cw.run_native(*args)

    def python_walk(self, root_edges):
        """The Python walk of the same step (runtime/dynamic.py reads its signature entries),
        or None when it raises (the static path then says why)."""
        try:
            return walk_graph(root_edges)
        except Exception:  # noqa: BLE001 -- WalkUnsupported, an eager error
            return None

    def install(self):
        """Slots on every saved tensor the graph reads (C++ ones, and Python Slots for
        Python-read ones).  Not on those of custom Functions run opaquely (slot_only): their
        real node unpacks them, and a hooked SavedVariable unpacks to a new tensor object where
        eager's gives the saved input itself (`ctx.saved_tensors[0] is x`); after the run they
        are freed as on a cache hit, by release_variables (runtime/run.py)."""
        py_keys = list(self.cw.py_keys)
        py_slots = install_slots(self.nodes, py_keys) if py_keys else []
        return self.cw.install(py_slots, [])


# Note [Hook entries in C++]
# Every step, each node with hooks gets its hooks.NodeHooks (what its hook calls run) and its
# signature part (hooks.hooks_and_signature: which hook dicts, each hook's code).  For the
# common node -- one tensor-hook dict (`y.register_hook`), node pre/post-hook dicts, no
# retains_grad -- the C++ walk builds both itself (_fastwalk_walk.cpp hook_entries: ~0.85 ->
# ~0.2 us a node): the same reads as hooks_and_signature (the node's recorded dict through
# its weak reference, the PyFunction*Hook dicts as `hook_dicts`; an empty or dead dict is
# none), the same values, each hook's identity a plain function's __code__ or hooks._ident's
# answer.  Anything else (several dicts on one node, retains_grad, an unexpected record)
# goes to hooks_and_signature.  A dict's hooks are listed in its own order (eager's
# PyDict_Next); an OrderedDict reordered with move_to_end lists them otherwise than
# `d.values()` would, which changes no call: the signature only tells hook sets apart.
_HOOK_NAMES: tuple = ()    # (TENSOR_HOOKS_KEY, NodeHooks, hooks_and_signature, _ident,
#                            hook_dicts): set when the extension is loaded


def version_checks(box: list, off: int, spec: tuple):
    """graph/saved.py Note [Version checks in C++]: the C++ VersionChecks, or None without
    the extension."""
    return _S.ext.version_checks(box, off, spec) if _S.ext is not None else None


def fast_walk(root_edges: list, history: bool = False) -> FastWalk:
    """Raises WalkUnsupported (fallback reason), GiveUp (use the Python walk), RuntimeError.
    history: Note [Saved tensors with history]."""
    kinds: dict = {}
    cw = _S.ext.walk(root_edges, kinds, history)
    hooked = cw.hooked()
    if hooked and any(is_checkpointed(n, _node_kind(type(n)).tensor_attrs)
                      for n in map(cw.node, hooked)):
        raise HookedGiveUp("a checkpointed region (recompute.py traces it)")
    if hooked and any(eligible_attrs(n, _node_kind(type(n)).tensor_attrs) is not None
                      for n in map(cw.node, hooked)):
        raise HookedGiveUp("saved tensors with unpack hooks (unpacked.py traces their nodes)")
    w = FastWalk(cw, kinds)
    hook_entries = []
    if len(cw.hook_nodes):
        # node hooks are read from the nodes themselves, also those registered before
        # compiled_bw was imported (Note [Hooks registered before compiled_bw], _fastwalk.h)
        retained = retained_by_node() if len(RETAINED) else None
        w.hooks, hook_entries = _S.ext.hook_entries(cw, _HOOK_NAMES, bool(COUNTS.tensor),
                                                    retained)
    for i in cw.hook_leaves:
        var = w.leaves[i]
        if var._backward_hooks:
            h = w.hooks[i] = leaf_hooks(var)
            hook_entries.append((i, h.signature()))
    extra = ()
    if len(cw.py_entries) or hook_entries:
        extra = (tuple(cw.py_entries), tuple(hook_entries))
    w.signature = CSig(cw.key, cw.hash, extra, cw.layout)
    return w


# Note [Remembered give-up]
# The C++ walk gives a step to the Python walk when a hooked node is a checkpoint region's or
# has plain unpack hooks (fast_walk): a per-step check of each hooked node in Python, after a
# whole C++ walk, and then the Python walk: every such step walked twice.  The decision only
# picks which walk runs (both give a correct capture: a hooked node the C++ walk keeps is
# one call of the real node), so it is remembered per root (the root nodes' classes and
# input numbers): a step whose roots gave up before goes straight to the Python walk, whose
# own result re-checks the decision at no cost (it found a checkpointed node or an unpack-call
# node, else the root is forgotten and the next step tries C++ again).


class HookedGiveUp(GiveUp):
    """Hooked nodes the Python walk traces (Note [Remembered give-up])."""


def forget_roots() -> None:
    _S.python_roots.clear()


def _root_key(root_edges: list) -> tuple:
    return tuple((type(n), nr) for n, nr in root_edges)


def _gave_up(reason: str) -> None:
    _S.py_walks += 1
    n = _S.gave_up.get(reason, 0)
    _S.gave_up[reason] = n + 1
    if n == 0:
        log.info("compiled_bw fastwalk: Python walk for this graph (%s)", reason)


# Note [Saved tensors with history]
# A create_graph=True backward reads the saved tensors as eager's formulas read them: unpacked
# through their SavedVariable, with their autograd history (a saved output's edge to the node
# that saved it, a saved input's own grad_fn, a saved leaf's grad accumulator), so the graph's
# ops, run with grad mode on, record the same second-order graph.  compiled_args and the walk's
# own unpack give exactly that; a saved tensor our slot holds (a retained graph captured
# before) is unpacked through its SavedVariable too, which calls our unpack hook and restores
# the history, rather than read from the slot, whose tensor is a detached copy.  Only the C++
# walk does this; with create_graph=True a step it gives up on runs eager autograd.


def walk(root_edges: list, history: bool = False):
    """The C++ walk when in use (falling back per step to the Python walk), else Python's
    (also while traceable saved-tensor hooks hold packed objects: packed.py).  history: a
    create_graph=True backward's walk (Note [Saved tensors with history]): C++ only, else
    WalkUnsupported."""
    in_cpp = _S.enabled and not packed.live() and (_S.ext is not None or load() is not None)
    if history:
        if not in_cpp:
            raise WalkUnsupported("create_graph=True needs the C++ walk, which is off or "
                                  "unavailable here, or traceable saved-tensor hooks are live")
        try:
            w = fast_walk(root_edges, history=True)
        except GiveUp as e:
            raise WalkUnsupported(f"create_graph=True: the C++ walk gave this graph up "
                                  f"({str(e).split(': ')[0]})") from None
        _S.fast_walks += 1
        return w
    if in_cpp:
        rk = _root_key(root_edges)
        reason = _S.python_roots.get(rk)
        if reason is not None:          # Note [Remembered give-up]
            w = walk_graph(root_edges)
            if w.regions or w.unpack_nodes:
                _gave_up(reason)
            else:
                del _S.python_roots[rk]
                _gave_up("remembered give-up, not needed (the next step walks in C++)")
            return w
        try:
            w = fast_walk(root_edges)
            _S.fast_walks += 1
            return w
        except GiveUp as e:
            reason = str(e).split(": ")[0]    # bounded: no per-tensor details
            _gave_up(reason)
            if type(e) is HookedGiveUp:
                _remember(rk, reason)
    return walk_graph(root_edges)


def _remember(rk: tuple, reason: str) -> None:
    if len(_S.python_roots) >= _MAX_PYTHON_ROOTS:
        _S.python_roots.pop(next(iter(_S.python_roots)))
    _S.python_roots[rk] = reason


def _extension(always: bool = False):
    """The extension module (loaded on first use), or None; always: also when the C++ walk is
    turned off (only C++ sees C++ hooks; walk.Walk's methods)."""
    return _S.ext or (load() if (always or _S.enabled) else None)


_walk_module.extension = _extension


def copy_slices_base(node) -> tuple | None:
    """(sizes, strides) of a CopySlices node's base, read by the extension (its grad for the
    base has those strides); None for another node or without the extension."""
    ext = _extension(always=True)
    return None if ext is None else ext.copy_slices_base(node)


# ---- explaining a miss ---------------------------------------------------------------------

def _rows(sig: CSig) -> list:
    """The CWalk layout of a signature as rows of named fields (the extension's LAYOUT_FIELDS),
    each with `end`: where the next row's entry begins (the key's end for the last)."""
    fields = _S.ext.LAYOUT_FIELDS
    flat = struct.unpack(f"{len(sig.layout) // 4}I", sig.layout)
    n = len(fields)
    rows = [dict(zip(fields, flat[r:r + n], strict=True)) for r in range(0, len(flat), n)]
    for a, b in itertools.pairwise(rows):
        a["end"] = b["start"]
    if rows:
        rows[-1]["end"] = len(sig.key)
    return rows


def describe(old: CSig, new: CSig) -> str:
    """First difference between two CSigs, in words (runtime/cache.py)."""
    lo, ln = _rows(old), _rows(new)
    if len(lo) != len(ln):
        first = ""
        for o, r in zip(lo, ln, strict=False):
            if r["index"] == 0xFFFFFFFF or o["index"] == 0xFFFFFFFF:
                break
            if (o["index"], o["class_id"]) != (r["index"], r["class_id"]):
                first = (f" (first at node {r['index']}: "
                         f"{_S.ext.class_kind(o['class_id']).name} -> "
                         f"{_S.ext.class_kind(r['class_id']).name})")
                break
        return f"graph size changed: {len(lo) - 1} -> {len(ln) - 1} nodes{first}"
    for o, r in zip(lo, ln, strict=True):
        if r["index"] == 0xFFFFFFFF:
            if old.key[o["start"]:o["end"]] != new.key[r["start"]:r["end"]]:
                return "execution order of the nodes changed"
            break
        i, name = r["index"], _S.ext.class_kind(r["class_id"]).name
        if (o["index"], o["class_id"]) != (i, r["class_id"]):
            return f"node {i}: {_S.ext.class_kind(o['class_id']).name} -> {name}"
        for part, what in (("start", "edges"), ("meta", "input metadata")):
            nxt = "meta" if part == "start" else "rest"
            if old.key[o[part]:o[nxt]] != new.key[r[part]:r[nxt]]:
                return f"node {i} {name}: {what} changed"
        if old.key[o["rest"]:o["end"]] != new.key[r["rest"]:r["end"]]:
            return f"node {i} {name}: saved state (saved values or saved tensor shape/stride/dtype) changed"
    if old.extra != new.extra:
        return "custom Function / hook state changed"
    return "signature changed"
