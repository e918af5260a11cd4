"""The profiler sees what eager's engine records: one
`autograd::engine::evaluate_function: <Node>` range per node run (Note [Profiler] in
runtime/run.py: while a profiler is active the backward runs eager autograd, with the reason);
COMPILED_BW_PROFILE=compiled profiles the compiled graph instead, as one range.
"""
import collections
import contextlib

import pytest
import torch
from functions import Double
from torch.profiler import profile

import compiled_bw
from compiled_bw.runtime import run

PREFIX = "autograd::engine::evaluate_function: "


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return m, torch.randn(3, 4)


def _step(m, x, kind):
    h = m[1](m[0](x))
    if kind == "hooks":
        h.register_hook(lambda g: g * 2)
    if kind == "custom":
        h = Double.apply(h)
    if kind == "grad":
        return torch.autograd.grad(m[2](h).pow(2).sum(), list(m.parameters()))
    m[2](h).pow(2).sum().backward()
    return None


def _events(enabled, kind, steps=3):
    m, x = _model()
    counts = []
    for _ in range(steps):
        with profile() as prof:
            if enabled:
                with compiled_bw.enable(backend="eager"):
                    _step(m, x, kind)
            else:
                _step(m, x, kind)
        counts.append(collections.Counter(e.name for e in prof.events()
                                          if e.name.startswith(PREFIX)))
    return counts, [p.grad for p in m.parameters()]


@pytest.mark.parametrize("kind", ["plain", "hooks", "custom", "grad"])
def test_profiled_backward_records_evaluate_function_per_node(kind):
    compiled_bw.reset()
    # warm the cache first: a profiled step must also be right when its graph is compiled
    m, x = _model()
    with compiled_bw.enable(backend="eager"):
        _step(m, x, kind)
    want, want_grads = _events(False, kind)
    got, got_grads = _events(True, kind)
    assert want[0], "eager recorded no evaluate_function events"
    assert got == want
    for a, b in zip(want_grads, got_grads, strict=True):
        assert (a is None and b is None) or torch.equal(a, b)
    st = compiled_bw.stats()
    assert st.fallbacks == 3 and all("profiler is active" in r for r in st.fallback_reasons)
    # and once the profiler is gone, the compiled graph runs again
    with compiled_bw.enable(backend="eager"):
        _step(m, x, kind)
    assert compiled_bw.stats().fallbacks == 3


@pytest.mark.parametrize("how", ["env", "context"])
def test_profile_compiled_opt_in(monkeypatch, how):
    """COMPILED_BW_PROFILE=compiled (read at import) or `with compiled_bw.profile_compiled()`."""
    compiled_bw.reset()
    m, x = _model()
    if how == "env":
        monkeypatch.setattr(run, "PROFILE_COMPILED", True)
        opt_in = contextlib.nullcontext()
    else:
        opt_in = compiled_bw.profile_compiled()
    with profile() as prof, compiled_bw.enable(backend="eager"), opt_in:
        _step(m, x, "plain")
    names = [e.name for e in prof.events()]
    assert "compiled_bw::backward" in names
    st = compiled_bw.stats()
    assert st.captures == 1 and st.fallbacks == 0
