"""Background compiles: a new graph runs on the eager backend at once while Inductor compiles
it in a worker process; the cache entry switches to the compiled callable when it is ready.

Consumes a cache entry (runtime/cache.py Compiled) whose fn is the eager backend's, and the
captured GraphModule with its opaque sites; produces, later, `entry.fn` replaced by Inductor's
callable, or, if that compile fails, a note in stats() and the eager-backend fn kept (correct,
only slower).  The worker process is backends/compile_worker.py.

Note [Background compile]
Inductor takes 2-15 s to compile a backward on this machine (cold cache), torch compiled
autograd 2-40 s; the capture itself takes 0.05-0.5 s.  So the first backward of a new graph
runs it on the `eager` backend (FX code, op by op: the same aten ops Inductor would fuse), and
Inductor compiles it meanwhile; later steps pick up whichever callable the entry holds.  Both
callables are boxed and compute the same graph, so switching is invisible except in speed and
float rounding.  The compile runs in a child process, not a thread, because torch's FX tracing
is process-global: Tracer.trace sets one module-level flag and patcher, Inductor traces while
compiling (pattern replacements, its loop-body codegen), and while that flag is set any
torch.compile'd function called on another thread raises Dynamo's "using FX to symbolically
trace a dynamo-optimized function".  A child traces in its own interpreter.  It gets the
captured graph with its fake values and the opaque sites' output specs (inductor_artifact.py;
no real tensor, no autograd node), compiles into the Inductor cache dir of this process, and
sends back the compiled graph; a thread here loads it (the generated module and its .so: no
tracing) under `trace_lock`, as an FX-graph-cache hit would.
The child starts with the first capture and stays (its imports and warm-up take ~4 s), one job
at a time, at low CPU priority; it exits when this process does.
`wait_for_compiles()` blocks until none is pending (tests, benchmarks).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import Future

import torch

from ..backends import compile_worker
from ..torchapi import dynamo as torch_dynamo

_lock = threading.Lock()
_jobs: queue.SimpleQueue | None = None
_pending: set[Future] = set()


def trace_lock():
    """The lock held while anything here traces: Dynamo's own compile lock, which torch.compile
    holds for a whole compile.  FX tracing (make_fx, hence our captures, Inductor's passes,
    AOTAutograd) patches module globals through one process-wide `CURRENT_PATCHER`, so two
    threads tracing at once break each other.  Holding it, our captures, our loads of
    background compiles and torch.compile take turns.  (Importing Dynamo here costs nothing
    extra: make_fx imports it on first use anyway.)"""
    return torch_dynamo.compile_lock()


class _Worker:
    """The compile worker process; used by the one job thread only (after start())."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.jobs = 0
        self.warm = False

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        env = dict(os.environ)
        # the child imports compiled_bw and torch from where this process does
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["TORCH_WARM_POOL"] = "0"                # no compile pools inside the child
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compiled_bw.backends.compile_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def compile(self, job: tuple) -> tuple:
        """Sends a job and blocks for its reply: (status, body, seconds in the child)."""
        self.start()
        self.jobs += 1
        try:
            compile_worker.send(self.proc.stdin, (self.jobs, *job))
            reply = compile_worker.recv(self.proc.stdout)
        except (BrokenPipeError, OSError):
            reply = None
        if reply is None:
            code = self.proc.poll()
            self.proc = None
            raise RuntimeError(f"the compile worker process exited (code {code})")
        job_id, status, body, seconds = reply
        assert job_id == self.jobs, (job_id, self.jobs)
        return status, body, seconds

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


_worker = _Worker()


# Note [Compiles in flight at exit]
# The job thread is a daemon: Python kills it once finalization starts, wherever it is.
# Killed inside torch's C++ (loading a compiled graph the worker just sent, its pybind
# objects' destructors) it ends the process with "terminate called without an active
# exception" (SIGABRT, exit code 134: `python -m benchmarks --quick` on 2026-11-24, whose last
# dynamic graph's compile landed just as it exited).  So at exit the worker is killed (a
# compile in it fails at once) and the job thread is given a few seconds to finish what it
# is doing, before finalization.
def _at_exit() -> None:
    _worker.close()
    # a job that failed at exit (the start job importing Inductor once finalization began:
    # "can't register atexit after shutdown") has nothing left to report
    with contextlib.suppress(Exception):
        wait(timeout=10.0)


atexit.register(_at_exit)


# Note [Fork]
# A process forked from one that started the job thread (at import, with warm start on:
# runtime/warm.py Note [Read-ahead]) or the compile worker inherits their objects but not the
# thread: its jobs would queue with nobody to run them (wait_for_compiles() waiting forever),
# and at its exit it would kill its parent's worker.  The child starts afresh: no job thread
# (started again when it needs one), no worker of its own yet, nothing pending (the parent's
# compiles in flight land in the parent; the child's graphs keep the eager backend's code).
def _after_fork_in_child() -> None:
    global _lock, _jobs, _pending, _worker
    _lock = threading.Lock()
    _jobs = None
    _pending = set()
    _worker = _Worker()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def start_worker() -> None:
    """Start the compile worker now (its imports take seconds) and, meanwhile, warm this
    process up for loading what it sends (inductor_artifact.warm_up), on the job thread."""
    def start() -> None:
        from ..backends import inductor_artifact
        _worker.start()
        if not _worker.warm:
            inductor_artifact.warm_up()
            _worker.warm = True
    _submit(start)


