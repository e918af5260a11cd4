"""enable(verify=...) and repro scripts (runtime/verify.py Note [Verify], runtime/repro.py
Note [Repro scripts]).  The user-visible contract: under verify, every backward gives eager's
grads -- also when the compiled graph is wrong, which then is dropped with a warning and a repro
script that shows the difference in a fresh process -- and hooks run once per backward."""
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch
from differential import differential, grads
from faulty_backend import mm_off_by_a_bit, off_by_a_bit, raises
from functions import Triple

import compiled_bw


def _python(*args, env=None) -> subprocess.CompletedProcess:
    """A fresh process, with this one's import path (tests/ for faulty_backend)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=600, check=False)


def _mlp_build():
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _mlp_step(m):
    m.zero_grad(set_to_none=False)      # eager accumulates into the existing .grad in place
    x = torch.randn(4, 5)
    m(x).square().sum().backward()
    return grads(m)


def test_verify_is_off_by_default(monkeypatch):
    monkeypatch.delenv("COMPILED_BW_VERIFY", raising=False)
    st = differential(_mlp_build, _mlp_step, steps=3)
    assert st.verified_runs == 0


@pytest.mark.both_backends
def test_verified_runs_match_eager_and_stop_after_the_count():
    """Each callable's first 2 runs are verified (Inductor: the eager backend's first run while
    it compiles, then Inductor's); then none."""
    st = differential(_mlp_build, _mlp_step, steps=6, options={"verify": True})
    assert st.verify_mismatches == 0, st.notes
    expected = 3 if os.environ.get("COMPILED_BW_TEST_BACKEND") == "inductor" \
        and os.environ.get("COMPILED_BW_BACKGROUND_COMPILE", "1") != "0" else 2
    assert st.verified_runs == expected


@pytest.mark.parametrize("set_to_none", [False, True])   # accumulated in place / stolen
def test_a_wrong_kernel_is_caught_dropped_and_eagers_grads_given(tmp_path, monkeypatch,
                                                                  set_to_none):
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))

    def step(m):
        m.zero_grad(set_to_none=set_to_none)
        m(torch.randn(4, 5)).square().sum().backward()
        return [p.grad for p in m.parameters()]     # the objects: strides as left

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        st = differential(_mlp_build, step, steps=3, backend=off_by_a_bit, fallbacks=2,
                          options={"verify": True})
    assert st.verify_mismatches == 1 and st.verified_runs == 1
    assert "verified_runs=1 verify_mismatches=1" in compiled_bw.explain().splitlines()[0]
    said = [str(w.message) for w in caught if "verify" in str(w.message)]
    assert len(said) == 1 and "differs from eager autograd's" in said[0], said
    assert st.fallback_reasons[0].startswith("verify: compiled, the .grad of leaf")
    path = re.search(r"repro: (\S+\.py)", said[0]).group(1)
    assert os.path.dirname(path) == str(tmp_path)
    # the repro shows the difference in a fresh process, without the test's state
    r = _python(path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "output 0" in r.stdout and "differs from the graph's own ops" in r.stdout, r.stdout


def test_grad_api_gets_eagers_grads_from_a_wrong_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))

    def build():
        return torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)

    def step(s):
        a, b = s
        return torch.autograd.grad((a @ b).sin().sum(), (b, a))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = differential(build, step, steps=2, backend=off_by_a_bit, fallbacks=1,
                          options={"verify": True})
    assert st.verify_mismatches == 1
    assert "grad() result" in st.fallback_reasons[0]


def test_hooked_graph_is_not_verified_and_its_hooks_run_once():
    log = []

    def build():
        m = _mlp_build()
        m[0].weight.register_hook(lambda g: log.append(("w0", g.sum().item())))
        m[2].register_full_backward_hook(lambda mod, gi, go: log.append(("m2", go[0].shape)))
        return m

    def step(m):
        log.clear()
        _mlp_step(m)
        return grads(m), list(log)

    st = differential(build, step, steps=3, options={"verify": True})
    assert st.verified_runs == 0
    assert any(n.startswith("verify: a graph is not verified") for n in st.notes), st.notes


