"""Dynamic shapes with background compile (the default): no step waits for a compile.

Each test runs a program over a sequence of sizes under eager autograd and under compiled_bw
on Inductor with background compile (differential: every grad, dtype and strides; it waits
for compiles after each step, so a graph's later steps run Inductor's code) and asserts the
captures and Inductor compiles it took.  A dynamic graph runs on the eager backend until its
Inductor compile lands, then on Inductor's code for the sizes that pass the guards Inductor
added in the worker too, and on the eager backend for the others (runtime/dynamic.py Note
[Dynamic graphs compile in the background]); a static graph of a root that has a dynamic graph compiles only when its shape repeats
(runtime/run.py Note [Compile on repeat]).
"""
import sympy
import torch
from differential import differential, grads, sized

from compiled_bw.trace import dynamic as capture_dynamic


def _over_mlp(sizes, make):
    """build/step over a sequence of sizes of one MLP: step k runs make(mlp, sizes[k])."""
    def build():
        torch.manual_seed(0)
        return {"k": 0, "m": torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                                 torch.nn.Linear(8, 3))}

    def step(s):
        n = sizes[s["k"]]
        s["k"] += 1
        return make(s["m"], n)
    return build, step


def mlp(m, n):
    m.zero_grad()
    m(torch.randn(n, 4)).pow(2).mean().backward()
    return grads(m)


def branchy(m, n):
    # at n == 3 the forward takes another path: another autograd graph (as nn.MultiheadAttention
    # at batch 1), which no dynamic graph of the other one serves
    m.zero_grad()
    y = m(torch.randn(n, 4))
    if n == 3:
        y = y.tanh()
    y.pow(2).mean().backward()
    return grads(m)


def run(sizes, make, *, captures):
    build, step = _over_mlp(sizes, make)
    return differential(build, step, steps=len(sizes), backend="inductor", captures=captures)


def test_the_dynamic_graph_compiles_in_the_background():
    st = run([8, 16, 24, 32, 40], mlp, captures=2)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # both graphs compiled in the worker, none in a step; the dynamic graph's later steps ran
    # Inductor's code (its C entry point: the C++ hit path)
    assert st.inductor_compiles == 2 and st.background_compiles == 2, st
    assert st.dynamic_hits == 3 and st.native_runs == 3, st
    assert not st.fallback_reasons, st.fallback_reasons


def test_a_one_off_shape_is_not_compiled():
    st = run([8, 16, 3, 24, 32], branchy, captures=3)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # the graph of n == 3 ran once, on the eager backend: never compiled
    assert st.inductor_compiles == 2 and st.background_compiles == 2, st
    assert st.dynamic_hits == 2, st


def test_a_shape_that_repeats_compiles_at_its_first_hit():
    st = run([8, 16, 3, 3, 3, 24], branchy, captures=3)
    assert st.dynamic_captures == 1, st.recompile_reasons
    # compiled after its second step; its third ran Inductor's code
    assert st.inductor_compiles == 3 and st.background_compiles == 3, st
    assert st.native_runs >= 2, st


def test_the_first_graph_compiles_after_its_first_run():
    # a root without a dynamic graph: compiled after its first run, not deferred to a repeat
    build, step = _over_mlp([8, 8, 8], mlp)
    st = differential(build, step, steps=3, backend="inductor")
    assert st.inductor_compiles == 1 and st.background_compiles == 1 and st.native_runs == 2, st


def encoder_sizes(sizes, **kw):
    def make(m, size):
        b, t = size
        m.zero_grad()
        m(torch.randn(b, t, 8)).pow(2).mean().backward()
        return grads(m)

    def build():
        torch.manual_seed(0)
        return {"k": 0, "m": torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True), 1)}

    def step(s):
        n = sizes[s["k"]]
        s["k"] += 1
        return make(s["m"], n)
    return differential(build, step, steps=len(sizes), backend="inductor", **kw)


