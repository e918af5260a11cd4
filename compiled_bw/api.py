"""Public API: enable, stats, reset, last_graph, last_compiled, explain.

Consumes user calls of torch.autograd.backward / grad (hence Tensor.backward) while enabled on
this thread; produces compiled runs (runtime/run.py) or eager runs with a recorded reason.
Interception: torch.autograd's module-level `_engine_run_backward` (the one call both
backward() and grad() make after validating their arguments with torch's own code, so
argument errors are eager's by construction) is replaced once, on first enable(); the
replacement checks a thread-local flag and is a plain pass-through when not enabled.
`torch.autograd.backward` is replaced too, for one fast path only (`_backward`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.autograd

from . import compress, config, torchapi
from .backends import install_loaded as _install_backends
from .backends import lookup_backend
from .core.thread import THREAD
from .errors import Unsupported
from .graph import custom as _custom
from .graph import hooks as _hooks
from .runtime import background, repro
from .runtime import engine_state as _engine_state
from .runtime.cache import Cache
from .runtime.run import FallbackToEager, compiled_call
from .runtime.verify import runs_from as verify_runs
from .torchapi import autograd as torch_autograd
from .torchapi import dynamo as torch_dynamo

_current_dispatch_mode = torch_dynamo.current_dispatch_mode

log = logging.getLogger("compiled_bw")


@dataclasses.dataclass
class Stats:
    captures: int = 0
    cache_hits: int = 0                     # runs of a compiled graph found in the cache
    fallbacks: int = 0                      # eager autograd runs + failed background compiles
    fallback_reasons: list = dataclasses.field(default_factory=list)   # one per fallback
    compile_seconds: float = 0.0
    recompile_reasons: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)   # compiled, with a documented deviation
    background_compiles: int = 0            # graphs switched to the slow backend's callable
    background_compile_seconds: float = 0.0  # their compile + load time (worker process)
    native_runs: int = 0                    # cache hits run in one C++ call (Note [C++ hit path])
    cudagraph_replays: int = 0              # runs replayed as a CUDA graph (enable(cudagraphs=True))
    dynamic_captures: int = 0               # captures with symbolic sizes (also in `captures`)
    dynamic_hits: int = 0                   # runs of a dynamic graph for a step's sizes
    inductor_compiles: int = 0              # Inductor compiles started (here or in the
    #                                         background worker; failed ones included)
    recompute_captures: int = 0             # Dynamo traces of checkpointed regions that did
    #                                         not opt in (Note [Guarded recomputation])
    recompute_guard_failures: int = 0       # steps where no such trace's guards held
    recompute_refused: int = 0              # regions Dynamo refused (side effect, graph break)
    verified_runs: int = 0                  # runs checked against eager (enable(verify=...))
    verify_mismatches: int = 0              # of those, graphs dropped for a difference
    warm_loads: int = 0                     # graphs loaded from COMPILED_BW_CACHE_DIR, not
    #                                         captured (runtime/warm.py Note [Warm start])


class _Global:
    """Process-wide state: caches (per backend), stats, the last captured graph."""

    def __init__(self) -> None:
        self.caches: dict = {}
        self.stats = Stats()
        self.last_entry = None      # the last capture's Compiled (its graph built when asked)
        self.last_plan = None
        self.last_fn = None
        self.lock = threading.Lock()
        self.states: dict = {}      # enable() setting (named backends) -> _State
        self.stopped: set = set()   # roots compilation stopped for (runtime/cache.py)


_G = _Global()


class Settings(NamedTuple):
    """One enable() setting (hashable: named backends' settings key their _State)."""
    backend: Any                # a registered name, or a callable (gm, example_inputs) -> fn
    strict: bool
    cache_size_limit: int
    background_compile: bool
    cudagraphs: bool
    dynamic: bool | None = None  # sizes symbolic: None after a size change, True always, False never
    verify: int = 0              # runs verified per graph and callable (runtime/verify.py)
    verify_user_code: bool = False  # also graphs that call user code (Note [Verify])


def _in_background(backend, background_compile: bool) -> bool:
    """Whether new graphs compile in the background: Inductor only (Note [Background compile],
    runtime/background.py)."""
    return bool(background_compile) and backend == "inductor"


class _State:
    """What runtime/run.py needs for one call: cache, stats, backend, limits, logging."""

    def __init__(self, cfg: Settings) -> None:
        backend = self.backend = cfg.backend
        self.strict, self.cache_size_limit, self.cudagraphs = \
            cfg.strict, cfg.cache_size_limit, cfg.cudagraphs
        self.dynamic = cfg.dynamic
        self.verify = cfg.verify
        self.verify_user_code = cfg.verify_user_code
        self.backend_key = backend if isinstance(backend, str) else id(backend)
        self.background = _in_background(backend, cfg.background_compile)
        self.cache = _G.caches.setdefault(self.backend_key, Cache())
        self.stats = _G.stats

    @property
    def compile_fn(self):
        """Looked up when a graph is compiled here: a background compile never imports the
        backend (Inductor: ~1.4 s) into this process's first backward."""
        return lookup_backend(self.backend)

    def log_recompile(self, reason: str) -> None:
        self.stats.recompile_reasons.append(reason)
        config.emit("recompiles", "capturing the backward: %s", reason)

    def note(self, text: str) -> None:
        self.stats.notes.append(text)
        config.emit("fallbacks", "note: %s", text)

    def stop_compiling(self, root_key, reason: str) -> None:
        """runtime/cache.py Note [Cache policy]: said once per root, as a warning and a note."""
        if root_key in _G.stopped:
            return
        _G.stopped.add(root_key)
        roots = "/".join(map(str, root_key.root_types))
        text = (f"compiled_bw stopped compiling backwards from {roots}: "
                f"{self.cache.count(root_key)} graphs captured, "
                f"{self.cache.hits.get(root_key, 0)} reused (last change: {reason}); they run "
                "eager autograd from now on. Raise enable(cache_size_limit=...) or make the "
                "graph stable (explain() lists the recaptures)")
        self.note(text)
        warnings.warn(text, stacklevel=4)

    def compiled_in_background(self, entry, background: bool = True):
        """The callback runtime/background.py calls on its worker when entry's compile ends
        (background=False: runtime/run.py's deferred compile in this process)."""
        stats, eager_fn = self.stats, entry.fn

        def done(seconds: float, error: str | None, fn) -> None:
            if error is not None:
                self.compile_failed(f"{'background ' if background else ''}compile failed, "
                                    f"this graph stays on the eager backend: {error}"
                                    + repro.after_compile_failure(entry.graph_module(), self.backend, error))
                return
            if background:
                stats.background_compile_seconds += seconds
                stats.background_compiles += 1
            if _G.last_fn is eager_fn:
                _G.last_fn = fn
        return done

    def compile_failed(self, reason: str) -> None:
        """A graph stays on the eager backend: a fallback (users read these), with its reason."""
        self.stats.fallbacks += 1
        self.stats.fallback_reasons.append(reason)
        config.emit("fallbacks", "%s", reason)

    def record_capture(self, entry) -> None:
        _G.last_entry = entry
        _G.last_plan = entry.plan
        _G.last_fn = entry.fn
        if config.wants("graph"):   # (print_readable imports torch.distributed.tensor: ~0.3 s)
            config.emit("graph", "captured backward graph:\n%s", entry.graph_module().print_readable(False))


_original_engine_run_backward = None
_original_backward = None


def install() -> None:
    """Patch torch as `import compiled_bw` does (again after `uninstall()`): hook registration,
    `Function.apply` and the engine-state queries are observed from then on (hooks registered
    and custom Functions applied while uninstalled are not: a backward through one of those
    Functions runs eager autograd, as for ones applied before the import)."""
    _hooks.install()
    _custom.install()
    _engine_state.install()
    _install_backends()


def uninstall() -> None:
    """Turn compiled_bw off completely: every function of torch it replaced is torch's own
    again (torchapi/autograd.py PATCHED) and every cached graph is dropped.  `enable()`
    installs it again."""
    if THREAD.settings:
        raise RuntimeError("compiled_bw.uninstall() inside compiled_bw.enable(): leave the "
                           "with-block first")
    with _G.lock:
        torchapi.uninstall()
        _G.states.clear()


def _install() -> None:
    """Everything install() does, and the backward entry points (patched on the first enable(),
    so that until then torch's backward runs without even a pass-through)."""
    global _original_engine_run_backward, _original_backward
    if torchapi.is_patched("backward"):
        return
    install()
    with _G.lock:
        torch_autograd.patch("engine_run_backward", _engine_run_backward)
        torch_autograd.patch("backward", _backward)   # Tensor.backward looks it up per call
        _original_engine_run_backward = torch_autograd.original("engine_run_backward")
        _original_backward = torch_autograd.original("backward")


def _backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
              grad_variables=None, inputs=None):
    """torch.autograd.backward once installed.  While enabled, `loss.backward()` on a plain
    real scalar (no gradient, inputs or retain_graph=True) skips torch's argument handling
    (~20 µs of Python on every step): it would pass exactly these arguments to
    _engine_run_backward, with a grad of ones made as torch makes it.  Every other call, and
    every call while not enabled or with another function installed over
    `torch.autograd._engine_run_backward`, is torch's own."""
    if (THREAD.settings and type(tensors) is torch.Tensor and grad_tensors is None
            and grad_variables is None and inputs is None and create_graph is False
            and (retain_graph is None or retain_graph is False) and tensors.requires_grad
            and tensors.dtype.is_floating_point and not tensors.is_nested
            and tensors.numel() == 1 and not torch_autograd.functorch_transforms_active()
            and not torch_autograd.torch_function_mode_enabled()
            # what torch.autograd.backward would call is still ours (not something installed
            # over it since: torch.compiler._patch_engine_backward, a user's wrapper)
            and torch_autograd.current("engine_run_backward") is _engine_run_backward):
        grad = torch.ones_like(tensors, memory_format=torch.preserve_format)
        _engine_run_backward((tensors,), (grad,), False, False, (), allow_unreachable=True,
                             accumulate_grad=True)
        return
    _original_backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables,
                       inputs)