def _user_code_build():
    """An MLP with user code inside its backward and none on its leaves: a module full backward
    hook, a tensor hook on an activation, an opaque custom Function (Triple); each call
    logged."""
    m = _mlp_build()
    m.log = []
    m[2].register_full_backward_hook(lambda mod, gi, go: m.log.append("module"))
    return m


def _user_code_step(m):
    m.zero_grad(set_to_none=True)
    m.log.clear()
    h = m[1](m[0](torch.randn(4, 5)))
    h.register_hook(lambda g: m.log.append("tensor") or g * 2)
    m[2](Triple.apply(h)).square().sum().backward()
    return grads(m), len(m.log)


@pytest.mark.both_backends
def test_verify_user_code_verifies_hooked_graphs_running_their_hooks_twice():
    """enable(verify_user_code=True): a graph with hooks and an opaque custom Function is
    verified; on a verified backward its user code runs twice (eager's run, then ours), after
    the verified runs once, as eager's."""
    counts = []

    def step(m):
        g, n = _user_code_step(m)
        counts.append(n)
        return g
    st = differential(_user_code_build, step, steps=5,
                      options={"verify": True, "verify_user_code": True})
    assert st.verify_mismatches == 0 and st.verified_runs >= 2, (st.verified_runs, st.notes)
    eager = counts[0]       # differential runs eager's steps first (the reference)
    assert eager == 2 and counts[:5] == [2] * 5, counts
    verified = st.verified_runs
    assert counts[5:] == [4] * verified + [2] * (5 - verified), (counts, verified)


def test_verify_user_code_catches_a_wrong_kernel_in_a_hooked_graph():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = differential(_user_code_build, lambda m: _user_code_step(m)[0], steps=3,
                          backend=mm_off_by_a_bit, fallbacks=2,
                          options={"verify": True, "verify_user_code": True})
    assert st.verify_mismatches == 1, st.notes
    assert st.fallback_reasons[0].startswith("verify: compiled, the .grad of leaf")


@pytest.mark.parametrize("what", ["leaf hook", "post-accumulate hook", "retain_grad"])
def test_verify_user_code_never_reruns_leaf_hooks_or_retain_grad(what):
    """An optimizer step in a post-accumulate-grad hook, or a retained .grad, must not see a
    second run: such graphs are not verified, even when asked (Note [Verify])."""
    calls = []

    def build():
        m = _mlp_build()
        if what == "leaf hook":
            m[0].weight.register_hook(lambda g: calls.append(1))
        elif what == "post-accumulate hook":
            m[0].weight.register_post_accumulate_grad_hook(lambda p: calls.append(1))
        return m

    def step(m):
        calls.clear()
        m.zero_grad(set_to_none=True)
        h = m[0](torch.randn(4, 5))
        if what == "retain_grad":
            h.retain_grad()
        m[2](m[1](h)).square().sum().backward()
        return grads(m), len(calls), None if what != "retain_grad" else h.grad
    st = differential(build, step, steps=3, options={"verify": True, "verify_user_code": True})
    assert st.verified_runs == 0
    assert any(n.startswith("verify: a graph is not verified") for n in st.notes), st.notes


def test_verify_from_the_environment(tmp_path):
    code = ("import torch, compiled_bw\n"
            "w = torch.randn(3, 3, requires_grad=True)\n"
            "with compiled_bw.enable(backend='eager'):\n"
            "    for _ in range(4):\n"
            "        (w.tanh() @ w).sum().backward()\n"
            "print(compiled_bw.stats().verified_runs)\n")
    r = _python("-c", code, env={"COMPILED_BW_VERIFY": "3"})
    assert r.returncode == 0 and r.stdout.split()[-1] == "3", r.stdout + r.stderr


def test_bad_verify_values_are_refused():
    with pytest.raises(ValueError, match="verify"):
        compiled_bw.enable(verify=-1)


