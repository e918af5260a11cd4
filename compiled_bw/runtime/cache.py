"""Cache: signature -> Compiled graph (or a remembered fallback), bounded per root signature.

Consumes signatures from walk/walk.py; produces hits, or a miss with a readable reason
("node 4 MulBackward0: saved tensor 0 shape [3, 4] -> [3, 5]") for the recompiles log.
Entries hold no tensors: everything per step travels in the Box.

Note [Cache policy]
Per root (RootKey: the roots' node classes and grad metadata), at most `cache_size_limit`
static graphs are kept: a capture beyond that evicts the root's least recently used graph
(its code is dropped; that graph, met again, is captured again) instead of refusing the new
one, so a long process -- a training script that also evaluates, a notebook training several
models, a test suite -- keeps compiling.  What is refused is a root that recaptures without
reuse: once its captures reach STORM_FACTOR x cache_size_limit while it has had fewer hits
than captures, compilation stops for it (its backwards run eager autograd with that reason)
and a warning says so, once per root (also in `stats().notes`, so `explain()` shows it).
Dynamic graphs (runtime/dynamic.py) are per root apart, and count as captures and hits.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple


class OptionsKey(NamedTuple):
    """The call's options, as far as they change the graph."""
    accumulate: bool        # backward() (True) or grad() (False)
    retain_graph: bool
    inputs: tuple           # per backward(inputs=)/grad() input: (node index | -1, input_nr)
    allow_unused: bool
    leaf_observed: Any      # a leaf's AccumulateGrad has a hook (run.py Note [Delivery points])
    create_graph: bool = False  # run with grad mode on (trace/differentiable.py Note [create_graph])
    deterministic: tuple = (False, False, True)   # backends/compile_worker.py deterministic()
    precision: Any = None   # backends/compile_worker.py precision() (TF32 settings; CUDA)


class CacheKey(NamedTuple):
    """What a captured graph is valid for: one entry of the cache."""
    signature: Any          # the walk's (walk/walk.py tuple; walk/fastwalk.py CSig)
    root_edges: tuple       # (node index, input_nr) per root
    root_meta: tuple        # per root grad: its tensor metadata, or None
    options: OptionsKey
    backend: Any            # the backend's name, or id() of a callable


class RootKey(NamedTuple):
    """The roots of a backward: cache_size_limit counts graphs per RootKey, and a miss is
    explained against the last CacheKey seen for it."""
    root_types: tuple       # the roots' node class names
    root_meta: tuple
    backend: Any


@dataclasses.dataclass
class Compiled:
    fn: Callable            # boxed: fn(box) -> list of outputs
    plan: Any               # capture.trace.Plan
    gm: Any                 # the captured GraphModule (for last_graph / explain)
    box_owned: tuple = ()   # saved-tensor positions the box alone owns while the graph runs
    box_nodes: tuple = ()   # the nodes of those positions (sorted; C++ walk hits release them)
    start_compile: Callable | None = None   # starts its background compile (run.py)
    compile_on_repeat: bool = False     # start it at its first hit, not its first run (run.py
    #                                    Note [Compile on repeat])
    native: Callable | None = None  # the C entry point of fn (run.py Note [C++ hit path])
    n_inputs: int = 0               # how many Box entries fn takes
    # a dynamic graph bound to one step's sizes (runtime/dynamic.py): its SymInt inputs as the
    # 0-dim int64 tensors the C entry point reads them from, after the box on the C++ hit path
    native_tail: tuple = ()
    devices: frozenset = frozenset()    # non-CPU device types it touches (streams.py)
    replay: Any = None              # its CUDA graph, when enable(cudagraphs=True) (cudagraphs.py)
    # calls/opaque.py Note [Opaque output layout]: the layouts its opaque calls were traced
    # with (hints), and those a run found instead (recapture with them on the next hit)
    layout_hints: dict = dataclasses.field(default_factory=dict)
    layout_found: dict | None = None
    # backends/eager.py Note [Sparse grads from opaque calls], calls/opaque.py Note [ZeroTensors
    # from opaque calls]: a run's opaque call returned a sparse grad or a ZeroTensor (what
    # did); its later backwards run eagerly
    eager_after: str | None = None
    # runtime/real_strides.py Note [Real output strides]: its first run's output strides, taken
    # while `watch_strides` (the run before its background compile starts)
    watch_strides: bool = False
    out_strides: list | None = None
    # runtime/verify.py Note [Verify]: the callable whose runs are being verified, how many
    # are left, and whether it is: (verify_user_code asked with, why not or "" if it is),
    # None: not asked yet
    verify_fn: Callable | None = None
    verify_left: int = 0
    verify_skip: tuple | None = None   # (verify_user_code, why not: "" if verified)
    # runtime/warm.py Note [Warm start]: (file name, pickled key, input metadata) when it is
    # kept on disk
    warm: tuple | None = None
    after_first_run: Callable | None = None     # called once its first run is over (run.py)
    # runtime/warm.py Note [Lazy stored graphs]: builds gm when it is None (a loaded graph)
    make_gm: Callable | None = None

    def graph_module(self):
        """The captured GraphModule (built now if this entry was loaded from disk)."""
        if self.gm is None and self.make_gm is not None:
            self.gm, self.make_gm = self.make_gm(), None
        return self.gm


