"""Background compiles (runtime/background.py, Note [Background compile]): the first step of a
new graph runs on the eager backend while Inductor compiles it in a worker process, later
steps switch; grads equal eager's at every step, also when the compile fails or the worker
dies, and torch.compile'd code keeps working on this process's threads meanwhile."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch
from differential import differential, grads
from functions import Triple

import compiled_bw
from compiled_bw.backends import inductor_artifact
from compiled_bw.runtime import background

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

pytest.importorskip("torch._inductor.compile_fx")


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
def bg(monkeypatch):
    monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "1")   # conftest turns it off
    yield
    assert compiled_bw.wait_for_compiles(timeout=300)


def _first_step_check(seen: list):
    def after_first():          # differential runs eager first, then compiled_bw
        seen.append(compiled_bw.last_compiled())
        if len(seen) == 2:
            assert compiled_bw.wait_for_compiles(timeout=300)
    return after_first


def test_switches_to_inductor_when_ready(bg):
    seen = []
    st = differential(build, make_step(_first_step_check(seen)), steps=3, backend="inductor")
    assert not hasattr(seen[1], "source_code"), "the first step must run the eager backend"
    assert st.background_compiles == 1, st
    assert hasattr(compiled_bw.last_compiled(), "source_code"), "Inductor's callable not in use"


def test_switches_to_the_cpp_hit_path_when_ready(bg):
    # No opaque call: the graph loaded from the worker has a C entry point, and the steps after
    # the switch run in one C++ call (runtime/run.py Note [C++ hit path]).
    seen = []

    def step(state):
        m, x, calls = state
        m.zero_grad(set_to_none=True)
        m(x).pow(2).sum().backward()
        calls.append(1)
        if len(calls) == 1:
            _first_step_check(seen)()
        return grads(m)
    st = differential(build, step, steps=3, backend="inductor")
    assert st.background_compiles == 1 and st.native_runs == 2, st


class _ExitWhenLoaded:
    def __reduce__(self):
        return os._exit, (3,)


@pytest.mark.parametrize("payload, error", [
    (b"not a graph", "UnpicklingError"),                          # the child reports it
    (pickle.dumps(_ExitWhenLoaded()), "worker process exited"),   # the child dies
])
def test_a_failed_compile_keeps_the_eager_backend(bg, monkeypatch, payload, error):
    monkeypatch.setattr(inductor_artifact, "dump_graph", lambda gm, sites: payload)
    seen = []
    st = differential(build, make_step(_first_step_check(seen)), steps=3, backend="inductor",
                      fallbacks=1)    # users read fallback_reasons: the failure is there
    assert st.background_compiles == 0 and st.cache_hits == 2, st
    assert len(st.fallback_reasons) == 1 and error in st.fallback_reasons[0], st
    monkeypatch.undo()      # and the next graph compiles (a dead worker is restarted)
    monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "1")
    y = torch.randn(7, requires_grad=True)
    with compiled_bw.enable(backend="inductor"):
        (y.sin() * y).sum().backward()
    assert compiled_bw.wait_for_compiles(timeout=300)
    assert compiled_bw.stats().background_compiles == 1, compiled_bw.stats()
    torch.testing.assert_close(y.grad, y.cos() * y + y.sin())


def test_torch_compile_runs_while_the_worker_compiles(bg):
    # With the compile on a thread of this process, Inductor's FX tracing made Dynamo raise
    # "using FX to symbolically trace a dynamo-optimized function" here (process-global flag).
    f = torch.compile(lambda a: (a * 2).sin(), backend="eager")
    a = torch.randn(4)
    m, x, _ = build()
    compiled_bw.reset()
    with compiled_bw.enable(backend="inductor"):
        Triple.apply(m(x)).pow(2).sum().backward()
    calls = 0
    while not background.wait(timeout=0):
        torch.testing.assert_close(f(a), (a * 2).sin())
        calls += 1
    assert calls > 0 and compiled_bw.stats().background_compiles == 1, compiled_bw.stats()


def test_the_worker_compiles_what_the_foreground_would(bg, monkeypatch):
    # Same graph, same kernels: e.g. Inductor's C++ loops are parallelized for this process's
    # torch.get_num_threads(), which the worker must use too (it once compiled for 1 thread).
    from torch._inductor.utils import fresh_cache
    sources = []
    for background_compile in (False, True):
        compiled_bw.reset()
        y = torch.randn(256, 512, requires_grad=True)     # big enough for parallel loops
        with fresh_cache():
            with compiled_bw.enable(backend="inductor", background_compile=background_compile):
                (y.sin() * y).tanh().sum().backward()
            assert compiled_bw.wait_for_compiles(timeout=300)
        sources.append(compiled_bw.last_compiled().source_code)
    assert torch.get_num_threads() == 1 or "#pragma omp" in sources[0]
    assert sources[0] == sources[1]


_OUTSIDE = torch.library.Library("cbw_outside", "DEF")     # a namespace the worker never loads
_OUTSIDE.define("scale(Tensor x) -> Tensor")
_OUTSIDE.impl("scale", lambda x: x * 3.0, "CompositeExplicitAutograd")
torch.library.register_fake("cbw_outside::scale", torch.empty_like, lib=_OUTSIDE)


class _ScaledGrad(torch.autograd.Function):
    """Its backward calls an op defined outside torch (traced: opt-in)."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return torch.ops.cbw_outside.scale(g)


