"""API surface: logging topics, explain(), nesting and thread-locality, odd grad() calls."""
import logging
import os
import subprocess
import sys
import threading

import pytest
import torch
from differential import differential, grads

import compiled_bw
from compiled_bw import config


def test_log_topics_print_graph_recompiles_fallbacks(caplog):
    config.set_topics("graph,recompiles,fallbacks")
    try:
        compiled_bw.reset()
        x = torch.randn(3, requires_grad=True)
        with caplog.at_level(logging.INFO, logger="compiled_bw"), compiled_bw.enable():
            (x.sin() * x).sum().backward()
            with torch.autograd.detect_anomaly(check_nan=False):
                (x.sin() * x).sum().backward()
        text = caplog.text
        assert "captured backward graph" in text and "aten.cos" in text
        assert "capturing the backward: first call" in text
        assert "running eager autograd: anomaly mode is enabled" in text
    finally:
        config.set_topics("")


def test_env_var_unknown_topic_is_an_error():
    r = subprocess.run([sys.executable, "-c", "import compiled_bw"], capture_output=True, text=True, check=False,
                       env={**os.environ, "COMPILED_BW_LOG": "graphs"})
    assert r.returncode != 0 and "unknown topic 'graphs'" in r.stderr


def test_explain_lists_counters_and_graph():
    compiled_bw.reset()
    x = torch.randn(3, requires_grad=True)
    with compiled_bw.enable():
        (x.exp() * 2).sum().backward()
    text = compiled_bw.explain()
    assert text.startswith("captures=1 cache_hits=0 fallbacks=0")
    assert "aten.mul" in text


def test_enable_is_thread_local():
    compiled_bw.reset()
    x = torch.randn(3, requires_grad=True)
    seen = []

    def other():
        (x * 2).sum().backward()     # not enabled on this thread: plain eager
        seen.append(compiled_bw.stats().captures)
    with compiled_bw.enable():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [0]


def test_unknown_backend_name_fails_early():
    try:
        with compiled_bw.enable(backend="nope"):
            pass
    except ValueError as e:
        assert "unknown backend 'nope'" in str(e)
    else:
        raise AssertionError("no error")


def test_callable_backend_is_used():
    calls = []

    def my_backend(gm, example_inputs):
        calls.append(len(example_inputs))
        return gm
    x = torch.randn(3, requires_grad=True)
    compiled_bw.reset()
    with compiled_bw.enable(backend=my_backend, strict=True):
        (x.exp() * x).sum().backward()
    assert calls == [4] and torch.allclose(x.grad, x.exp() * (x + 1))


def test_grad_duplicate_inputs_and_root_as_input():
    def build():
        return [torch.randn(4, requires_grad=True)]

    def step(st):
        (x,) = st
        h = x.cos()
        y = (h * x).sum()
        g1, g2, gh, gy = torch.autograd.grad(y, [x, x, h, y])
        return [g1, g2, gh, gy, g1 is g2]
    differential(build, step)


def test_backward_fast_path_is_torchs_argument_handling(monkeypatch):
    # api._backward handles `loss.backward()` on a plain real scalar itself; every other form
    # goes through torch's argument handling (_make_grads), with torch's errors.
    forms = [
        lambda x: (x.sin() * x).sum().backward(),                     # the fast path
        lambda x: torch.autograd.backward((x.exp() * x).sum()),       # the fast path
        lambda x: (x * x).mean().backward(retain_graph=True),
        lambda x: (x * 3).backward(),                                 # not a scalar: raises
        lambda x: (x * 3).backward(torch.ones(4)),
        lambda x: (x.to(torch.complex64) * 2).sum().backward(),       # complex: raises
        lambda x: (x * 2).sum().backward(inputs=[x]),
    ]

    def build():
        return [torch.randn(4, requires_grad=True)]

    def step(st):
        (x,) = st
        form = forms[step.k % len(forms)]
        step.k += 1
        x.grad = None
        form(x)
        return [x.grad]
    made = []
    make_grads = torch.autograd._make_grads
    monkeypatch.setattr(torch.autograd, "_make_grads", lambda *a, **k: made.append(1) or make_grads(*a, **k))
    step.k = 0
    differential(build, step, steps=len(forms), captures=None, allow_errors=True)
    assert len(made) == 2 * len(forms) - 2, made    # eager: all; ours: all but the fast path


def test_enable_is_a_decorator():
    x = torch.randn(3, requires_grad=True)

    @compiled_bw.enable()
    def step():
        (x.tanh() * x).sum().backward()
    compiled_bw.reset()
    step()
    step()
    assert (compiled_bw.stats().captures, compiled_bw.stats().cache_hits) == (1, 1)
    assert torch.allclose(x.grad, 2 * (x.tanh() + x * (1 - x.tanh() ** 2)))


@pytest.mark.slow
def test_benchmarks_quick_smoke(tmp_path):
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--models", "overhead,cnn",
                        "--out", str(tmp_path)], capture_output=True, text=True, check=False,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr
    assert "FAIL" not in r.stdout and "n/a" not in r.stdout, r.stdout
    assert (tmp_path / "latest.json").exists()


@pytest.mark.slow
def test_benchmarks_varying_shapes_row(tmp_path):
    # the varying-shapes row of `python -m benchmarks`: every mode on the same shapes, one
    # static and one dynamic capture for compiled_bw (seed 9: batch and length both change at
    # the second step, no batch of 1), its grads equal eager's at every step
    import contextlib

    from benchmarks.report import table
    from benchmarks.varying_shapes import Config, bench_varying
    cfg = Config(steps=4, max_batch=4, max_seq=24, seed=9, static_sizes=0, layers=1)
    modes = {"eager": contextlib.nullcontext,
             "cbw-eager": lambda: compiled_bw.enable(backend="eager")}
    r = bench_varying(modes, cfg, str(tmp_path))
    c = r["cbw-eager"]
    assert (c["captures"], c["dynamic_captures"], c["inductor_compiles"]) == (2, 1, 0), r
    assert not c["fail"] and r["eager"]["captures"] is None
    text = "\n".join(table({"varying_shapes": r}, list(modes)))
    assert "| cbw-eager |" in text and "FAIL" not in text, text