def _engine_run_backward(t_outputs, *args, **kwargs):
    stack = THREAD.settings
    if not stack:
        return _original_engine_run_backward(t_outputs, *args, **kwargs)
    mode = _current_dispatch_mode()
    if mode is not None:                # Note [Dispatch modes of the user's]
        if isinstance(mode, torch_dynamo.TRACE_MODES) or \
                type(mode).__module__.startswith("compiled_bw."):
            return _original_engine_run_backward(t_outputs, *args, **kwargs)
        return _intercepted(stack[-1], t_outputs, *args, _refuse=(
            f"a TorchDispatchMode is active ({type(mode).__qualname__}): eager's backward runs "
            "every op through it, a compiled graph would not"), **kwargs)
    if torch.compiler.is_compiling():   # Note [A backward while torch.compile compiles]
        return _intercepted(stack[-1], t_outputs, *args, _refuse=_DURING_COMPILE, **kwargs)
    if _node_logging_on():              # Note [Eager's node logging]
        return _intercepted(stack[-1], t_outputs, *args, _refuse=_NODE_LOGGING, **kwargs)
    if THREAD.creation_hooks:           # graph/hooks.py Note [Node creation hooks]
        return _intercepted(stack[-1], t_outputs, *args, _refuse=_CREATION_HOOKS, **kwargs)
    return _intercepted(stack[-1], t_outputs, *args, **kwargs)


