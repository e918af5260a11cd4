"""Warm start: captured graphs kept on disk, so a new process skips their capture and compile.

Consumes a fresh capture (runtime/run.py: its CacheKey, the Compiled entry, the walk) and, for
Inductor, the compiled graph's bytes from the background compile (runtime/background.py) or
from a foreground compile (a copy of the compiled graph serialized);
produces one file per graph under COMPILED_BW_CACHE_DIR, and, on a later process's cache miss
with the same key, a Compiled entry built from it (`load`) instead of a capture.

Note [Warm start]
On only when COMPILED_BW_CACHE_DIR is set (a folder; several processes and ranks may share
it).  Entries live in <dir>/<release>/, <release> naming the torch version, the Python version
and a hash of compiled_bw's own source files, so another torch release or a changed
compiled_bw never reads them, and `pip install -e .` of an unchanged package keeps them.  A file is named by a
hash of the pickled CacheKey (the walk's signature: each node's compiled_args bytes, sizes,
the options, the backend), the torch thread count (Inductor's CPU kernels are generated for
it) and the backend's name, and holds that pickled key again (compared on load: a hash
collision is a miss), the graph (its FX code, and the eager backend's code of it: Note [Lazy
stored graphs]), its Plan, each input's metadata and, for Inductor, the size and SHA-256 of the compiled graph's bytes and of its C entry point's .so (files beside it: Note [Sidecar files]), under a SHA-256 of them (checked on
load: a damaged file is ignored).  Written to a temporary name and
renamed: a reader sees a whole file or none.  The folder is kept under
COMPILED_BW_CACHE_MB (default 1024): the least recently used files go first.
Which graphs are stored: static graphs (no symbolic size) of the "eager" and "inductor"
backends (another backend might call the graph with its own convention, which the graph traced
again on load need not keep) with no checkpointed region, saved-tensor hook, spliced
torch.compile'd backward, subclass, mutated input or create_graph (USER_CALL_KINDS,
_STORED_KINDS).  Hooks, custom Functions (traced in or run as opaque calls) and delivery
points are kept: the key names their code as any process would (Note [Keys that name user
code]), and each run calls that step's own hooks and nodes.  Dynamo's verdicts on custom
backwards are kept beside the graphs (graph/custom.py Note [Stored verdicts]), so a loading
process does not import Dynamo to re-judge them.  Others are captured as before.
Loading runs every check a hit makes (the walk, the key, each step's version checks and
guards are those of the entry); the trace's own refusals that do not depend on the key (a
leaf whose requires_grad changed) are repeated.  A file that does not load (corrupt, written
by another release, an op no longer registered) is ignored with a note in stats().notes.
An Inductor entry runs its compiled code from its first backward when the compiled graph had
a C entry point (Note [Native first runs]); else its first runs take the eager backend.  After
the first run the job thread loads the whole compiled graph (no compile, ~2.5 s of Inductor's
import and first-load costs; it carries its generated code, so a cleaned Inductor cache dir
does not matter); if that fails, the file is removed and the graph is captured again.
stats().warm_loads counts loaded graphs (they are not captures).
`python -m compiled_bw.cache ls|size|clear` lists, sizes or empties the folder.
The folder must be as trusted as the code: a stored graph is Python code and pickles, run on
load (as Inductor's own cache dir is).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import marshal
import math
import operator
import os
import pickle
import re
import shutil
import sys
import threading
import types

import torch

from ..calls.opaque import USER_CALL_KINDS
from ..core.paths import import_extension, write_atomic
from ..graph.nodes import CUSTOM, LEAF, OPAQUE, TRACE, TRACE_CUSTOM
from ..walk.fastwalk import CSig

FORMAT = 4


def root() -> str | None:
    """COMPILED_BW_CACHE_DIR, or None: warm start off."""
    return os.environ.get("COMPILED_BW_CACHE_DIR") or None


_RELEASE: list = []


def release() -> str:
    """The folder name of this torch release, Python version and compiled_bw source (Note
    [Warm start])."""
    if not _RELEASE:
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"
        _RELEASE.append(f"torch{torch.__version__}-{py}-{_source_hash()}-f{FORMAT}")
    return _RELEASE[0]


def _source_hash(pkg: str | None = None) -> str:
    """A hash of compiled_bw's source files' contents (those under pkg), remembered in the
    cache root under a hash of their names, sizes and modification times (Note [Source hash
    memo])."""
    pkg = pkg or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = [os.path.join(d, f) for d, _, names in sorted(os.walk(pkg))
             for f in sorted(names) if f.endswith((".py", ".cpp", ".h"))]
    stats = hashlib.sha256()
    for path in files:
        st = os.stat(path)
        stats.update(f"{os.path.relpath(path, pkg)}|{st.st_size}|{st.st_mtime_ns}|".encode())
    memo = os.path.join(root(), "sources", stats.hexdigest()[:32])
    with contextlib.suppress(OSError):
        with open(memo) as f:
            return f.read()
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.relpath(path, pkg).encode())
        with open(path, "rb") as fh:
            h.update(fh.read())
    digest = h.hexdigest()[:16]
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(memo), exist_ok=True)
        write_atomic(memo, digest.encode())
    return digest


# Note [Prefetch at import]
# A process's first backward paid two costs that do not depend on it: importing the C++ walk
# (~2.5 ms: dlopen and its init) and, with warm start on, the release folder's source hash
# (~1.5 ms of stat()s).  compiled_bw's import (~1 s) now pays them (prefetch()), where they are
# lost in the import: the walk only where it is already built for these sources (a build
# takes minutes: it stays on the first backward, as before), the hash only with
# COMPILED_BW_CACHE_DIR set.  A walk that does not load says so as before (its warning, now
# at import; the Python walk is used).

def prefetch() -> bool:
    """Note [Prefetch at import]; and graph/custom.py's verdicts answered from disk (Note
    [Stored verdicts]).  Whether warm start is on."""
    from ..graph import custom
    custom.STORED_VERDICTS[0] = _Verdicts()
    from ..walk import fastwalk
    with contextlib.suppress(Exception):
        fastwalk.load_if_built()
    if root() is not None:
        with contextlib.suppress(Exception):
            release()
            threading.Thread(target=_read_ahead, name="compiled_bw warm read-ahead",
                             daemon=True).start()
    return root() is not None


# Note [Read-ahead]
# A warm process's first backward read, checked and unpickled its stored graph (~1 ms) and
# compiled its eager code (~0.6 ms) while the user waited: a fifth of a small model's first
# backward.  The import (prefetch) starts a thread that does both for the READ_AHEAD most
# recently used graph files of the release folder, while the user builds the model and loads
# data; `_read_file` takes a file read ahead instead of reading it (its key compared there as
# for any read), and load takes its compiled code.  A file not read ahead yet (or that failed
# there) is read as before, and its failure is noted there.  The thread runs no torch op and
# imports nothing of the user's: the operators the code calls are checked on load, in the
# main thread.  At most READ_AHEAD files and READ_AHEAD_BYTES are held.  A file a backward
# read itself (the thread had not got to it) is not held afterwards: it may have been removed
# since (a compiled graph that did not load), and a later read must find it gone.  The job thread, which
# loads a stored graph's compiled code after its first run, is started at import too (starting
# it in the first backward cost 1-4 ms there).
READ_AHEAD, READ_AHEAD_BYTES = 8, 8 * 2**20
_READ: dict = {}        # file name -> (payload dict, its eager code's `forward` | None)
_TAKEN: set = set()     # file names a backward read: never held after that (the file may go)


def _read_ahead() -> None:
    try:
        d = folder()
        files = sorted((e for e in os.scandir(d) if e.name.endswith(".graph")),
                       key=lambda e: e.stat().st_mtime, reverse=True)[:READ_AHEAD]
    except OSError:
        return
    budget = READ_AHEAD_BYTES
    for e in files:
        try:
            budget -= e.stat().st_size
            if budget < 0:
                return
            with open(e.path, "rb") as f:
                data = _payload(f.read())
            stored = data.get("eager")
            _READ[e.name] = (data, None if stored is None else _exec(marshal.loads(stored[1])))
            if e.name in _TAKEN:    # the first backward read it meanwhile (or it was removed)
                _READ.pop(e.name, None)
        except Exception:  # noqa: BLE001 -- read again, and noted, by the backward that needs it
            continue


# Note [Source hash memo]
# Reading and hashing the package's ~75 source files costs ~2.5 ms of every process's first
# backward; stat()ing them costs ~0.4 ms.  So the content hash is kept in
# <COMPILED_BW_CACHE_DIR>/sources/<hash of each file's name, size and mtime>: a file changed in
# place gets a new mtime (a new memo, its content hashed again), and a file touched without a
# change gets a new memo with the same content hash (so `pip install -e .` or a checkout that
# rewrites unchanged files still finds its graphs).  A memo is 16 bytes; `clear` removes them.


def folder() -> str:
    return os.path.join(root(), release())


def _keyed(state, opts, key) -> bool:
    """Whether a graph of this call could be kept at all, before its Plan is known: a built-in
    backend, a C++ walk signature (the Python walk's are not checked for process-free
    contents), no create_graph, warm start on."""
    return (root() is not None and state.backend in ("eager", "inductor")
            and not isinstance(key.signature, tuple) and not opts.create_graph)


def storable(state, entry, w, opts, key) -> bool:
    """Note [Warm start]: which graphs are kept."""
    plan = entry.plan
    return (_keyed(state, opts, key)
            and all(s.kind in USER_CALL_KINDS for s in plan.opaque_sites)
            and not plan.mutated_inputs
            and plan.in_layouts is None and plan.out_layouts is None
            and all(w.kinds[i].how in _STORED_KINDS and not w.kinds[i].hooked
                    for i in range(len(w.kinds)))
            and not entry.native_tail)


# Note [Warm start]: the calls a stored graph may make (each calls this step's own node, hook
# or AccumulateGrad; Note [Keys that name user code]) and the node kinds it may hold: not the
# calls of saved-tensor hooks ("hooked", "unpack"), not checkpointed regions (their saved
# tensors carry hooks), not spliced torch.compile'd backwards (AOT).
_STORED_KINDS = frozenset((TRACE, LEAF, OPAQUE, CUSTOM, TRACE_CUSTOM))


# Note [Keys that name user code]
# A graph whose steps call user code (hooks, custom Functions run opaquely) or trace it (a
# custom backward traced in: graph/custom.py Note [What a traced function may read]) has a key
# holding Python objects by identity: the Function's node class, the backward function, code
# objects, modules.  Within a process identity is right; on disk each is written as what it
# stands for in any process (_KeyPickler):
#   - a code object: a SHA-256 of its bytecode, names, flags and constants (code constants
#     hashed the same way, frozensets in a fixed order), not of its file or line numbers: an
#     edit elsewhere in the file keeps it, any change of what it runs is another key;
#   - a function: its module, qualified name and its code's hash (what it reads -- closure
#     cells, defaults, globals -- is in the key already, beside it);
#   - a custom Function's node class: its Function's module and qualified name, the hash of
#     its forward's and backward's code, and its `compiled_bw_traceable` setting;
#   - a module: its name (torch's own is fixed by the release folder).
# A custom op's Function (torch.library register_autograd) is refused: its backward is
# registered, not named by its class, so no key part would see another one.  Anything else
# pickle cannot write by reference makes the key unpicklable: that graph is not stored.
# What such a graph calls at run time is this step's own objects (the walk's nodes and hooks,
# as on any hit), so a key equal on disk means the same graph.


def code_hash(code) -> str:
    """Note [Keys that name user code]: a process-free hash of what a code object runs
    (remembered per code object: a key names the same code many times)."""
    got = _CODE_HASHES.get(code)
    if got is None:
        h = hashlib.sha256()
        _hash_code(code, h)
        got = h.hexdigest()[:32]
        if len(_CODE_HASHES) > 4096:
            _CODE_HASHES.clear()
        _CODE_HASHES[code] = got
    return got


_CODE_HASHES: dict = {}     # code object -> code_hash (equal code objects hash alike)


def _hash_code(code, h) -> None:
    h.update(repr((code.co_name, code.co_qualname if hasattr(code, "co_qualname") else "",
                   code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                   code.co_flags, code.co_names, code.co_varnames, code.co_freevars,
                   code.co_cellvars)).encode())
    h.update(code.co_code)
    for c in code.co_consts:
        _hash_const(c, h)


def _hash_const(c, h) -> None:
    if isinstance(c, types.CodeType):
        h.update(b"<code>")
        _hash_code(c, h)
    elif isinstance(c, (tuple, frozenset)):
        items = list(c)
        if isinstance(c, frozenset):
            items.sort(key=repr)
        h.update(f"<{type(c).__name__} {len(items)}>".encode())
        for x in items:
            _hash_const(x, h)
    else:
        h.update(f"{type(c).__name__}:{c!r};".encode())


class _KeyPickler(pickle.Pickler):
    """Note [Keys that name user code].  Each object named is written as a tagged tuple (keys
    are compared as bytes, never loaded)."""

    def reducer_override(self, obj):
        t = type(obj)
        if t is types.CodeType:
            return tuple, (("code", code_hash(obj)),)
        if t is types.FunctionType:
            return tuple, (("function", obj.__module__, obj.__qualname__,
                            code_hash(obj.__code__)),)
        if t is types.ModuleType:
            return tuple, (("module", obj.__name__),)
        if t is CSig:   # without its hash (of Python objects' ids when it has extra entries)
            return tuple, (("CSig", obj.key, obj.extra, obj.layout),)
        if isinstance(obj, type) and getattr(obj, "_forward_cls", None) is not None:
            return tuple, (_node_class_id(obj),)
        return NotImplemented


def _node_class_id(cls) -> tuple:
    from ..graph.custom import AUTO_OP, TRACEABLE_ATTR, auto_traced
    fwd = cls._forward_cls
    if auto_traced(cls) == AUTO_OP:
        raise pickle.PicklingError(f"{fwd.__qualname__}: a custom op's Function")
    codes = tuple(code_hash(f.__code__) if isinstance(f, types.FunctionType) else repr(f)
                  for f in (getattr(fwd, "forward", None), getattr(fwd, "backward", None)))
    return ("function class", fwd.__module__, fwd.__qualname__, codes,
            repr(getattr(fwd, TRACEABLE_ATTR, None)))


def _dumps_key(key) -> bytes:
    buf = io.BytesIO()
    _KeyPickler(buf, protocol=4).dump(key)
    return buf.getvalue()


class _Verdicts:
    """graph/custom.py Note [Stored verdicts]: <folder>/verdicts/<hash of the key>, holding the
    pickled key (compared on read) and the verdict."""

    def _path(self, key):
        if root() is None:
            return None, None
        try:
            blob = _dumps_key(key)
        except Exception:  # noqa: BLE001 -- a key that does not pickle: not stored
            return None, None
        return os.path.join(folder(), "verdicts",
                            hashlib.sha256(blob).hexdigest()[:40]), blob

    def get(self, key):
        path, blob = self._path(key)
        if path is None:
            return False
        try:
            with open(path, "rb") as f:
                got = pickle.load(f)
        except Exception:  # noqa: BLE001 -- none stored, or unreadable: ask Dynamo
            return False
        if type(got) is not tuple or len(got) != 2 or got[0] != blob or \
                not (got[1] is None or type(got[1]) is str):
            return False
        return got[1]

    def put(self, key, verdict) -> None:
        path, blob = self._path(key)
        if path is not None:
            with contextlib.suppress(OSError):
                write_atomic(path, pickle.dumps((blob, verdict), protocol=4))


def _name(key, backend: str) -> tuple:
    """(file name, pickled key) or (None, None) if the key does not pickle (Note [Keys that
    name user code])."""
    try:
        blob = _dumps_key(key)
    except Exception:  # noqa: BLE001 -- an unpicklable key: not stored
        return None, None
    h = hashlib.sha256(blob + f"|{backend}|{torch.get_num_threads()}".encode()).hexdigest()
    return f"{h[:40]}.graph", blob


def _specs(example: list) -> list:
    return [(tuple(t.shape), tuple(t.stride()), t.dtype, t.device.type, t.device.index)
            for t in example]


def prepare(state, entry, w, opts, key, example: list, walk_sig=None) -> None:
    """A fresh capture: if it is storable, remember where it goes (entry.warm) and, for a
    backend compiled here, store it now (Inductor in the foreground: with its compiled graph,
    else not at all: a later process would capture it anyway); Inductor's background compile
    stores it when done.  `walk_sig`: the Python walk's signature of this step, if it was
    taken (Note [Stored walk signature])."""
    if not storable(state, entry, w, opts, key):
        return
    name, blob = _name(key, state.backend)
    if name is None:
        return
    entry.warm = (name, blob, _specs(example), walk_sig)
    if state.background:
        return
    compiled = None
    if state.backend == "inductor":
        from ..backends.inductor_artifact import dump_live
        try:
            compiled = dump_live(entry.fn)
        except Exception:  # noqa: BLE001 -- a graph that does not serialize is not stored
            compiled = None
        if compiled is None:
            return
    store(entry, compiled)


def _sidecar_path(name: str, digest: str, suffix: str) -> str:
    """Where the sidecar of graph file `name` with this content hash lies (Note [Sidecar
    files])."""
    return os.path.join(folder(), f"{name[:-len('.graph')]}.{digest[:16]}{suffix}")


def _sidecar(name: str, body: bytes, suffix: str) -> tuple:
    """Write body beside the graph file `name` under its content hash (Note [Sidecar files]);
    (size, hex digest)."""
    digest = hashlib.sha256(body).hexdigest()
    path = _sidecar_path(name, digest, suffix)
    if not (os.path.exists(path) and os.path.getsize(path) == len(body)):
        write_atomic(path, body)
    return len(body), digest


def store(entry, compiled: bytes | None) -> None:
    """Write entry's file and its sidecars (Note [Warm start], Note [Sidecar files]); any
    failure leaves no graph file."""
    name, blob, specs, walk_sig = entry.warm
    try:
        gm = entry.graph_module()
        native = _native_module(entry.native)
        if native is not None:
            native = (native[0], native[1], *_sidecar(name, native[2], ".so"))
        if compiled is not None:
            compiled = _sidecar(name, compiled, ".compiled")
        payload = pickle.dumps({"key": blob, "graph": gm.code, "eager": _eager_code(gm),
                                "plan": entry.plan, "specs": specs, "compiled": compiled,
                                "native": native, "walk_sig": walk_sig}, protocol=4)
        write_atomic(os.path.join(folder(), name), pickle.dumps(
            {"format": FORMAT, "sha256": hashlib.sha256(payload).hexdigest(),
             "payload": payload}, protocol=4))
    except Exception:  # noqa: BLE001 -- a cache that cannot be written is only slower
        return
    trim()


# Note [Stored walk signature]
# On a static graph's first miss under a root, runtime/dynamic.py walks the graph again in
# Python (~3 ms) only to remember its signature: the next miss of that root compares sizes
# with it and captures one dynamic graph for the sizes that changed.  A stored graph keeps that
# signature (the key equal, the walk's is equal: sizes and structure, no object of the
# process), so a process loading it remembers the stored one instead of walking again, and its
# next size goes dynamic as in the process that stored it.  The file is read once for both
# (_read keeps the last read).

_LAST_READ: list = [None]     # (key, what _read returned for it): one slot, set whole


def _read(state, key, opts):
    """(name, blob, path, data) of the checked file stored under `key`, or None: not stored
    (or ignored with a note).  Remembers the last key read (Note [Stored walk signature])."""
    memo = _LAST_READ[0]
    if memo is not None and memo[0] is key:
        return memo[1]
    got = _read_file(state, key) if _keyed(state, opts, key) else None
    _LAST_READ[0] = (key, got)
    return got


def _read_file(state, key):
    name, blob = _name(key, state.backend)
    if name is None:
        return None
    path = os.path.join(folder(), name)
    _TAKEN.add(name)                    # Note [Read-ahead]: read once, by whichever
    ahead = _READ.pop(name, None)
    if ahead is not None:
        data = dict(ahead[0], read_ahead=ahead[1])
        return (name, blob, path, data) if data["key"] == blob else None
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        data = _payload(raw)
        if data["key"] != blob:
            raise ValueError("its key is not the one its name hashes")
    except Exception as e:  # noqa: BLE001 -- never trusted: captured instead
        state.note(f"warm start: ignored the stored graph {path} ({type(e).__name__}: "
                   f"{str(e).splitlines()[0][:160] if str(e) else ''})")
        return None
    return name, blob, path, data


def _payload(raw: bytes) -> dict:
    """The checked contents of a graph file's bytes; raises if they are not ours."""
    outer = pickle.loads(raw)
    if outer.get("format") != FORMAT:
        raise ValueError(f"format {outer.get('format')}, expected {FORMAT}")
    if hashlib.sha256(outer["payload"]).hexdigest() != outer["sha256"]:
        raise ValueError("its checksum does not match its contents")
    return pickle.loads(outer["payload"])


