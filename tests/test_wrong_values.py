"""Values eager autograd defines precisely ("wrong values"): undefined grads stay
undefined, `grad_dtype`, grads for inputs that need no grad.

Differential: each program returns its grads (None kept) and a log of what hooks and custom
backwards received (None kept, tensors cloned); eager and compiled_bw must agree on every step.
"""
import pytest
import torch
from differential import differential, grads
from torch import nn

import compiled_bw


def _v(g):
    return None if g is None else g.detach().clone()


# ---- grads for inputs that need no grad ------------------------------------------------------

class _Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, mask):
        return self.lin(x) * mask


def test_module_full_backward_hook_sees_zeros_for_input_needing_no_grad():
    """BackwardHookFunction's backward returns a grad for the mask (which needs none): eager's
    validate_outputs leaves it unchecked and the node's post-hook (the module hook) sees zeros."""
    def build():
        m = _Masked()
        log = []
        m.register_full_backward_hook(lambda mod, gin, gout: log.append(
            [_v(g) for g in gin] + [_v(g) for g in gout]))
        return m, log

    def step(st):
        m, log = st
        m.zero_grad(set_to_none=True)
        x = torch.randn(2, 4, requires_grad=True)
        m(x, torch.ones(2, 4)).sum().backward()
        out = [list(log), x.grad, grads(m)]
        log.clear()
        return out
    differential(build, step)


class _PassThrough(torch.autograd.Function):
    compiled_bw_traceable = False     # an opaque call is the point here
    @staticmethod
    def forward(ctx, x, mask):
        return x * mask

    @staticmethod
    def backward(ctx, g):
        return g * 2, g * 3          # a grad for `mask`, which needs none


def test_custom_function_post_hook_sees_grad_for_input_needing_no_grad():
    """Run opaquely, the Function's output for `mask` has no known shape: eager runs it."""
    def step(log):
        x = torch.randn(3, requires_grad=True)
        y = _PassThrough.apply(x * 1, torch.ones(3))
        y.grad_fn.register_hook(lambda gi, go: log.append([_v(g) for g in gi]))
        y.sum().backward()
        out = [list(log), x.grad]
        log.clear()
        return out
    st = differential(list, step, captures=0, fallbacks=3)
    assert "an input that needs no grad" in st.fallback_reasons[0]


# ---- grad_dtype ---------------------------------------------------------------------------

class _ToDouble(torch.autograd.Function):
    """Its backward returns a float64 grad for a float32 input."""
    compiled_bw_traceable = False     # an opaque call is the point here
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.double() * 2


class _ToDoubleTraced(_ToDouble):
    compiled_bw_traceable = True


_PRODUCERS = {
    "root": lambda x: x.backward(torch.full((3,), 2.0, dtype=torch.float64)),
    "traced": lambda x: _ToDoubleTraced.apply(x).sum().backward(),
    "opaque": lambda x: _ToDouble.apply(x).sum().backward(),
    "mixed": lambda x: (_ToDoubleTraced.apply(x).sum() + (x * 3).sum()).backward(),
}


@pytest.mark.parametrize("producer", list(_PRODUCERS))
@pytest.mark.parametrize("grad_dtype", ["default", None, torch.float16, torch.float64],
                         ids=["default", "None", "f16", "f64"])
def test_leaf_grad_dtype(grad_dtype, producer):
    """torch 2.13 `grad_dtype`: grads reaching the leaf are cast to it, or kept as they are
    (None: a float64 grad on a float32 leaf stays float64).  Where the dtype is known only at
    run time (an opaque call, or a sum of two dtypes in eager's input buffer), eager runs."""
    def build():
        x = torch.randn(3, requires_grad=True)
        if grad_dtype != "default":
            x.grad_dtype = grad_dtype
        return x

    def step(x):
        _PRODUCERS[producer](x)
        return x.grad.clone()
    runtime_dtype = grad_dtype is None and producer in ("opaque", "mixed")
    differential(build, step, captures=0 if runtime_dtype else 1,
                 fallbacks=3 if runtime_dtype else 0)


# ---- undefined grads stay undefined (graph/defined.py Note [Undefined grads]) -------------

BACKENDS = ["eager", "inductor"]


class _NoneOn(torch.autograd.Function):
    """x * 2; its backward returns None on the steps `when(step)` says (else 2 * g)."""
    compiled_bw_traceable = False     # undefined grads from an opaque call (traced: test_custom_auto_traced.py)
    @staticmethod
    def forward(ctx, x, when, step):
        ctx.none = when(step)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (None if ctx.none else g * 2), None, None


