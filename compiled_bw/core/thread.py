"""The per-thread state of compiled_bw, in one place.

Consumes nothing; produces THREAD (one threading.local) and `current_step`.  Every layer that
keeps state per thread keeps it here, as one of these fields (class attributes are the
defaults a thread sees before it sets one):

  step          the step being traced, compiled or run on this thread (`current_step`): the
                opaque sites the graph's calls index (calls/opaque.py, calls/deliver.py)
                and, at run time, the step's nodes, input metadata and hooks
  running       the innermost step being *run* on this thread (`current_step(s, running=True)`):
                what engine-state queries answer from (runtime/engine_state.py).  It is not
                `step`: a backward called inside a running graph traces its own graph (its
                step) while the outer one is still the one running
  nesting       how many compiled runs run on this thread, one inside the other (runtime/run.py
                Note [Reentrant backward])
  has_inputs    the running Deliver task serves grad() / backward(inputs=) (engine_state.task)
  settings      the stack of enable() settings entered on this thread (api.py)
  keyed_inputs  Inductor is compiling one of our graphs on this thread (backends/inductor.py)
  fake_work     compiled_bw traces or compiles on this thread (core/fake_work.py: FakeTensor's
                meta-failure log is not shown there)
  creation_hooks  node creation hooks active on this thread (graph/hooks.py Note [Node
                creation hooks])
"""
from __future__ import annotations

import threading


class _Thread(threading.local):
    step = None
    running = None
    nesting = 0
    has_inputs = False
    settings = None
    keyed_inputs = False
    fake_work = False
    creation_hooks = 0


THREAD = _Thread()


class current_step:
    """Context: `step` is this thread's step (THREAD.step), and with running=True also the step
    being run (THREAD.running); both restored after."""
    __slots__ = ("prev", "prev_running", "running", "step")

    def __init__(self, step, running: bool = False) -> None:
        self.step, self.running = step, running

    def __enter__(self):
        self.prev, self.prev_running = THREAD.step, THREAD.running
        THREAD.step = self.step
        if self.running:
            THREAD.running = self.step
        return self.step

    def __exit__(self, *exc) -> None:
        THREAD.step, THREAD.running = self.prev, self.prev_running


class SitesOnly:
    """A step for fake calls only (a backend retracing a graph, maybe in another process)."""
    __slots__ = ("sites",)

    def __init__(self, sites: list) -> None:
        self.sites = sites


class flag:
    """Context: THREAD.<name> = value, restored after."""
    __slots__ = ("name", "prev", "value")

    def __init__(self, name: str, value) -> None:
        self.name, self.value = name, value

    def __enter__(self):
        self.prev = getattr(THREAD, self.name)
        setattr(THREAD, self.name, self.value)

    def __exit__(self, *exc) -> None:
        setattr(THREAD, self.name, self.prev)