def stored_walk_signature(state, key, opts):
    """The Python walk's signature stored with the graph under `key`, or None (Note [Stored
    walk signature])."""
    got = _read(state, key, opts)
    return None if got is None else got[3].get("walk_sig")


def load(state, key, w, opts) -> dict | None:
    """What is stored under `key` ({"graph", "plan", "specs", "compiled", "name", "blob"}), or
    None: not stored, not for this step, or ignored with a note (Note [Warm start])."""
    got = _read(state, key, opts)
    _LAST_READ[0] = None
    if got is None:
        return None
    name, blob, path, data = got
    data = dict(data)
    try:
        if any(not w.leaves[i].requires_grad for i, _ in data["plan"].leaf_outputs):
            return None     # the capture would refuse it: capture, and let it say why
        data["eager"] = _eager_fn(data.get("eager"), data.pop("read_ahead", None))
    except Exception as e:  # noqa: BLE001 -- never trusted: captured instead
        state.note(f"warm start: ignored the stored graph {path} ({type(e).__name__}: "
                   f"{str(e).splitlines()[0][:160] if str(e) else ''})")
        return None
    with contextlib.suppress(OSError):
        os.utime(path)      # recently used (trim)
    data.update(name=name, blob=blob)
    return data


_NAMESPACE: list = []