# Note [Eager's node logging]
# With torch's autograd logging at DEBUG (TORCH_LOGS=autograd, or the logger
# torch.autograd.graph set to DEBUG), eager's _engine_run_backward -- the function compiled_bw
# replaces -- gives every node of the graph a prehook that logs "Executing: <node> with
# grad_outputs: [...]" as the node runs: one record per node, in eager's order.  A compiled
# graph runs no nodes, so such a backward runs eager autograd (which logs), with this reason
# (found by PyTorch's test_autograd.py TestAutogradLogging on torch 2.15: 0 records instead of 5).
_node_logging_on = torch_autograd.node_logging_on
_CREATION_HOOKS = ("a torch.autograd.graph.node_creation_hook is active: eager calls it for every "
                   "node its backward creates (create_graph=True, checkpoint recomputation, user "
                   "code), a compiled graph creates other nodes or none; leave the "
                   "node_creation_hook context before the backward to compile it")
_NODE_LOGGING = ("torch's autograd logging is at DEBUG (TORCH_LOGS=autograd): eager autograd "
                 "logs every node it runs, a compiled graph runs none; raise the logger "
                 "torch.autograd.graph above DEBUG to compile this backward")


# Note [A backward while torch.compile compiles]
# torch.compiler.is_compiling() is True for a whole torch.compile session: Dynamo's tracing
# and whatever runs inside it -- a custom backend, AOTAutograd, code that backend calls.  A
# backward on real tensors there (no tracing mode active: those pass through above) is the
# user's, and eager autograd runs it, with this reason: our capture would run its own make_fx
# and Inductor inside torch.compile's session and tracing context.
_DURING_COMPILE = ("torch.compiler.is_compiling() is True: a backward run while torch.compile "
                   "compiles (in a backend, or code it calls) runs eager autograd; run it "
                   "outside the compile to have it compiled")