def test_a_graph_with_ops_outside_torch_compiles_here_after_a_run(bg):
    # runtime/run.py Note [Compile on repeat]: the worker cannot load it, so Inductor compiles
    # it in this process -- after its first run on the eager backend, not at capture before
    # it (which blocked every new graph's first step for the whole compile)
    def step(state):
        m, x, seen = state
        m.zero_grad(set_to_none=True)
        h = m(x)
        h.register_hook(lambda g: seen.append(compiled_bw.last_compiled()))   # while it runs
        _ScaledGrad.apply(h).pow(2).sum().backward()
        return grads(m)
    st = differential(build, step, steps=3, backend="inductor")
    assert "cbw_outside" in compiled_bw.last_graph().code
    seen = []
    compiled_bw.reset()
    state = build()
    with compiled_bw.enable(backend="inductor"):
        for _ in range(3):
            step((state[0], state[1], seen))
    assert [hasattr(fn, "source_code") for fn in seen] == [False, True, True], seen
    assert compiled_bw.stats().inductor_compiles == 1, compiled_bw.stats()
    assert st.inductor_compiles == 1 and st.background_compiles == 0, st
    assert any("not in the background" in n for n in st.notes), st.notes


_PACKAGE_OP = '''
import torch

@torch.library.custom_op("cbw_pkg_ops::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x

@cube.register_fake
def _(x):
    return torch.empty_like(x)

def make():
    @torch.library.custom_op("cbw_pkg_ops::cube_made", mutates_args=())
    def cube_made(x: torch.Tensor) -> torch.Tensor:
        return x * x * x

    @cube_made.register_fake
    def _(x):
        return torch.empty_like(x)
'''


@pytest.mark.parametrize("where", ["module", "function"])
def test_a_graph_with_a_custom_op_of_a_package_compiles_in_the_worker(bg, tmp_path, monkeypatch,
                                                                      where):
    # backends/compile_worker.py Note [Ops the worker imports]: the worker imports the module
    # that defines the op (Hugging Face's MoE fallback op, in transformers.integrations.moe),
    # here a package on a sys.path entry added after the worker may have started.  An op made
    # inside a function is not defined by importing its module: compiled here, after a run.
    import importlib
    pkg = tmp_path / "cbw_pkg_ops"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(_PACKAGE_OP)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("cbw_pkg_ops.ops")
    if where == "function" and not hasattr(torch.ops.cbw_pkg_ops, "cube_made"):
        mod.make()
    op = torch.ops.cbw_pkg_ops.cube if where == "module" else torch.ops.cbw_pkg_ops.cube_made

    class Cubed(torch.autograd.Function):
        compiled_bw_traceable = True

        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return op(g)

    def step(state):
        m, x, _ = state
        m.zero_grad(set_to_none=True)
        Cubed.apply(m(x)).pow(2).sum().backward()
        return grads(m)
    st = differential(build, step, steps=3, backend="inductor")
    assert "cbw_pkg_ops" in compiled_bw.last_graph().code
    here = any("not in the background" in n for n in st.notes)
    assert (st.background_compiles, here, st.fallbacks) == \
        ((1, False, 0) if where == "module" else (0, True, 0)), st


# A process forked after `import compiled_bw` started the job thread (warm start on: Note
# [Read-ahead]) compiles in the background on its own: its wait_for_compiles() returns and its
# steps switch to Inductor's code; the parent's job thread and worker are untouched by the
# child's exit (runtime/background.py Note [Fork]).
FORK = r'''
import os, signal, sys, torch, compiled_bw
def run(tag, width):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(5, width), torch.nn.Tanh(), torch.nn.Linear(width, 3))
    x = torch.randn(4, 5)
    def step():
        m.zero_grad(set_to_none=True)
        m(x).square().sum().backward()
        return [p.grad.clone() for p in m.parameters()]
    ref = step()
    before = compiled_bw.stats().background_compiles
    with compiled_bw.enable(backend="inductor"):
        for _ in range(3):
            got = step()
            assert all(torch.allclose(r, g, rtol=1e-5, atol=1e-6) for r, g in zip(ref, got))
            compiled_bw.wait_for_compiles()
    print(tag, compiled_bw.stats().background_compiles - before, flush=True)
run("parent-before", 7)       # the parent's worker is running when it forks
pid = os.fork()
if pid == 0:
    signal.alarm(240)
    run("child", 9)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
run("parent-after", 11)
'''


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_compiles_in_the_background_on_its_own(tmp_path):
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    compiled = dict(line.split() for line in r.stdout.splitlines()
                    if line.startswith(("child", "parent")))
    assert compiled == {"parent-before": "1", "child": "1", "parent-after": "1"}, r.stdout