def _namespace() -> dict:
    """_globals(), made once (each stored graph's code runs in its own copy)."""
    if not _NAMESPACE:
        _NAMESPACE.append(_globals())
    return _NAMESPACE[0]


def _globals() -> dict:
    """The globals a stored graph's code may name: those FX's code generation gives any graph
    (torch, device, inf, pytree, ...), `operator`, and the eager backend's direct calls of
    opaque calls and delivery points (calls/opaque.py Note [Direct opaque calls]) under the
    names FX gives them."""
    from ..backends.eager import _buffer_add, _buffer_add_
    from ..calls.deliver import deliver_direct
    from ..calls.opaque import opaque_direct
    return {**torch.fx.Graph().python_code(root_module="self").globals, "torch": torch,
            "device": torch.device, "inf": math.inf, "nan": math.nan,
            "NoneType": type(None), "operator": operator,
            "compiled_bw_calls_opaque_opaque_direct": opaque_direct,
            "compiled_bw_calls_deliver_deliver_direct": deliver_direct,
            "compiled_bw_backends_eager__buffer_add": _buffer_add,
            "compiled_bw_backends_eager__buffer_add_": _buffer_add_}


def _exec(code, extra: dict | None = None):
    """The `forward` function a stored graph's code (its source, or that compiled) defines (a
    trusted folder: see Note [Warm start]); extra: more globals."""
    ns = dict(_namespace(), **(extra or {}))
    exec(compile(code, "<compiled_bw stored graph>", "exec") if isinstance(code, str) else code,
         ns)
    return ns["forward"]


