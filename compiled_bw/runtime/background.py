"""Background compiles: a new graph runs on the eager backend at once while a slow backend
(Inductor) compiles it on a worker thread; the cache entry switches to the compiled callable
when it is ready.

Consumes a cache entry (runtime/cache.py Compiled) whose fn is the eager backend's, the slow
backend's compile function, the GraphModule, this step's Box (made into fake tensors here, on
the caller's thread, so the worker touches no real tensor) and the graph's opaque sites;
produces, later, `entry.fn` replaced by the compiled callable, or, if that compile fails, a note
in stats() and the eager-backend fn kept (correct, only slower).

Note [Background compile]
Inductor takes 3-30 s to compile a backward on this machine (cold cache), torch compiled
autograd 7-40 s; the capture itself takes 0.2-0.7 s.  So the first backward of a new graph
runs it on the `eager` backend (FX code, op by op: the same aten ops Inductor would fuse), and
then Inductor compiles in the background (started after that run: a worker holding the GIL
would slow it); later steps pick up whichever callable the entry holds.
Both callables are boxed and compute the same graph, so switching is invisible except in
speed and float rounding.  The worker sees only fake tensors and the opaque sites' output specs
(a stub step: no autograd node, no saved tensor is kept alive by a pending compile).
`wait_for_compiles()` blocks until none is pending (tests, benchmarks).
Opt-in (`enable(background_compile=True)` or COMPILED_BW_BACKGROUND_COMPILE=1), because torch's
FX tracing is process-global: Tracer.trace sets one module-level flag and patcher, and Inductor
traces while compiling (pattern replacements, even its loop-body codegen).  So
  - captures, background compiles and torch.compile's own compiles hold one lock
    (`trace_lock`, Dynamo's compile lock): they take turns;
  - but a call of an already torch.compile'd function on another thread while the worker
    traces raises Dynamo's "using FX to symbolically trace a dynamo-optimized function": do
    not run compiled forwards until `wait_for_compiles()` returns.  Nothing here can see or
    order those calls, which is why this is not the default.
"""
from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from ..capture.opaque import current_step

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending: set[Future] = set()
_own_trace_lock = threading.RLock()


def trace_lock():
    """The lock held while anything here traces or compiles: Dynamo's own compile lock, which
    torch.compile holds for a whole compile.  FX tracing (make_fx, hence our captures,
    Inductor's passes, AOTAutograd) patches module globals through one process-wide
    `CURRENT_PATCHER`, so two threads tracing at once break each other (and a user's
    torch.compile on the main thread must not run into our background compile).  Holding it,
    our captures, our background compiles and torch.compile take turns."""
    try:
        from torch._dynamo.convert_frame import compile_lock
    except ImportError:     # a torch without Dynamo: only our own threads to order
        return _own_trace_lock
    return compile_lock


class _SitesOnly:
    """What fake opaque impls read while a backend retraces (capture/opaque.py)."""
    __slots__ = ("sites",)

    def __init__(self, sites: list) -> None:
        self.sites = sites


def fake_inputs(example: list) -> list:
    """Fake copies of the Box (shapes, strides, dtypes), in the fake mode make_fx would make."""
    import torch._functorch.config as functorch_config
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    with functorch_config.patch(fake_tensor_allow_unsafe_data_ptr_access=False):
        mode = FakeTensorMode(allow_fallback_kernels=True, shape_env=ShapeEnv(),
                              static_shapes=True)
    return [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example]


def prepare(entry, compile_fn, gm, example: list, sites: list, done):
    """Returns start(): it submits the compile of gm with compile_fn to the worker, which then
    sets entry.fn and calls done(seconds, error_text_or_None, fn_or_None).  The fake inputs are
    made now (the Box's tensors are freed by the first run); the caller starts the compile
    after that first run, which a worker holding the GIL would slow down."""
    fakes = fake_inputs(example)
    return lambda: _submit(entry, compile_fn, gm, fakes, sites, done)


def _submit(entry, compile_fn, gm, fakes: list, sites: list, done) -> None:
    global _pool

    def job():
        t0 = time.perf_counter()
        try:
            with trace_lock(), current_step(_SitesOnly(sites)):
                fn = compile_fn(gm, fakes)
        except Exception as e:  # noqa: BLE001 -- any failure: the eager-backend fn stays
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            done(time.perf_counter() - t0, tb[:300], None)
            return
        entry.fn = fn
        done(time.perf_counter() - t0, None, fn)

    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compiled_bw-compile")
        fut = _pool.submit(job)
        _pending.add(fut)
    fut.add_done_callback(_finished)


def _finished(fut: Future) -> None:
    with _lock:
        _pending.discard(fut)


def wait(timeout: float | None = None) -> bool:
    """Block until every submitted compile has finished; False if `timeout` s passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            futs = list(_pending)
        if not futs:
            return True
        for f in futs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                f.result(timeout=left)
            except TimeoutError:
                return False