class _Recv(torch.autograd.Function):
    """Logs what its backward receives; materialize_grads as asked; two outputs."""
    @staticmethod
    def forward(ctx, x, log, materialize):
        ctx.log = log
        ctx.set_materialize_grads(materialize)
        return x * 3, x * 4

    @staticmethod
    def backward(ctx, g1, g2):
        ctx.log.append(("recv", _v(g1), _v(g2)))
        gs = [g for g in (g1, g2) if g is not None]
        return (sum(gs) if gs else None), None, None


def _undefined_program(when, materialize):
    """leaf -> mul -> _Recv -> (tanh | _NoneOn) -> ..., with tensor hooks logging what they see."""
    def build():
        return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), [], [0]

    def step(st):
        x, w, log, n = st
        x.grad = w.grad = None
        k = n[0]
        n[0] += 1
        h = x * 1.5
        h.register_hook(lambda g: log.append(("h", _v(g))))
        a, b = _Recv.apply(h, log, materialize)
        t = a.tanh()
        t.register_hook(lambda g: log.append(("t", _v(g))))
        a2 = _NoneOn.apply(t, when, k)
        a2.register_hook(lambda g: log.append(("a2", _v(g))))
        b2 = _NoneOn.apply(b, lambda s: True, k)      # always undefined
        loss = (a2 * w).sum() + b2.sum()
        loss.backward()
        out = [x.grad, w.grad, list(log)]
        log.clear()
        return out
    return build, step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("materialize", [True, False], ids=["materialize", "no_materialize"])