def graph_module(code: str) -> torch.fx.GraphModule:
    """The GraphModule of a graph's Python code (GraphModule.code), traced again with FX (what
    unpickling a GraphModule does, without pickling its tracer's state).  Note [Lazy stored
    graphs]: built when something asks for the graph, not on load.  Our own ops
    (`torch.ops.compiled_bw.*`: opaque calls, delivery points) are called through stand-ins
    that record the call: one whose arguments hold no traced value (a hook called with
    `[None]`) would otherwise run during the trace, outside any backward."""
    tracer = torch.fx.Tracer()
    ours: dict = {}

    def stand_in(m) -> str:
        name = f"_compiled_bw_{m.group(1)}"
        if name not in ours:
            op = getattr(torch.ops.compiled_bw, m.group(1)).default
            ours[name] = lambda *args, op=op, **kwargs: tracer.create_proxy(
                "call_function", op, args, kwargs)
        return name + "("

    class Stored(torch.nn.Module):
        forward = _exec(_OUR_OPS.sub(stand_in, code), ours)
    root = Stored()
    return torch.fx.GraphModule(root, tracer.trace(root), "Stored")


_OUR_OPS = re.compile(r"\btorch\.ops\.compiled_bw\.(\w+)\.default\(")


def _eager_code(gm: torch.fx.GraphModule) -> tuple | None:
    """(the names of the operators it calls, the marshalled code object) of the eager
    backend's code of gm (backends/eager.py: boxed, values dropped after their last use), if
    it runs with the stored graph's globals alone and reads nothing of its module (Note [Lazy
    stored graphs]); else None."""
    from ..backends.eager import compile_eager
    boxed = compile_eager(gm, []).__self__
    names = boxed.graph.python_code(root_module="self").globals
    if not set(names) <= set(_namespace()) or "self." in boxed.code:
        return None
    return (sorted(set(_OPS.findall(boxed.code))),
            marshal.dumps(compile(boxed.code, "<compiled_bw stored graph>", "exec")))


