"""Background compiles (runtime/background.py, Note [Background compile]): the first step of a
new graph runs on the eager backend while the slow backend compiles on a worker thread, later
steps switch; grads equal eager's at every step, also when the compile fails."""
from __future__ import annotations

import threading

import pytest
import torch
from differential import differential, grads
from functions import Triple

import compiled_bw
from compiled_bw.backends import BACKENDS, register_backend
from compiled_bw.backends.eager import compile_eager


def build():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4)), torch.randn(5, 8), []


def make_step(after_first=lambda: None):
    def step(state):
        m, x, calls = state      # per run: the eager run and the compiled run count apart
        m.zero_grad(set_to_none=True)
        Triple.apply(m(x)).pow(2).sum().backward()
        calls.append(1)
        if len(calls) == 1:
            after_first()
        return grads(m)
    return step


@pytest.fixture
def background(monkeypatch):
    monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "1")   # opt-in (api.enable)
    yield
    assert compiled_bw.wait_for_compiles(timeout=120)
    for name in ("slow_test", "broken_test"):
        BACKENDS.pop(name, None)


def test_switches_to_the_compiled_callable_when_ready(background):
    release, ran = threading.Event(), []

    def slow(gm, example):
        assert all(isinstance(t, torch._subclasses.FakeTensor) for t in example), (
            "the worker must only see fake inputs")
        release.wait(60)
        fn = compile_eager(gm, example)

        def run(box):
            ran.append(1)
            return fn(box)
        return run
    register_backend("slow_test", slow)

    runs = []

    def after_first():        # differential runs eager first, then compiled_bw
        runs.append(1)
        if len(runs) == 1:
            return
        assert not ran, "the first step must not wait for the slow backend"
        release.set()
        assert compiled_bw.wait_for_compiles(timeout=60)
    st = differential(build, make_step(after_first), steps=4, backend="slow_test")
    assert st.background_compiles == 1 and len(ran) == 3, (st, ran)


def test_a_failed_background_compile_keeps_the_eager_backend(background):
    def broken(gm, example):
        raise RuntimeError("no kernels today")
    register_backend("broken_test", broken)
    st = differential(build, make_step(compiled_bw.wait_for_compiles), steps=3,
                      backend="broken_test")
    assert st.background_compiles == 0
    assert any("no kernels today" in n for n in st.notes), st.notes


def test_inductor_in_the_background(background):
    pytest.importorskip("torch._inductor.compile_fx")
    st = differential(build, make_step(compiled_bw.wait_for_compiles), steps=3,
                      backend="inductor")
    assert st.background_compiles == 1, st
    assert hasattr(compiled_bw.last_compiled(), "source_code"), "Inductor's callable not in use"


def test_a_capture_waits_for_a_tracing_background_compile(background):
    # FX tracing is not thread-safe (one global patcher): our captures and the worker's
    # compile hold one lock (background.trace_lock) and take turns.
    import time
    started = threading.Event()

    def slow(gm, example):
        from torch.fx.experimental.proxy_tensor import make_fx
        started.set()
        for _ in range(20):                 # trace while the main thread wants to capture
            make_fx(gm)(*example)
            time.sleep(0.01)
        return compile_eager(gm, example)
    register_backend("slow_test", slow)
    compiled_bw.reset()
    m, x, _ = build()
    with compiled_bw.enable(backend="slow_test"):
        Triple.apply(m(x)).pow(2).sum().backward()
        assert started.wait(60)
        y = torch.randn(6, requires_grad=True)
        (y.sin() * y).sum().backward()          # a second graph: captured meanwhile
    torch.testing.assert_close(y.grad, y.cos() * y + y.sin())
    assert compiled_bw.wait_for_compiles(timeout=60)
    st = compiled_bw.stats()
    assert (st.captures, st.fallbacks, st.background_compiles) == (2, 0, 2), st