def test_benchmarks_hit_cpu_measures_cache_hits():
    # `python -m benchmarks.hit_cpu`: one capture, then only cache hits, nothing falls back
    from benchmarks.hit_cpu import measure
    compiled_bw.reset()
    eager, ours, st = measure("custom_hooks", steps=3, backend="eager")
    assert eager > 0 and ours > 0
    assert (st.captures, st.fallbacks) == (1, 0), st


def _mlp_state():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def test_grad_with_no_inputs_raises_eagers_error():
    """PyTorch's test_grad_empty_inputs: `autograd.grad(out, [])` raises.  torch 2.13+ raise in
    Python before the engine is called ("`inputs` argument to `grad()` cannot be empty.");
    2.11-2.12 leave it to the C++ engine ("grad requires non-empty inputs."), which compiled_bw
    replaces: there it returned () instead of raising."""
    def step(x):
        return torch.autograd.grad(2 * x, [], grad_outputs=torch.tensor([1.0]))

    differential(lambda: torch.tensor([1.0], requires_grad=True), step, captures=0,
                 allow_errors=True)


def test_autograd_debug_logging_logs_every_node_as_eager_does():
    """Note [Eager's node logging]: with torch's autograd logger at DEBUG (TORCH_LOGS=autograd)
    eager logs "Executing: <node> ..." for each node it runs, in its order (PyTorch's
    test_autograd.py TestAutogradLogging: CloneBackward0, SumBackward0, DivBackward0,
    MulBackward0, AccumulateGrad); under compiled_bw the same records (before: none, on every
    release -- the replaced entry point is where eager attaches the logging prehooks).  With
    the logger back above DEBUG, the same program compiles."""
    import logging
    import re

    class Records(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.msgs = []

        def emit(self, record):
            self.msgs.append(re.sub(r" at 0x[0-9a-f]+", "", record.getMessage()))

    logger = logging.getLogger("torch.autograd.graph")
    handler, level = Records(), logger.level

    def step(a):
        a.grad = None
        del handler.msgs[:]
        b = a.mul(2).div(3).sum()
        torch.autograd.backward((b, b.clone()))
        return [a.grad, list(handler.msgs)]

    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        st = differential(lambda: torch.rand(10, requires_grad=True), step, captures=0,
                          fallbacks=3)
        eager_log = step(torch.rand(10, requires_grad=True))[1]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert all("autograd logging is at DEBUG" in r for r in st.fallback_reasons), st
    assert [m.split()[1].strip("<>").split()[0] for m in eager_log] == [
        "CloneBackward0", "SumBackward0", "DivBackward0", "MulBackward0",
        "AccumulateGrad"], eager_log
    st = differential(lambda: torch.rand(10, requires_grad=True), step)
    assert st.captures == 1


@pytest.mark.parametrize("mode", ["flop_counter", "allow_mutation"])
def test_a_dispatch_mode_of_the_users_runs_eager_autograd_and_says_why(mode):
    """Note [Dispatch modes of the user's]: eager's backward runs every op through an active
    TorchDispatchMode (FlopCounterMode counts the backward's flops; allow_mutation_on_saved_tensors
    clones a saved tensor the forward mutates); compiled_bw runs eager autograd for such a
    backward and records why (before: it ran eager autograd too, but silently)."""
    from torch.utils.flop_counter import FlopCounterMode

    def step(m):
        m.zero_grad(set_to_none=True)
        x = torch.randn(5, 8)
        if mode == "flop_counter":
            loss = m(x).pow(2).sum()
            with FlopCounterMode(display=False) as fc:
                loss.backward()
            return [p.grad for p in m.parameters()] + [fc.get_total_flops()]
        with torch.autograd.graph.allow_mutation_on_saved_tensors():
            h = m[0](x)
            out = m[2](h)
            h.mul_(2)   # AddmmBackward0 saved h: the mode cloned it (without it: eager's error)
            out.pow(2).sum().backward()
        return [p.grad for p in m.parameters()]

    st = differential(_mlp_state, step, captures=0, fallbacks=3)
    assert all("TorchDispatchMode is active" in r for r in st.fallback_reasons), st.fallback_reasons
    if mode == "flop_counter":
        assert "FlopCounterMode" in st.fallback_reasons[0], st.fallback_reasons


def test_a_wrapper_installed_over_engine_run_backward_is_called():
    """`torch.autograd._engine_run_backward` replaced while enabled (a user's wrapper; torch's
    own `torch.compiler._patch_engine_backward`, which tags nodes traced in a backward) is
    called by `loss.backward()` as eagerly: api.py's fast path for a plain scalar backward had
    called compiled_bw's entry point directly, so the wrapper never ran (found with PyTorch's
    test_activation_checkpointing.py, test_patch_engine_backward_*)."""
    def build():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 3), []

    def step(state):
        m, log = state
        m.zero_grad(set_to_none=True)
        inner = torch.autograd._engine_run_backward

        def wrapper(*args, **kwargs):
            log.append(len(args[0]))
            return inner(*args, **kwargs)
        torch.autograd._engine_run_backward = wrapper
        try:
            m(torch.randn(2, 4)).sin().sum().backward()
        finally:
            torch.autograd._engine_run_backward = inner
        return grads(m), list(log)

    differential(build, step, steps=3)