@pytest.mark.parametrize("when", ["always", "odd_steps"])
def test_undefined_grad_stays_undefined(when, materialize, backend):
    """A custom backward returning None: downstream nodes, hooks and custom backwards see
    None (or zeros where eager materializes them), and a leaf reached only by undefined grads
    keeps `.grad is None`.  The pattern may change from step to step."""
    pred = (lambda s: True) if when == "always" else (lambda s: s % 2 == 1)
    build, step = _undefined_program(pred, materialize)
    differential(build, step, steps=4, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_undefined_grads_meet_in_one_node(backend):
    """SplitBackward0 with one undefined and one defined grad gives a defined grad (zeros
    where undefined); with both undefined, the leaf's grad stays None."""
    def step(st):
        x, n = st
        x.grad = None
        k = n[0]
        n[0] += 1
        p, q = (x * 1).split(2)
        loss = _NoneOn.apply(p, lambda s: True, k).sum() + \
            _NoneOn.apply(q, lambda s: s % 2 == 1, k).sum()
        loss.backward()
        return [x.grad]
    differential(lambda: (torch.randn(4, requires_grad=True), [0]), step, steps=4,
                 backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("allow_unused", [True, False])
def test_grad_of_undefined(allow_unused, backend):
    """grad(): an input whose grad user code left undefined is None (allow_unused), or
    eager's error, or zeros with materialize_grads."""
    def step(st):
        x, n = st
        k = n[0]
        n[0] += 1
        y = _NoneOn.apply(x.exp(), lambda s: s % 2 == 0, k).sum()
        r = torch.autograd.grad(y, [x], allow_unused=allow_unused, retain_graph=True)
        z = torch.autograd.grad(y, [x], materialize_grads=True)
        return [list(r), list(z)]
    differential(lambda: (torch.randn(3, requires_grad=True), [0]), step, steps=4,
                 backend=backend, captures=2, allow_errors=not allow_unused)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_returning_none_make_grads_undefined(backend):
    """Node pre-hooks, post-hooks and module full backward hooks may return None for a grad:
    it becomes undefined from there on, as in eager."""
    def build():
        blk = nn.Linear(3, 3)
        log: list = []
        blk.register_full_backward_hook(
            lambda mod, gin, gout: log.append(("mod", [_v(g) for g in gin])) or (None,))
        return blk, torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), log, [0]

    def step(st):
        blk, x, w, log, n = st
        k = n[0]
        n[0] += 1
        x.grad = w.grad = None
        blk.zero_grad(set_to_none=True)
        a = x.sin()
        a.register_hook(lambda g: log.append(("a", _v(g))))
        b = a * w
        b.grad_fn.register_prehook(lambda gs: (None,) if k % 2 else None)
        c = (x * 2).cos()
        c.grad_fn.register_hook(lambda gi, go: (None,) if k % 3 == 0 else None)
        d = blk(x * 3)
        (b.sum() + c.sum() + d.sum()).backward()
        out = [x.grad, w.grad, grads(blk), list(log)]
        log.clear()
        return out
    differential(build, step, steps=4, backend=backend)


class _InplaceNone(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_function_on_view_returning_none(backend):
    """mark_dirty on a view: CopySlices runs the Function's backward for the slice."""
    def step(st):
        a, w = st
        a.grad = w.grad = None
        b = a * 1
        _InplaceNone.apply(b[:2])
        (b * w).sum().backward()
        return [a.grad, w.grad]
    differential(lambda: (torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)),
                 step, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_undefined_patterns_through_multi_grad_node_and_input_buffer(backend):
    """VarMeanBackward0 gets two grads, each undefined on some steps; the leaf's input buffer
    sums that with a third grad, undefined on other steps: every combination over 6 steps."""
    def step(st):
        x, n = st
        x.grad = None
        k = n[0]
        n[0] += 1
        var, mean = torch.var_mean(x * 1, dim=0)
        loss = (_NoneOn.apply(var, lambda s: s % 2 == 1, k).sum()
                + _NoneOn.apply(mean, lambda s: s % 3 == 0, k).sum()
                + _NoneOn.apply(x * 1, lambda s: s in (1, 3), k).sum())
        loss.backward()
        return [x.grad]
    differential(lambda: (torch.randn(4, 3, requires_grad=True), [0]), step, steps=6,
                 backend=backend)


class _TracedRecv(torch.autograd.Function):
    """Opted in to tracing, without materialize_grads: its backward may receive None."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return None if g is None else g * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceable_function_receiving_undefined(backend):
    """A traced Function is exact for a grad that may be undefined only where eager passes it
    zeros (materialize_grads); here it runs as an opaque call and sees None."""
    def step(st):
        x, n = st
        x.grad = None
        k = n[0]
        n[0] += 1
        y = _TracedRecv.apply(x * 1)
        _NoneOn.apply(y, lambda s: s % 2 == 0, k).sum().backward()
        return [x.grad]
    differential(lambda: (torch.randn(3, requires_grad=True), [0]), step, steps=4,
                 backend=backend)


def test_undefined_grads_with_background_compile(monkeypatch):
    """Background compile (the users' default): the graph's opaque sites, with their formulas,
    go to the worker process; grads stay eager's before and after the switch."""
    monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "1")
    build, step = _undefined_program(lambda s: s % 2 == 1, False)

    def step_and_wait(st):
        out = step(st)
        compiled_bw.wait_for_compiles()
        return out
    st = differential(build, step_and_wait, steps=4, backend="inductor")
    assert st.background_compiles == 1, st
    assert hasattr(compiled_bw.last_compiled(), "source_code"), "Inductor's kernels did not run"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("split", ["unbind", "split"])
def test_pieces_of_a_split_each_undefined_by_user_code(split, backend):
    """graph/defined.py Note [Nodes defined where any grad is]: 10 pieces, each through a
    backward that returns None on its own steps, the whole grad undefined on the step where
    all do (x.grad stays None); before, over 6 such pieces the capture fell back."""
    n = 10
    plans = [lambda s, k=k: (s + k) % 3 == 0 for k in range(n)]     # some None each step
    plans_all = [lambda s: s == 2] * n                                # all None at step 2

    def step(st):
        x, k = st
        s = k[0]
        k[0] += 1
        x.grad = None
        pieces = x.unbind(0) if split == "unbind" else x.split(1)
        whens = plans_all if s == 2 else plans
        loss = sum(_NoneOn.apply(p, w, s).sum() for p, w in zip(pieces, whens, strict=True))
        loss.backward()
        return [x.grad]
    differential(lambda: (torch.randn(n, 3, requires_grad=True), [0]), step, steps=4,
                 backend=backend, captures=1)


def test_nodes_defined_where_any_grad_is_are_so_on_this_release():
    """The node names and semantics Note [Nodes defined where any grad is] relies on, checked
    against this release's real nodes: every pattern of undefined grads over 3 pieces."""
    import itertools

    from compiled_bw.graph.defined import ANY_DEFINED
    x = torch.randn(3, 4, requires_grad=True)
    makers = {"UnbindBackward0": lambda: x.unbind(0), "SplitBackward0": lambda: x.split(1),
              "SplitWithSizesBackward0": lambda: x.split([1, 1, 1]),
              "UnsafeSplitBackward0": lambda: torch.unsafe_split(x, 1),
              "UnsafeSplitWithSizesBackward0": lambda: torch.unsafe_split_with_sizes(x, [1, 1, 1])}
    assert set(makers) == ANY_DEFINED
    for name, make in makers.items():
        pieces = make()
        node = pieces[0].grad_fn
        now = type(node).__name__
        assert now == name, f"torch {torch.__version__}: {name} is now {now}"
        for pattern in itertools.product([False, True], repeat=3):
            gs = [torch.ones_like(p) if d else None for p, d in zip(pieces, pattern, strict=True)]
            out = node(*gs)
            out = out[0] if isinstance(out, (tuple, list)) else out
            assert (out is not None) == any(pattern), (name, pattern)


# ---- eager's branch of a formula (trace/dynamic.py Note [Formulas of the plain-tensor branch]) --

@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("op", ["max", "min", "median", "nanmedian"])
@pytest.mark.parametrize("sizes", ["static", "varying"])
def test_max_of_a_whole_tensor_with_a_grad_that_is_not_finite(op, backend, sizes):
    """evenly_distribute_backward on CPU tensors fills zeros and puts grad / count where the
    input equals the result: with an inf or NaN grad (a mixed-precision step that overflowed)
    the other positions stay 0.  The formula traced on fake tensors took the branch torch
    keeps for subclasses and CUDA (grad * mask / count): NaN at every other position.  Ties,
    a NaN input, and sizes that vary (a dynamic graph) are covered too."""
    scales = [float("inf"), 1.0, float("nan"), -float("inf")]

    def step(x):
        k = step.k = getattr(step, "k", -1) + 1
        n = 6 if sizes == "static" else 6 + k
        x.grad = None
        v = x[:n] * 1.0
        if k % 4 == 3:
            v = torch.where(torch.arange(n) == 2, float("nan"), v)
        (getattr(v, op)() * scales[k % 4]).backward()
        return [x.grad.clone()]

    def build():
        step.k = -1
        return torch.tensor([1., 3., 2., 3., 0., 3., 5., 4., 3., 5.], requires_grad=True)
    differential(build, step, steps=4, backend=backend, captures=None)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("case", ["overflow", "underflow", "zeros_and_inf", "one_zero", "dim"])
def test_prod_that_overflows_or_holds_zeros(case, backend):
    """prod_backward on plain tensors divides the result by each element where none is 0
    (inf where the product overflowed, 0 where it underflowed), gives zeros for two or more
    zeros (grad mode off), and the exclusive products for one; the formula traced on fake
    tensors always took the exclusive products (finite, finite, NaN for [0, 0, inf])."""
    values = {"overflow": [1e30, 1e30, 1e-30], "underflow": [1e-30, 1e-30, 1e30],
              "zeros_and_inf": [0.0, 0.0, float("inf")], "one_zero": [2.0, 0.0, 3.0],
              "dim": [[1e30, 2.0], [1e30, 0.0], [1e-30, 3.0]]}[case]

    def step(x):
        x.grad = None
        y = x * 1.0
        (y.prod(0).sum() if case == "dim" else y.prod()).backward()
        return [x.grad]
    differential(lambda: torch.tensor(values, requires_grad=True), step, backend=backend)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_masked_fill_value_grad_sums_in_eagers_order(backend):
    """masked_fill_backward sums the value's grad over grad.masked_select(mask) on plain
    tensors; the traced formula summed where(mask, grad, 0) in another order: 1.4e-4 apart on
    this ill-conditioned sum.  That node runs as itself where the value needs a grad; the
    input's grad alone is traced."""
    def build():
        g = torch.Generator().manual_seed(1)
        w = (torch.randn(4096, generator=g) * torch.logspace(-8, 8, 4096)).view(64, 64)
        mask = (torch.rand(4096, generator=g) < 0.5).view(64, 64)
        return [torch.randn(64, 64, requires_grad=True), torch.tensor(1.5, requires_grad=True),
                w, mask]

    def step(st):
        x, v, w, mask = st
        x.grad = v.grad = None
        (x.masked_fill(mask, v) * w).sum().backward()
        ((x * 2).masked_fill(mask, torch.tensor(0.5)) * w).sum().backward()
        return [x.grad, v.grad]
    differential(build, step, backend=backend, captures=2)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("left", [True, False])
def test_ormqr_grad_has_the_inputs_layout(left, backend):
    """ormqr_backward on plain tensors writes the input's grad column by column into
    zeros_like(input): geqrf's column-major result gets a column-major grad.  The formula
    traced on fake tensors concatenated the columns: a row-major grad, equal in values
    (graph/nodes.py Note [Grads in the layout of a saved input]).  grad() returns it as the
    formula made it; backward() lays .grad out as the leaf."""
    def build():
        g = torch.Generator().manual_seed(0)
        a, tau = torch.geqrf(torch.randn(5, 5, dtype=torch.float64, generator=g))
        return [a.requires_grad_(), tau.requires_grad_(),
                torch.randn(5, 5, dtype=torch.float64, generator=g).requires_grad_()]

    def step(st):
        a, tau, c = st
        out = torch.ormqr(a * 1, tau * 1, c * 1, left=left, transpose=True)
        return list(torch.autograd.grad(out, [a, tau, c], torch.ones_like(out)))
    differential(build, step, backend=backend)