class FallbackToEager(Exception):
    """This step runs eager autograd (reason: why; is_error: eager raises, the step re-raises
    eager's error)."""

    def __init__(self, reason: str, is_error: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.is_error = is_error


@dataclasses.dataclass
class Fallback:
    reason: str
    is_error: bool = False  # eager raises an error here: not counted as unsupported


STORM_FACTOR = 16

# Note [Recapture storms]
# A root whose sizes change at every step while its graph cannot be dynamic (runtime/dynamic.py
# says "sizes changed but the graph stays static": a checkpointed region's recomputation is
# traced with static sizes, a node without a symbolic formula) captures a static graph per
# step that is never run again: Hugging Face gradient checkpointing over varying sequence
# lengths (dynamic padding) cost 12x eager's backward that way, every step a walk, a trace
# and a run on the eager backend.  So after STORM_STREAK such captures in a row without a hit
# of the root, its next backwards run eager autograd without a walk (a fallback with the
# reason), BACKOFF_FIRST of them, then one backward is walked and looked up again: a hit ends
# the storm; another fresh capture starts the next, twice as long (up to BACKOFF_MAX).  A hit
# of the root at any time (a size seen before, a dynamic graph) clears it.  Only misses the
# dynamic path could not serve count (`static_sizes`): size changes of a graph it declines,
# and any miss of a root whose graph cannot be dynamic at all (an opaque node: a
# `torch.compile`d forward whose backward draws Inductor's random numbers again, with dropout
# in its checkpointed layers; a node unpacking through hooks: bloom's GeLUFunction inside a
# checkpointed block; hooks on a leaf), where a new structure is not told from new
# sizes without a second walk.  A new structure of a root that could be dynamic never starts
# one; a graph that comes back (a training and an evaluation graph) is a hit, which ends it.
# With strict=True (every backward compiled, or an error) a root never backs off: it captures
# as before.
STORM_STREAK = 2
BACKOFF_FIRST = 4
BACKOFF_MAX = 256


@dataclasses.dataclass
class Storm:
    """Note [Recapture storms]: one root's state."""
    why: str                    # why its graph stays static, from the dynamic path
    streak: int = 0             # fresh static captures since the last hit, sizes changed
    skip: int = 0               # backwards left to run eagerly without a walk
    next_skip: int = BACKOFF_FIRST


class Cache:
    def __init__(self) -> None:
        self.entries: dict = {}
        self.per_root: dict = {}    # root key -> graphs captured (ever)
        self.live: dict = {}        # root key -> OrderedDict of its static graphs' keys, LRU first
        self.hits: dict = {}        # root key -> hits
        self.last: dict = {}        # root key -> last signature seen
        self.dynamic: dict = {}     # root key -> list of DynEntry (runtime/dynamic.py)
        self.last_py: dict = {}     # (root key, base) -> (base, Python signature, key), last miss
        # CacheKey -> KnownHit: the walk key of a step a dynamic graph served (runtime/dynamic.py
        # Note [Dynamic hits by walk key])
        self.dynamic_keys: dict = {}
        # (root key, base, structure) whose dynamic capture fixed a size it made symbolic
        # (runtime/dynamic.py Note [Dynamic graphs that pin a size])
        self.pinned: set = set()
        # (root key, base) whose dynamic graph of shared size symbols met two different sizes
        # for one symbol (runtime/dynamic.py Note [One symbol for sizes that changed together])
        self.unshared: set = set()
        self.storms: dict = {}      # root key -> Storm (Note [Recapture storms])

    def clear(self) -> None:
        self.entries.clear()
        self.per_root.clear()
        self.live.clear()
        self.hits.clear()
        self.last.clear()
        self.dynamic.clear()
        self.last_py.clear()
        self.dynamic_keys.clear()
        self.pinned.clear()
        self.unshared.clear()
        self.storms.clear()

    def get(self, key):
        return self.entries.get(key)

    def put(self, root_key: RootKey, key: CacheKey, entry, limit: int | None = None) -> None:
        """Store `entry`; a new graph beyond `limit` for its root evicts the root's least
        recently used one (Note [Cache policy])."""
        self.entries[key] = entry
        if isinstance(entry, Compiled):
            self.per_root[root_key] = self.per_root.get(root_key, 0) + 1
            live = self.live.setdefault(root_key, OrderedDict())
            live[key] = None
            live.move_to_end(key)
            while limit is not None and len(live) > limit:
                old, _ = live.popitem(last=False)
                if isinstance(self.entries.get(old), Compiled):
                    del self.entries[old]

    def hit(self, root_key: RootKey, key: CacheKey | None = None) -> None:
        """A backward served by a cached graph: counted, and `key` (a static graph) made the
        root's most recently used."""
        self.hits[root_key] = self.hits.get(root_key, 0) + 1
        if self.storms:
            self.storms.pop(root_key, None)     # Note [Recapture storms]
        live = self.live.get(root_key)
        if key is not None and live is not None and key in live:
            live.move_to_end(key)

    def static_sizes(self, root_key, why: str) -> None:
        """Note [Recapture storms]: this root's sizes changed and its graph stays static."""
        storm = self.storms.get(root_key)
        if storm is None:
            self.storms[root_key] = Storm(why)
        else:
            storm.why = why

    def captured_static(self, root_key) -> Storm | None:
        """Note [Recapture storms]: after a fresh static capture of this root; the Storm when
        it starts a backoff now."""
        storm = self.storms.get(root_key)
        if storm is None:
            return None
        storm.streak += 1
        if storm.streak < STORM_STREAK:
            return None
        storm.skip, storm.next_skip = storm.next_skip, min(2 * storm.next_skip, BACKOFF_MAX)
        storm.streak = STORM_STREAK - 1     # after the backoff, one more capture starts the next
        return storm

    def backoff(self, root_key) -> Storm | None:
        """Note [Recapture storms]: the Storm if this backward of the root runs eagerly."""
        storm = self.storms.get(root_key)
        if storm is None or storm.skip <= 0:
            return None
        storm.skip -= 1
        return storm

    def count(self, root_key) -> int:
        return self.per_root.get(root_key, 0)

    def stopped(self, root_key, limit: int) -> bool:
        """Note [Cache policy]: whether this root recaptures without reuse."""
        n = self.per_root.get(root_key, 0)
        return n >= STORM_FACTOR * limit and self.hits.get(root_key, 0) < n

    def miss_reason(self, root_key: RootKey, key: CacheKey) -> str:
        old = self.last.get(root_key)
        self.last[root_key] = key
        if old is None:
            return "first call"
        return describe_change(old, key)


def describe_change(old: CacheKey, new: CacheKey) -> str:
    """First difference between two signatures, in words."""
    osig, oroots, ometa, oopts = old.signature, old.root_edges, old.root_meta, old.options
    nsig, nroots, nmeta, nopts = new.signature, new.root_edges, new.root_meta, new.options
    if oopts != nopts:
        return f"call options changed: {oopts} -> {nopts}"
    if ometa != nmeta:
        return f"root grads changed: {_short(ometa)} -> {_short(nmeta)}"
    if type(osig) is not type(nsig):
        return "walk implementation changed (Python walk <-> C++ walk)"
    if not isinstance(nsig, tuple):     # walk/fastwalk.py CSig
        from ..walk.fastwalk import describe
        reason = describe(osig, nsig)
        return f"roots changed: {oroots} -> {nroots}" if reason == "signature changed" and \
            oroots != nroots else reason
    if len(osig) != len(nsig):
        first = next((f" (first at node {b[0]}: {a[1]} -> {b[1]})" for a, b in
                      zip(osig, nsig, strict=False) if "execution order" not in (a[0], b[0])
                      and (a[0], a[1]) != (b[0], b[1])), "")
        return f"graph size changed: {len(osig)} -> {len(nsig)} nodes{first}"
    for a, b in zip(osig, nsig, strict=False):
        if a != b and a[0] == "execution order":
            return "execution order of the nodes changed"
        if a != b:
            name = b[1]
            if a[1] != b[1]:
                return f"node {b[0]}: {a[1]} -> {b[1]}"
            labels = ["index", "class", "edges", "input metadata"]
            for k, (x, y) in enumerate(zip(a, b, strict=False)):
                if x != y:
                    what = labels[k] if k < len(labels) else f"saved value {k - len(labels)}"
                    return f"node {b[0]} {name}: {what} {_short(x)} -> {_short(y)}"
    if oroots != nroots:
        return f"roots changed: {oroots} -> {nroots}"
    return "signature changed"


def _short(x) -> str:
    s = repr(x)
    return s if len(s) < 160 else s[:157] + "..."