# Note [Dispatch modes of the user's]
# torch's own tracing (Dynamo, AOTAutograd's joint graph, make_fx) calls autograd.grad on
# fake/functional tensors under its dispatch modes (TRACE_MODES): not the user's backward, it
# passes through.  A mode of the user's (FlopCounterMode, allow_mutation_on_saved_tensors,
# DebugMode, a logging mode) sees every op of eager's backward, which a compiled graph's ops
# would bypass: that backward runs eager autograd, and the fallback says why.


def _state(cfg: Settings) -> _State:
    named = isinstance(cfg.backend, str)
    state = _G.states.get(cfg) if named else None
    if state is None:
        state = _State(cfg)
        if named:
            _G.states[cfg] = state
    return state


def _intercepted(cfg, t_outputs, grad_tensors, keep_graph, create_graph, inputs=(),
                 allow_unreachable=False, accumulate_grad=True, _refuse=None):
    if not accumulate_grad and not inputs:
        # the C++ engine's own argument check (python_engine.cpp), which torch 2.11-2.12's grad()
        # leaves to it (2.13+ raise in Python first): PyTorch's test_grad_empty_inputs
        raise ValueError("grad requires non-empty inputs.")
    state = _state(cfg)
    try:
        if _refuse is not None:
            raise FallbackToEager(_refuse)
        return compiled_call(state, tuple(t_outputs), tuple(grad_tensors), keep_graph,
                             create_graph, tuple(inputs), allow_unreachable, accumulate_grad)
    except FallbackToEager as fb:
        if state.strict and not fb.is_error:
            raise Unsupported(
                f"compiled_bw cannot compile this backward: {fb.reason}. Drop strict=True to "
                "let compiled_bw run eager autograd for it.") from None
        _G.stats.fallbacks += 1
        _G.stats.fallback_reasons.append(fb.reason)
        config.emit("fallbacks", "running eager autograd: %s", fb.reason)
    return _original_engine_run_backward(
        t_outputs, grad_tensors, keep_graph, create_graph, inputs,
        allow_unreachable, accumulate_grad=accumulate_grad)