def _eager_fn(stored: tuple | None, forward=None):
    """The eager backend's callable (`fn(box)`) of stored eager code, or None.  Raises if the
    code calls an operator this process does not have (the file is then ignored).  forward:
    that code's function, compiled already (Note [Read-ahead])."""
    if stored is None:
        return None
    ops, code = stored
    for name in ops:
        target = torch
        for part in name.split(".")[1:]:
            target = getattr(target, part)
    if forward is None:
        forward = _exec(marshal.loads(code))
    return lambda box: forward(None, box)   # (its code reads nothing of `self`)


_OPS = re.compile(r"\btorch\.ops(?:\.\w+)+")


# Note [Lazy stored graphs]
# Loading a stored graph builds no FX GraphModule: tracing its code again (symbolic_trace) and
# the eager backend's copy of it cost ~140 ms for a graph of ~180 ops, 20x eager autograd's
# whole first backward of that model.  The file also keeps the eager backend's generated code
# (backends/eager.py: the boxed copy, which drops each value after its last use), executed on
# load as the entry's fn: plain torch calls, as compile_eager's module would run them.  It is
# kept compiled (marshal: ~7 ms less than compiling its source; the folder is per Python
# version), with the operators it calls, which are looked up on load: one this process lacks
# makes the file ignored, as a trace of its code would.  The
# GraphModule is built only when asked for (Compiled.graph_module(): last_graph(), explain(),
# a repro), from the stored graph code.  Inductor's first runs take the stored C entry point
# (Note [Native first runs]) and its later ones the compiled graph the job thread loads; none
# of these needs the GraphModule.