def test_the_shape_guards_a_background_compile_adds_are_checked():
    # Inductor's size-oblivious compile of this encoder's dynamic graph adds shape guards in
    # the worker (equalities such as Eq(s25, s67) between a view's saved size and a tensor's
    # dim); they come back with the compiled graph and join its guards here, and the steps
    # after it run Inductor's code (its C entry point); before, such a compile was refused
    # and the graph stayed on the eager backend
    st = encoder_sizes([(3, 5), (4, 7), (2, 9), (5, 4)], captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 2, st.recompile_reasons
    assert st.background_compiles == 2 and st.native_runs == 2, st
    assert not st.fallback_reasons and not st.notes, (st.fallback_reasons, st.notes)


def test_sizes_that_fail_a_guard_inductor_added_run_on_the_eager_backend(monkeypatch):
    # A guard that Inductor's compile in the worker added and that a step's sizes fail, while
    # they pass the guards of the symbolic capture: that step must not run Inductor's code
    # (compiled for sizes that pass it) but the captured graph on the eager backend, without
    # another capture.  (On the graphs we tried, the worker's guards that reach a real program
    # are implied by the capture's; here one more guard, `size <= 30` on every size symbol,
    # stands for one that is not, added to what the worker sent.)
    extended = capture_dynamic.Guards.extended

    def with_a_bound(self, state):
        guards, replacements, ranges = state
        syms = {e for _, sizes, _, _ in self.tensors for e in sizes
                if isinstance(e, sympy.Symbol)}
        assert syms, "no symbolic size in the graph's guards"
        more = [sympy.Le(e, 30) for e in sorted(syms, key=str)]
        return extended(self, (list(guards) + more, replacements, ranges))
    monkeypatch.setattr(capture_dynamic.Guards, "extended", with_a_bound)
    st = run([8, 16, 24, 40, 24, 12, 40], mlp, captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 5, st.recompile_reasons
    # 24, 24 again (its walk key remembered) and 12 ran Inductor's code; 40 (twice) the eager
    # backend's, with a note that says why
    assert st.native_runs == 3, st
    failed = [n for n in st.notes if "a guard that Inductor's background compile" in n]
    assert len(failed) == 1 and "<= 30" in failed[0], st.notes


def test_feature_map_sizes_inductor_specialized_run_on_the_eager_backend():
    # the batch, H and W of a CNN in the worker's compile: Inductor's code serves them all
    # (backends/inductor.py Note [Inductor: conv input grads of symbolic sizes]; on torch
    # 2.13-2.14 its conv lowering made H and W constants, a guard from the worker, and the
    # other sizes ran the dynamic graph on the eager backend)
    from test_dynamic_shapes import resnet_stem
    # (batches 6 -> 7: no feature-map size makes the same change, so none shares the
    # batch's symbol: runtime/dynamic.py Note [One symbol for sizes that changed together])
    sizes = [(6, 16, 16), (7, 20, 28), (3, 13, 17), (2, 32, 24), (4, 9, 11), (5, 18, 14),
             (7, 20, 28)]
    build, step = sized(sizes, resnet_stem)
    st = differential(build, step, steps=len(sizes), backend="inductor", captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 5, st.recompile_reasons
    failed = [n for n in st.notes if "a guard that Inductor's background compile" in n]
    # all 5 dynamic runs take Inductor's code, with no note
    assert st.inductor_compiles == 2, st
    assert (st.native_runs, len(failed)) == (5, 0), (st, st.notes)


def test_a_slice_end_that_follows_the_size_compiles_in_the_worker():
    # runtime/dynamic.py Note [Size-oblivious compile that fails]: the worker's size-oblivious
    # compile of x[:n // 2]'s grad fails; compiled once more the ordinary way, with its guards
    # sent back, the later steps run Inductor's code (before: the graph stayed on the eager
    # backend, a fallback)
    def sliced(m, n):
        m.zero_grad()
        y = m(torch.randn(n, 4))
        (y[: n // 2].exp().sum() + y.narrow(0, n // 2, n - n // 2).pow(2).sum()).backward()
        return grads(m)
    st = run([8, 16, 24, 40, 12], sliced, captures=2)
    assert st.dynamic_captures == 1 and st.dynamic_hits == 3, st.recompile_reasons
    assert st.inductor_compiles == 2 and st.background_compiles == 2 and st.native_runs == 3, st
    assert not st.fallback_reasons and not st.notes, (st.fallback_reasons, st.notes)