class enable(contextlib.ContextDecorator):
    """Run backward()/grad() calls on this thread through compiled_bw.

    >>> import torch, compiled_bw
    >>> w = torch.randn(3, 3, requires_grad=True)
    >>> with compiled_bw.enable(backend="eager"):
    ...     (w.tanh() @ w).sum().backward()
    >>> w.grad.shape
    torch.Size([3, 3])

    Re-entrant: nesting works, and leaving restores the previous setting, also on errors.
    Also a decorator (`@compiled_bw.enable(...)`).
    background_compile (backend="inductor"; default: on, COMPILED_BW_BACKGROUND_COMPILE=0 turns
    it off): the first backward of a new graph runs it on the eager backend while Inductor
    compiles it in a worker process; later backwards use Inductor's code once it is ready
    (`wait_for_compiles()` waits for that).  Off: the first backward compiles, then runs
    Inductor's code (Note [Background compile]).
    cudagraphs: replay each compiled graph that runs on one CUDA device with no user code
    inside as a CUDA graph (runtime/cudagraphs.py Note [CUDA graphs]); other graphs run as
    usual, and `stats().notes` says why.
    cache_size_limit: static graphs kept per root signature; one more evicts the least
    recently used.  A root that keeps recapturing without reuse (16 x this many graphs, fewer
    hits than captures) stops compiling, with a warning (runtime/cache.py Note [Cache policy]).
    dynamic (backends "eager" and "inductor"): None (default) captures a graph with static
    sizes first and, when a later backward differs from it only in sizes, once more with those
    sizes symbolic, reused for every later size its shape guards accept
    (trace/dynamic.py Note [Dynamic shapes]); True makes sizes symbolic from the first
    capture; False captures once per set of sizes.
    verify: check each graph's first runs against eager autograd (True: 2 runs per graph and
    compiled callable, an int: that many; default: COMPILED_BW_VERIFY, off when unset).  A
    verified run costs eager's backward on top of the compiled one; a difference drops the
    graph (its backwards run eager autograd), warns, writes a repro script and gives eager's
    grads (runtime/verify.py Note [Verify]; stats().verified_runs / verify_mismatches).
    verify_user_code: also verify graphs whose backward calls user code (hooks, custom
    Functions run as themselves): that code then runs twice per verified backward, once in
    eager's run and once in ours (default: COMPILED_BW_VERIFY_USER_CODE=1, off when unset).
    Graphs with hooks on leaves or retain_grad() are never verified (Note [Verify]).
    A class, not a generator: entering and leaving it is on every step's path (~1 µs).
    """
    __slots__ = ("_cfg",)

    def __init__(self, backend: str | Callable = "eager", *, strict: bool = False,
                 cache_size_limit: int = 8, background_compile: bool | None = None,
                 cudagraphs: bool = False, dynamic: bool | None = None,
                 verify: bool | int | None = None,
                 verify_user_code: bool | None = None) -> None:
        if background_compile is None:
            background_compile = os.environ.get("COMPILED_BW_BACKGROUND_COMPILE", "1") not in (
                "", "0")
        if dynamic not in (None, True, False):
            raise ValueError(f"enable(dynamic=...) takes None, True or False, not {dynamic!r}")
        if verify_user_code is None:
            verify_user_code = os.environ.get("COMPILED_BW_VERIFY_USER_CODE", "") not in (
                "", "0")
        cfg = Settings(backend, strict, cache_size_limit, bool(background_compile),
                       bool(cudagraphs), dynamic, verify_runs(verify), bool(verify_user_code))
        if not (isinstance(backend, str) and cfg in _G.states):
            lookup_backend(backend, load=not _in_background(backend, background_compile))
            _install()
            if isinstance(backend, str):
                _state(cfg)     # fail early once per named setting: _state caches it
        self._cfg = cfg

    def __enter__(self) -> None:
        if THREAD.settings is None:
            THREAD.settings = []
        THREAD.settings.append(self._cfg)

    def __exit__(self, *exc) -> None:
        THREAD.settings.pop()


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every background compile has finished (then later steps run the compiled
    callables); False if `timeout` seconds passed first."""
    return background.wait(timeout)


def stats() -> Stats:
    """Counters since the last reset(): captures, cache_hits, fallbacks (+ reasons), compile time."""
    from .checkpoint import guarded
    s = _G.stats
    s.recompute_captures = guarded.COUNTS["captures"]
    s.recompute_guard_failures = guarded.COUNTS["guard_failures"]
    s.recompute_refused = guarded.COUNTS["refused"]
    return s


def reset() -> None:
    """Clear every cache and the stats."""
    for c in _G.caches.values():
        c.clear()
    _G.caches.clear()
    _G.states.clear()       # they hold the caches and stats
    _G.stopped.clear()
    _G.stats = Stats()
    from .calls import unpacked
    from .checkpoint import guarded
    from .graph import custom
    from .walk import fastwalk
    fastwalk.forget_roots()
    guarded.reset()
    custom.reset()
    unpacked.reset()
    _G.last_entry = None
    _G.last_plan = None
    _G.last_fn = None


def last_graph() -> torch.fx.GraphModule | None:
    """The FX GraphModule of the most recent capture."""
    return None if _G.last_entry is None else _G.last_entry.graph_module()


def last_compiled() -> Callable | None:
    """The backend's compiled callable of the most recent capture (boxed: `fn(box)`).
    For backend="inductor" its `.source_code` is the generated wrapper and kernels."""
    return _G.last_fn


def explain() -> str:
    """A readable summary: counters, fallback reasons, and the last captured graph."""
    s = stats()
    head = (f"captures={s.captures} cache_hits={s.cache_hits} fallbacks={s.fallbacks} "
            f"compile_seconds={s.compile_seconds:.2f}")
    if s.inductor_compiles:
        head += f" inductor_compiles={s.inductor_compiles}"
    if s.warm_loads:
        head += f" warm_loads={s.warm_loads}"
    if s.verified_runs:
        head += f" verified_runs={s.verified_runs} verify_mismatches={s.verify_mismatches}"
    if s.dynamic_captures:
        head += f" dynamic_captures={s.dynamic_captures} dynamic_hits={s.dynamic_hits}"
    if s.recompute_captures or s.recompute_refused:
        head += (f" checkpoint regions: dynamo_traces={s.recompute_captures} "
                 f"guard_failures={s.recompute_guard_failures} refused={s.recompute_refused}")
    lines = [head]
    lines += [f"  fallback: {r}" for r in s.fallback_reasons[-10:]]
    lines += [f"  recapture: {r}" for r in s.recompile_reasons[-10:]]
    if _G.last_plan is not None and _G.last_plan.auto_traced:
        lines.append("  custom Functions traced without opt-in: "
                     f"{', '.join(_G.last_plan.auto_traced)}")
    if _G.last_plan is not None and _G.last_plan.opaque_names:
        lines.append(f"  opaque nodes: {', '.join(_G.last_plan.opaque_names)}")
    if (compression := compress.last_report()) is not None:
        lines.append(f"  {compression}")
    if (graph := last_graph()) is not None:
        lines.append(graph.print_readable(False))
    return "\n".join(lines)