def _native_module(native) -> tuple | None:
    """(module name, function name, the .so's bytes) of a C entry point (Note [Inductor: C entry
    point]: an Inductor C++-wrapper module's function), or None."""
    mod = getattr(native, "__self__", None)
    path = getattr(mod, "__file__", None)
    if native is None or path is None or not path.endswith(".so"):
        return None
    with open(path, "rb") as f:
        return mod.__name__, native.__name__, f.read()


def compiled_bytes(data: dict) -> bytes:
    """The compiled graph's bytes stored beside a graph (read on the job thread, after the
    first run: Note [Sidecar files]); raises if missing or not what was stored."""
    size, digest = data["compiled"]
    with open(_sidecar_path(data["name"], digest, ".compiled"), "rb") as f:
        body = f.read()
    if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
        raise ValueError("its compiled graph's file does not match the stored checksum")
    return body


def native_entry(data: dict):
    """The C entry point stored with a graph, imported from its .so (beside the stored graph,
    Note [Sidecar files]) without importing Inductor (Note [Native first runs]); None if
    there is none.  Raises what importing it raises (a missing file too)."""
    stored = data.get("native")
    if stored is None:
        return None
    module_name, fn_name, size, digest = stored
    import sys

    from ..torchapi.autograd import inductor_module_env
    mod = sys.modules.get(module_name)
    if mod is None:
        path = _sidecar_path(data["name"], digest, ".so")
        if os.path.getsize(path) != size:
            raise ValueError(f"{path} is not the size stored with its graph")
        os.environ.update(inductor_module_env())
        mod = sys.modules[module_name] = import_extension(module_name, path)
    return getattr(mod, fn_name)