@pytest.mark.slow
def test_repro_of_an_inductor_graph_runs_clean(tmp_path, monkeypatch):
    """A repro script of a correct graph exits 0 with Inductor as its backend."""
    from compiled_bw.runtime import repro
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))
    m = _mlp_build()
    with compiled_bw.enable(backend="eager"):
        _mlp_step(m)
    path = repro.write(compiled_bw.last_graph(), "inductor", "a test")
    r = _python(path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_failed_compile_writes_a_repro_that_shows_it(tmp_path, monkeypatch):
    from compiled_bw.runtime import repro
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))
    m = _mlp_build()
    with compiled_bw.enable(backend="eager"):
        _mlp_step(m)
    note = repro.after_compile_failure(compiled_bw.last_graph(), raises, "RuntimeError: no")
    path = re.search(r"repro: (\S+\.py)", note).group(1)
    r = _python(path)
    assert r.returncode == 2 and "cannot compile anything" in r.stdout, r.stdout + r.stderr


def test_repro_with_the_steps_real_inputs(tmp_path, monkeypatch):
    """COMPILED_BW_REPRO_INPUTS=full: the repro carries the step's inputs (repro_N.pt) and
    shows the difference on them."""
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))
    monkeypatch.setenv("COMPILED_BW_REPRO_INPUTS", "full")
    compiled_bw.reset()
    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(5, 4)
    with warnings.catch_warnings(), compiled_bw.enable(backend=off_by_a_bit, verify=True):
        warnings.simplefilter("ignore")
        (x @ w).tanh().sum().backward()
    assert compiled_bw.stats().verify_mismatches == 1
    (script,) = tmp_path.glob("*.py")
    saved = torch.load(script.with_suffix(".pt"))
    assert any(t.shape == x.shape and torch.equal(t, x) for t in saved)  # mm saved x
    r = _python(str(script))
    assert r.returncode == 1 and "output 0" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_repro_of_a_dynamic_graph(tmp_path, monkeypatch):
    """A graph with symbolic sizes gets a script too: it runs at the sizes the graph was
    captured with (its size inputs as ints), and shows a wrong kernel there."""
    from compiled_bw.runtime import repro
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))
    compiled_bw.reset()
    m = _mlp_build()
    with compiled_bw.enable(backend="eager", dynamic=True):
        for batch in (4, 6):
            m(torch.randn(batch, 5)).square().sum().backward()
    assert compiled_bw.stats().dynamic_captures == 1
    gm = compiled_bw.last_graph()
    assert any(isinstance(n.meta.get("val"), torch.SymInt)
               for n in gm.graph.find_nodes(op="placeholder"))
    clean, wrong = repro.write(gm, "eager", "a test"), repro.write(gm, off_by_a_bit, "a test")
    r = _python(clean)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _python(wrong)
    assert r.returncode == 1 and "output 0" in r.stdout, r.stdout + r.stderr


class _MakesATensor(torch.nn.Module):
    """A checkpointed region that makes a tensor from Python values: its traced recomputation
    holds it as a constant (get_attr)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        y = self.lin(x)
        return y * torch.sqrt(torch.tensor(y.size(-1) * 2.0))


@pytest.mark.needs_feature("traced checkpoint recomputation")
def test_repro_of_a_graph_with_constants(tmp_path, monkeypatch):
    """A graph holding a constant gets a script too (its constants saved beside it): it runs
    clean with the eager backend and shows a wrong kernel."""
    import torch.utils.checkpoint as cp

    from compiled_bw.runtime import repro
    monkeypatch.setenv("COMPILED_BW_REPRO_DIR", str(tmp_path))
    compiled_bw.reset()
    m = _MakesATensor()
    with compiled_bw.enable(backend="eager"):
        x = torch.randn(5, 6, requires_grad=True)
        cp.checkpoint(m, x, use_reentrant=False).tanh().sum().backward()
    gm = compiled_bw.last_graph()
    assert gm.graph.find_nodes(op="get_attr"), gm.code
    clean, wrong = repro.write(gm, "eager", "a test"), repro.write(gm, off_by_a_bit, "a test")
    assert clean is not None and os.path.exists(clean[:-3] + ".constants.pt")
    r = _python(clean)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _python(wrong)
    assert r.returncode == 1 and "output 0" in r.stdout, r.stdout + r.stderr