def prepare(entry, gm, sites: list, done, oblivious: bool = False):
    """Returns start(): it submits the compile of gm to the worker; on the job thread, entry.fn
    then becomes Inductor's callable and done(seconds, error_text_or_None, fn_or_None) is
    called.  The caller starts the compile after the graph's first run (which a busy job
    thread slows).  oblivious: a dynamic graph, compiled under size-oblivious reasoning
    (trace/dynamic.py Note [Sizes of one]); its done also gets the worker's ShapeEnv state
    after the compile (compile_worker.py _shape_env_state) as `shape_env=` (None: it compiled
    nothing, or the graph has no ShapeEnv)."""
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")   # (a test or harness may patch it)
    threads = torch.get_num_threads()   # Inductor's CPU kernels are generated for this count
    mode = compile_worker.modes()   # the modes the graph was captured (and keyed) under
    return lambda: _submit(lambda: _compile(entry, gm, list(sites), cache_dir, mode, threads, done,
                                            oblivious))


def _compile(entry, gm, sites: list, cache_dir: str | None, mode: tuple, threads: int, done,
             oblivious: bool) -> None:
    t0 = time.perf_counter()
    try:
        # Inductor is imported here, on the job thread, not in anybody's backward
        from ..backends import inductor_artifact
        status, body, _ = _worker.compile((*inductor_artifact.setting(cache_dir), mode, threads,
                                           oblivious, compile_worker.worker_imports(gm)[0],
                                           inductor_artifact.dump_graph(gm, sites)))
        if status == "error":
            raise RuntimeError(body)
        fn, env = entry.fn, None
        if status == "ok" and oblivious:
            body, env = body
        if status == "ok":      # (start_worker's job warmed this process up for the load)
            fakes = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
            with trace_lock():
                fn = inductor_artifact.load_compiled(body, fakes)
    except Exception as e:  # noqa: BLE001 -- any failure: the eager-backend fn stays
        done(time.perf_counter() - t0, traceback.format_exception_only(type(e), e)[-1].strip()[:300],
             None)
        return
    entry.native = inductor_artifact.native_entry(fn)
    entry.fn = fn
    if entry.warm is not None and status == "ok":   # runtime/warm.py Note [Warm start]
        from . import warm
        warm.store(entry, body)
    if oblivious:
        done(time.perf_counter() - t0, None, fn, shape_env=env)
    else:
        done(time.perf_counter() - t0, None, fn)


# Note [The stored graph loads after the first backward]
# A loaded graph's first run starts the job that loads its whole compiled graph (runtime/run.py
# _run_first_or_hit, after the run).  That job imports Inductor: ~1.4 s, mostly holding the GIL.
# Started at once, it took the GIL while the first backward was still returning through Python,
# which then waited for the interpreter's switch interval (5 ms): the overhead model's warm first
# backward took 8-13 ms instead of 6-9.  The job waits STORED_LOAD_DELAY first, so the backward
# returns; the user's next forward runs mostly in torch's C++, which releases the GIL.  Nothing
# waits for the job but wait_for_compiles(): the first runs take the stored C entry point (Note
# [Native first runs]) or the eager backend.
STORED_LOAD_DELAY = 0.05


def load_stored(entry, body, specs: list, done, cache, key) -> None:
    """runtime/warm.py Note [Warm start]: on the job thread, load the compiled graph a former
    process stored (`body()` reads its bytes; it carries its generated code) and switch
    entry.fn to it; if that fails, the stored file is removed and `key` leaves `cache`, so the
    next step captures it afresh (and compiles it here)."""
    def job() -> None:
        time.sleep(STORED_LOAD_DELAY)   # Note [The stored graph loads after the first backward]
        t0 = time.perf_counter()
        try:
            from ..backends import inductor_artifact
            from . import warm
            compiled = body()
            with trace_lock():
                fn = inductor_artifact.load_compiled(compiled, warm.fakes(specs))
        except Exception as e:  # noqa: BLE001 -- a stale entry: recaptured
            warm.forget(entry)
            cache.entries.pop(key, None)
            done(time.perf_counter() - t0, "a stored compiled graph did not load ("
                 + traceback.format_exception_only(type(e), e)[-1].strip()[:200]
                 + "); it is captured again", None)
            return
        entry.native = inductor_artifact.native_entry(fn)
        entry.fn = fn
        done(time.perf_counter() - t0, None, fn)
    _submit(job)


def _submit(job) -> None:
    """Run job on the job thread: a daemon thread, so that a process exiting during a compile
    does not wait for it (Note [Compiles in flight at exit])."""
    fut: Future = Future()
    jobs = job_thread()
    with _lock:
        _pending.add(fut)
    fut.add_done_callback(_finished)
    jobs.put((fut, job))


def job_thread() -> queue.SimpleQueue:
    """The job thread's queue, the thread started if it was not (~1-4 ms: a warm start starts
    it at import, not in its first backward: runtime/warm.py Note [Read-ahead])."""
    global _jobs
    with _lock:
        if _jobs is None:
            _jobs = queue.SimpleQueue()
            threading.Thread(target=_job_loop, args=(_jobs,), name="compiled_bw-compile",
                             daemon=True).start()
        return _jobs


def _job_loop(jobs: queue.SimpleQueue) -> None:
    while True:
        fut, job = jobs.get()
        try:
            job()
        except BaseException as e:  # noqa: BLE001 -- jobs report their own failures
            fut.set_exception(e)
        else:
            fut.set_result(None)


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