# Note [Native first runs]
# A stored Inductor graph whose compiled callable had a C entry point (the C++ wrapper's module,
# backends/inductor.py Note [Inductor: C entry point]) keeps that module's .so too.  A later
# process that loads the graph imports the .so directly (it is a CPython extension module: what
# Inductor's CppPythonBindingsCodeCache does, without importing Inductor) and sets it as the
# entry's `native`: the first backward already takes the C++ hit path (runtime/run.py Note
# [C++ hit path]), whose conditions it meets like any hit: the loaded entry is installed
# without Slots, as a hit runs.  The full compiled graph (for the Python path) still loads on
# the job thread.

# Note [Sidecar files]
# The compiled graph's bytes (~0.4 MB for a small model) and the C entry point's .so (~0.3 MB)
# are kept beside the graph file, not in it: `<name>.<digest>.compiled` and
# `<name>.<digest>.so`, named by the first 16 hex digits of their SHA-256, which the graph
# file holds with their sizes.  A first backward then reads, checks and unpickles ~0.1 MB
# instead of ~0.8 MB (~2 ms less), imports the .so where it lies (its size checked, as the .so
# written from the graph file was before), and the job thread reads and checks the compiled
# bytes after the first run.  Sidecars are written before the graph file, which is renamed
# into place last: a reader that sees a graph file sees its sidecars.  Two processes storing
# one graph at once write sidecars of different names if their bytes differ, so a graph file
# never names another writer's bytes.  A missing or damaged sidecar is a note (the .so: the
# first runs take the eager backend) or a recapture (the compiled bytes, as a compiled graph
# that does not load).  Removing a graph removes every `<name>.*` file.


def forget(entry) -> None:
    """Remove entry's file and its .so (it did not load, or verify found it wrong)."""
    _remove(os.path.join(folder(), entry.warm[0]))


def _sidecar_of(f: str) -> str | None:
    """The stem of the graph whose sidecar file name `f` is (Note [Sidecar files]), or None (a
    graph file, or a file being written)."""
    return None if f.endswith((".graph", ".tmp")) else f.split(".")[0]


def _sidecars(graph_path: str) -> list:
    """The sidecar files of a graph file (Note [Sidecar files])."""
    stem = os.path.basename(graph_path)[:-len(".graph")]
    with contextlib.suppress(OSError):
        return [os.path.join(os.path.dirname(graph_path), f)
                for f in os.listdir(os.path.dirname(graph_path)) if _sidecar_of(f) == stem]
    return []


def _remove(graph_path: str, sidecars: list | None = None) -> None:
    """A graph file and its sidecars (listed from its folder unless given)."""
    for p in (graph_path, *(_sidecars(graph_path) if sidecars is None else sidecars)):
        with contextlib.suppress(OSError, TypeError):
            os.remove(p)


def fakes(specs: list) -> list:
    """Fake tensors of the stored input metadata (for loading Inductor's compiled graph)."""
    from ..backends.inductor_artifact import fake_mode
    with fake_mode():
        return [torch.empty_strided(s, st, dtype=dt, device=torch.device(dev, idx)
                                    if idx is not None else torch.device(dev))
                for s, st, dt, dev, idx in specs]


def limit_bytes() -> int:
    return int(float(os.environ.get("COMPILED_BW_CACHE_MB", "1024")) * 2**20)


def entries() -> list:
    """(path, size with its sidecars, mtime) of every stored graph under the cache root (all
    releases)."""
    return [e[:3] for e in _entries()]


def _entries() -> list:
    """entries() with each graph's sidecar paths: one listing of each folder."""
    d = root()
    out = []
    if d is None or not os.path.isdir(d):
        return out
    for sub, _, files in os.walk(d):
        sizes: dict = {}
        side: dict = {}
        for f in files:     # a sidecar's stem is its graph's: Note [Sidecar files]
            with contextlib.suppress(OSError):
                stem = f.split(".")[0]
                sizes[stem] = sizes.get(stem, 0) + os.path.getsize(os.path.join(sub, f))
                if _sidecar_of(f) is not None:
                    side.setdefault(stem, []).append(os.path.join(sub, f))
        for f in files:
            if f.endswith(".graph"):
                p = os.path.join(sub, f)
                stem = f.split(".")[0]
                with contextlib.suppress(OSError):
                    st = os.stat(p)
                    out.append((p, sizes.get(stem, st.st_size), st.st_mtime, side.get(stem, [])))
    return out


def trim() -> None:
    """Remove the least recently used files until the folder fits COMPILED_BW_CACHE_MB."""
    files = sorted(_entries(), key=lambda e: e[2])
    total, cap = sum(e[1] for e in files), limit_bytes()
    for p, size, _, sidecars in files:
        if total <= cap:
            break
        _remove(p, sidecars)
        total -= size


def clear() -> int:
    n = 0
    for p, _, _, sidecars in _entries():
        _remove(p, sidecars)
        n += 1
    if root() is not None:      # Note [Source hash memo]
        shutil.rmtree(os.path.join(root(), "sources"), ignore_errors=True)
    return n

