"""Custom autograd.Functions: one opaque call each, run with this step's ctx, with
the engine's PyNode semantics.  Every test: 3 steps, eager vs compiled, grads and logs equal,
compiled (not a fallback), one capture where the structure is stable."""

import contextlib
import weakref

import pytest
import torch
from differential import differential, grads
from functions import Double, ToBoth, Triple, WritesItsGrad

import compiled_bw


def _leaves(*shapes):
    def build():
        return [torch.randn(*s, requires_grad=True) for s in shapes] + [[]]
    return build


class Scale(torch.autograd.Function):
    """Saved tensor, non-tensor ctx state, a non-tensor arg, a Python side effect."""
    calls = 0

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        Scale.calls += 1
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, (g * x * ctx.scale).sum(0), None


def test_saved_tensors_ctx_state_side_effects_every_step():
    scales = iter([1.0, 2.5, -3.0] * 2)

    def step(st):
        x, w, log = st
        for p in (x, w):
            p.grad = None
        before = Scale.calls
        Scale.apply(x.tanh(), w, next(scales)).sum().backward()
        log.append(Scale.calls - before)   # the user's backward ran exactly once per step
        return [x.grad, w.grad, list(log)]
    differential(_leaves((4, 3), (3,)), step)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


class TwoOut(torch.autograd.Function):
    """mark_non_differentiable, an output that needs no grad, materialized zeros."""

    @staticmethod
    def forward(ctx, x):
        idx = (x > 0).float()
        ctx.mark_non_differentiable(idx)
        return x.exp(), idx, x * 2

    @staticmethod
    def backward(ctx, g_exp, g_idx, g_two):
        ctx.seen = (g_exp is None, g_idx is None, g_two is None, float(g_idx.abs().sum()))
        return g_exp * 2 + g_two


def test_non_differentiable_and_unused_outputs_get_zeros():
    def step(st):
        x, log = st
        x.grad = None
        e, idx, _two = TwoOut.apply(x)
        (e * idx).sum().backward()       # `two` unused: its grad is materialized as zeros
        log.append(e.grad_fn.seen)
        return [x.grad, list(log)]
    differential(_leaves((5,)), step)


class NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, ga, gb):
        ctx.got_none = (ga is None, gb is None)
        out = torch.zeros_like(ga if ga is not None else gb)
        if ga is not None:
            out = out + ga * 3
        if gb is not None:
            out = out + gb
        return out


def test_set_materialize_grads_false_passes_none():
    def step(st):
        x, log = st
        x.grad = None
        a, _b = NoMaterialize.apply(x)
        a.sum().backward()
        log.append(a.grad_fn.got_none)
        return [x.grad, list(log)]
    differential(_leaves((3,)), step)


class OnceDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.square()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_once_differentiable_and_used_several_times():
    def step(st):
        x, w, _log = st
        x.grad = w.grad = None
        y = OnceDiff.apply(x) + OnceDiff.apply(x * w) + OnceDiff.apply(OnceDiff.apply(w))
        y.sum().backward()
        return [x.grad, w.grad]
    differential(_leaves((4,), (4,)), step)


class WrongDtypeBroadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        # float64 grad for a float32 input (cast), and an unreduced grad for a broadcast input
        return g.double(), g


def test_validate_outputs_cast_and_sum_to():
    def step(st):
        x, b, _log = st
        x.grad = b.grad = None
        WrongDtypeBroadcast.apply(x, b).sin().sum().backward()
        return [x.grad, b.grad]
    differential(_leaves((3, 4), (4,)), step)


class Traceable(torch.autograd.Function):
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return x.sigmoid() * alpha

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = x.sigmoid()
        return g * s * (1 - s) * ctx.alpha, None


def test_opt_in_traceable_function_is_inlined():
    alphas = iter([2.0, 2.0, 2.0, 2.0, 2.0, 2.0])

    def step(st):
        x, _log = st
        x.grad = None
        Traceable.apply(x * 1.5, next(alphas)).sum().backward()
        return [x.grad]
    differential(_leaves((6,)), step)
    code = compiled_bw.last_graph().code
    assert "compiled_bw.opaque" not in code and "aten.sigmoid" in code


def test_traceable_ctx_state_change_recaptures():
    alphas = iter([2.0, 3.0, 2.0] * 2)

    def step(st):
        x, _log = st
        x.grad = None
        Traceable.apply(x, next(alphas)).sum().backward()
        return [x.grad]
    st = differential(_leaves((6,)), step, captures=2)
    assert st.cache_hits == 1


class PlainBackward(torch.autograd.Function):
    """Traced; its backward reads no global, closure cell or default (custom.py Note [Constant
    function keys])."""
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_traceable_backward_code_replaced_recaptures():
    """A backward whose code object is replaced between steps is another function for the
    trace: recaptured, never the old constant."""
    double = PlainBackward.backward.__code__
    triple = (lambda ctx, g: g * 3).__code__
    codes = iter([double, triple, double] * 2)

    def step(st):
        x, _log = st
        x.grad = None
        PlainBackward.backward.__code__ = next(codes)
        PlainBackward.apply(x).sum().backward()
        return [x.grad]
    try:
        st = differential(_leaves((6,)), step, captures=2)
    finally:
        PlainBackward.backward.__code__ = double
    assert st.cache_hits == 1


class TraceableDivide(torch.autograd.Function):
    compiled_bw_traceable = True

    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return x / d

    @staticmethod
    def backward(ctx, g):
        return g / ctx.d, None


def test_traceable_ctx_keys_are_typed():
    """-0.0 == 0.0 and True == 1 in Python, but a traced constant of one is not the other:
    g / -0.0 is -inf where g / 0.0 is inf; each value gets its own graph."""
    ds = iter([0.0, -0.0, 0.0, True, 1] * 2)

    def step(st):
        x, _log = st
        x.grad = None
        d = next(ds)
        TraceableDivide.apply(x, d).sum().backward()
        return [x.grad, type(d).__name__]
    differential(_leaves((3,)), step, steps=5, captures=4)


def test_two_classes_never_share_a_graph():
    fns = iter([Double, Triple, Double] * 2)   # same shapes, two classes

    def step(st):
        x, _log = st
        x.grad = None
        next(fns).apply(x).sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, captures=2)


class TooMany(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g, g


class TrailingNones(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None


class TooFew(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return (g,)


@pytest.mark.parametrize("fn", ["too_many", "trailing_nones", "too_few"])
def test_pynode_count_checks_raise_eagers_error(fn):
    def step(st):
        x, _log = st
        x.grad = None
        if fn == "too_many":
            out = TooMany.apply(x, 2.0)      # grad for the non-tensor arg k
        elif fn == "trailing_nones":
            out = TrailingNones.apply(x)
        else:
            out = TooFew.apply(x, x * 1)
        out.sum().backward()
        return [x.grad]
    differential(_leaves((3,)), step, allow_errors=fn != "trailing_nones")


def test_function_applied_before_import_falls_back():
    from compiled_bw.graph import custom
    x = torch.randn(3, requires_grad=True)
    y = Double.apply(x)
    del y.grad_fn.metadata[custom.FWD_KEY]      # as if created before compiled_bw's import
    compiled_bw.reset()
    with compiled_bw.enable():
        y.sum().backward()
    st = compiled_bw.stats()
    assert st.fallbacks == 1 and "before compiled_bw was imported" in st.fallback_reasons[0]
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_grads_helper_smoke():
    m = torch.nn.Linear(2, 2)
    assert grads(m) == [None, None]


def test_activation_checkpointing_both_modes():
    import torch.utils.checkpoint as cp

    def build():
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
        return [m, torch.randn(3, 4)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        a = cp.checkpoint(m, x.requires_grad_(), use_reentrant=True)
        b = cp.checkpoint(m, x * 2, use_reentrant=False)
        (a * b).sum().backward()
        return grads(m) + [x.grad]
    # the outer backward compiles: the non-reentrant region's nodes (hooked saved tensors) and
    # CheckpointFunction are opaque calls; the reentrant one's inner backward is its own capture
    differential(build, step, captures=2, strict=True)


def test_reentrant_checkpoint_is_an_opaque_custom_call():
    import torch.utils.checkpoint as cp

    def build():
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
        return [m, torch.randn(3, 4)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        cp.checkpoint(m, x.requires_grad_(), use_reentrant=True).pow(2).sum().backward()
        return grads(m) + [x.grad]
    # the outer backward compiles (CheckpointFunction is one opaque call); the recomputation's
    # own backward, called from inside it, is its own capture (tests/test_checkpoint.py)
    differential(build, step, captures=2, strict=True)


class _SavesInputs(torch.autograd.Function):
    """Saves its inputs (saved originals: eager's ctx.saved_tensors gives the very objects)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        seen = ctx.seen
        seen.append((x is seen[0], w is seen[1], x.requires_grad, w.requires_grad,
                     getattr(w, "tag", None), None if x.grad is None else x.grad.clone()))
        return g * w, None


@pytest.fixture(params=["cpp", "python", pytest.param("python-no-extension", marks=pytest.mark.xfail(
        strict=True, reason="docs/semantics.md known deviation: without the C++ extension Slots free them"))])
def walk(request, monkeypatch):
    """The C++ walk, then the Python walk (COMPILED_BW_FASTWALK=0, or a graph the C++ walk gives
    up on), then the Python walk with no C++ extension at all (no compiler), for this test."""
    from compiled_bw.walk import fastwalk
    monkeypatch.setattr(fastwalk._S, "enabled", request.param == "cpp")
    if request.param == "python-no-extension":
        monkeypatch.setattr(fastwalk._S, "ext", None)
        monkeypatch.setattr(fastwalk._S, "tried", True)
    return request.param


@pytest.mark.parametrize("retain", [False, True])
def test_saved_inputs_are_the_same_objects(retain, walk):
    """python_function.cpp / saved_variable.cpp: an input saved with save_for_backward is
    saved as the original, and unpacking it returns that tensor (also one needing no grad);
    a graph run twice with retain_graph=True gives them again, without it eager raises.
    Both walks (the Python walk slotted them: new tensor objects)."""
    def build():
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(3)
        w.tag = "w"
        return x, w

    def step(state):
        x, w = state
        x.grad = None
        seen = [x, w]
        y = _SavesInputs.apply(x, w)
        y.grad_fn.seen = seen
        loss = (y * 2).sum()
        loss.backward(retain_graph=retain)
        try:
            loss.backward(retain_graph=retain)
        except RuntimeError as e:
            seen.append(str(e).split(".")[0])
        return seen[2:], x.grad

    differential(build, step, steps=3, captures=1, fallbacks=0 if retain else 3,
                 strict=False, allow_errors=False)


class _Clone(torch.autograd.Function):
    compiled_bw_traceable = False     # an opaque call is the point here
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("into", ["custom", "hook"])
def test_sparse_grad_into_an_opaque_call_falls_back(into):
    """embedding(sparse=True) makes a sparse COO grad for its weight; an opaque call (custom
    Function, tensor hook) cannot take it: the step falls back with a reason, never crashes."""
    def build():
        return torch.randn(10, 3, requires_grad=True), []

    def step(state):
        w, log = state
        w.grad = None
        if into == "custom":
            weight = _Clone.apply(w)
        else:
            weight = w * 1
            weight.register_hook(lambda g: log.append(g.layout) or g * 2)
        torch.nn.functional.embedding(torch.tensor([1, 2, 1]), weight, sparse=True).sum().backward()
        return w.grad.to_dense(), w.grad.layout, list(log)

    st = differential(build, step, steps=2, captures=0, fallbacks=2, strict=False)
    assert all("sparse" in r for r in st.fallback_reasons), st.fallback_reasons


class _SparseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g.to_sparse()


class _FixedGrad(torch.autograd.Function):
    """PyTorch's test_sparse_backward FixedGradientFunction: returns the grad it saved."""

    @staticmethod
    def forward(ctx, x, grad_x):
        ctx.save_for_backward(grad_x)
        return x

    @staticmethod
    def backward(ctx, g):
        (grad_x,) = ctx.saved_tensors
        return grad_x, None


@pytest.mark.parametrize("order", ["sparse_first", "dense_first", "sparse_only"])
def test_sparse_grads_out_of_opaque_calls_summed_for_a_leaf(order):
    """PyTorch's test_sparse_backward: custom backwards return sparse COO and dense grads for
    one dense leaf; eager's InputBuffer sums them (a sparse buffer is added to the dense grad,
    sparse + sparse stays sparse) and .grad is their sum (backends/eager.py Note [Sparse grads
    from opaque calls]).  The first step runs as eager does; later ones run eager autograd."""
    size = (6, 3, 2)

    def build():
        torch.manual_seed(0)
        sp1 = torch.sparse_coo_tensor(torch.tensor([[0, 3, 4], [0, 2, 2]]), torch.randn(3, 2),
                                      size)
        sp2 = torch.sparse_coo_tensor(torch.tensor([[0, 1, 3, 4], [0, 1, 2, 2]]),
                                      torch.randn(4, 2), size)
        dense = torch.rand(size)
        grads = {"sparse_first": [sp1, dense, sp2], "dense_first": [dense, sp1, sp2],
                 "sparse_only": [sp1, sp2]}[order]
        return torch.randn(size, requires_grad=True), grads

    def step(state):
        x, gs = state
        x.grad = None
        out = _FixedGrad.apply(x, gs[0])
        for g in gs[1:]:
            out = out + _FixedGrad.apply(x, g)
        out.sum().abs().backward()
        return x.grad.layout, x.grad.to_dense()

    st = differential(build, step, steps=2, captures=1, fallbacks=1, strict=False)
    assert all("sparse" in r for r in st.fallback_reasons), st.fallback_reasons


@pytest.mark.parametrize("call", ["backward", "grad"])
def test_sparse_grad_out_of_an_opaque_call_is_the_result(call):
    """A custom backward returns a sparse grad for a dense input (eager's validate_outputs
    allows it: gradcheck's test_gradcheck_backward_mul_by_grad_output); it becomes .grad or
    grad()'s result as in eager."""
    def build():
        return torch.randn(4, 3, requires_grad=True), None

    def step(state):
        x, _ = state
        x.grad = None
        y = (_SparseGrad.apply(x) * 2).sum()
        got = torch.autograd.grad(y, x)[0] if call == "grad" else (y.backward(), x.grad)[1]
        return got.layout, got.to_dense()

    differential(build, step, steps=2, captures=1, fallbacks=1, strict=False)


def test_sparse_grad_into_a_traced_formula_raises_once_then_falls_back():
    """A sparse grad from a custom backward that a traced formula would use (known only when
    it runs; eager computes on with it): that backward raises an error naming the Function
    (docs/semantics.md known deviation), leaves no .grad written, and later backwards of the graph run
    eager autograd.  Under Inductor's code (no background compile) a sparse grad anywhere."""
    def run(w):
        w.grad = None
        (_SparseGrad.apply(w * 3) * 2).sum().backward()
        return w.grad

    w = torch.randn(4, 3, requires_grad=True)
    want = run(w)
    compiled_bw.reset()
    with compiled_bw.enable(backend="eager"):
        with pytest.raises(RuntimeError, match=r"SparseGradBackward returned a torch\.sparse_coo grad"):
            run(w)
        assert w.grad is None
        for _ in range(2):
            got = run(w)
            assert got.layout == torch.sparse_coo
            torch.testing.assert_close(got.to_dense(), want.to_dense())
    st = compiled_bw.stats()
    assert st.fallbacks == 2 and all("sparse" in r for r in st.fallback_reasons), st
    compiled_bw.reset()
    with compiled_bw.enable(backend="inductor", background_compile=False):
        x = torch.randn(4, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"SparseGradBackward returned a torch\.sparse_coo grad"):
            (_SparseGrad.apply(x) * 2).sum().backward()
        assert x.grad is None


def test_clear_saved_tensors_on_access():
    # PyTorch's test_clear_saved_tensors_on_access: the backward's own access is the only one
    # (the walk must not read ctx.saved_tensors), and after it the local is the last reference
    class F(torch.autograd.Function):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            ref = weakref.ref(x)
            del x
            F.freed.append(ref() is None)
            return g * 2

    def build():
        F.freed = []
        return torch.randn(3, requires_grad=True)

    def step(x):
        x.grad = None
        F.apply(x.clone()).sum().backward()
        return [x.grad, list(F.freed)]
    differential(build, step)


def test_grad_keeps_the_layout_a_custom_backward_returns():
    """A backward returning a transposed-layout grad: grad() gives it (and its views) in that
    layout, as eager does, though the graph was traced with a contiguous guess (Note [Opaque
    output layout])."""
    class TransposedGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return (g * 2).t().contiguous().t()

    def step(st):
        x, w = st
        y = TransposedGrad.apply(x)
        z = TransposedGrad.apply(w).t()       # TBackward's t() of the custom node's grad
        loss = (y.sin() * 3).sum() + (z @ z.t()).sum()
        return list(torch.autograd.grad(loss, [x, w]))
    differential(lambda: [torch.randn(3, 4, requires_grad=True),
                          torch.randn(5, 6, requires_grad=True)], step, strict=True)


def test_a_traced_write_into_a_grad_a_leaf_also_got_runs_eager_autograd():
    """AddBackward0 hands one grad to leaf `b` and to WritesItsGrad, whose backward doubles it
    in place: eager's AccumulateGrad for `b` ran first and copied the undoubled values.  Our
    graph would return the written tensor for `b` (2x); the capture refuses, the backward runs
    eager autograd (trace/trace.py Note [Returned grads written in place later])."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        ((b + WritesItsGrad.apply(a)) * torch.arange(1.0, 7.0).view(2, 3)).sum().backward()
        return a.grad, b.grad
    st = differential(lambda: [torch.randn(2, 3, requires_grad=True) for _ in range(2)], step,
                      captures=0, fallbacks=3, strict=False)
    assert all("written in place after its node took it" in r for r in st.fallback_reasons), st


_DECLARES_GRAD_DTYPES = pytest.mark.skipif(
    not hasattr(torch.autograd.function.FunctionCtx, "set_output_grad_dtype"),
    reason="ctx.set_output_grad_dtype is new in torch 2.14")
_GRAD_BUFFERS = pytest.mark.skipif(
    not hasattr(torch.autograd.function.FunctionCtx, "input_grad_buffers"),
    reason="ctx.input_grad_buffers is new in torch 2.15")
_SEEN: list = []


class _DeclaresGradDtype(torch.autograd.Function):
    """Declares its output's grad dtype (ctx.set_output_grad_dtype); its backward logs the
    dtype the engine handed it."""
    @staticmethod
    def forward(ctx, x, declared):
        if declared != "default":
            ctx.set_output_grad_dtype(None if declared == "none" else torch.float32)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        _SEEN.append(g.dtype)
        return g * 3, None


class _Widens(torch.autograd.Function):
    """Returns a float32 grad for its bfloat16 input; `log` makes its backward opaque."""
    @staticmethod
    def forward(ctx, y, log):
        ctx.log = log
        return y.float() * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.log:
            _SEEN.append("widens")
        return g * 2, None


@_DECLARES_GRAD_DTYPES
@pytest.mark.both_backends
@pytest.mark.parametrize("declared,consumer", [
    ("float32", "to"), ("none", "to"), ("default", "to"), ("float32", "traced"),
    ("none", "traced"), ("default", "traced"), ("float32", "opaque"), ("none", "opaque")])
def test_declared_output_grad_dtypes_reach_the_backward(declared, consumer):
    """graph/saved.py Note [Declared grad dtypes]: a bfloat16 output declared float32 gets a
    float32 grad in its backward (eager's validate_outputs casts to the declared dtype; before:
    compiled_bw cast it to bfloat16, and every grad below it was computed in bfloat16); declared
    None, it gets the grad in the dtype its consumer produced (float32 from _Widens).  An opaque
    consumer whose grad's dtype is known only when it runs, into a None slot, falls back."""
    def build():
        return torch.randn(4, 3, requires_grad=True)

    def step(x):
        x.grad = None
        del _SEEN[:]
        y = _DeclaresGradDtype.apply(x.to(torch.bfloat16), declared)
        z = y.float() if consumer == "to" else _Widens.apply(y, consumer == "opaque")
        (z * torch.linspace(0, 1, 3)).pow(2).sum().backward()
        return [x.grad, list(_SEEN)]

    unknown = declared == "none" and consumer == "opaque"
    st = differential(build, step, captures=0 if unknown else 1, fallbacks=3 if unknown else 0)
    if unknown:
        assert "grad_dtype is None" in st.fallback_reasons[0], st


class _AddsIntoItsBuffer(torch.autograd.Function):
    """The docstring example of torch 2.15's ctx.input_grad_buffers: adds x's grad into the
    engine's buffer when one is there, else returns it."""
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, go):
        x, w = ctx.saved_tensors
        xb, wb = _buffers(ctx)
        _SEEN.append((xb is not None, wb is not None))
        if xb is None:
            return go @ w.t(), x.t() @ go
        xb.add_(go @ w.t())
        return None, x.t() @ go


def _buffers(ctx):
    return ctx.input_grad_buffers


@_GRAD_BUFFERS
@pytest.mark.both_backends
@pytest.mark.parametrize("first", ["other", "matmul"])
def test_a_backward_reading_input_grad_buffers_runs_eager_autograd(first):
    """graph/custom.py Note [Grad buffers of a custom backward]: which buffers the engine gives
    follows its order (x's is there when the other use of x ran first); a compiled graph has
    none, and torch raised "input_grad_buffers can only be accessed from the currently
    executing autograd.Function backward()" under compiled_bw.  That backward now runs eager
    autograd, the node named (read here through a helper function)."""
    def build():
        return [torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)]

    def step(st):
        x, w = st
        x.grad = w.grad = None
        del _SEEN[:]
        h = x * 2
        mm = _AddsIntoItsBuffer.apply(h, w).sum()
        loss = mm + (h * h).sum() if first == "other" else (h * h).sum() + mm
        loss.backward()
        return [x.grad, w.grad, list(_SEEN)]

    st = differential(build, step, captures=0, fallbacks=3)
    assert all("_AddsIntoItsBufferBackward's backward reads ctx.input_grad_buffers" in r
               for r in st.fallback_reasons), st


class _ZeroGradFrom(torch.autograd.Function):
    """Returns torch._efficientzerotensor (no storage) as its grad once `state["zero"]` is set."""

    @staticmethod
    def forward(ctx, x, state):
        ctx.state = state
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.state["zero"]:
            return torch._efficientzerotensor(g.shape, dtype=g.dtype, device=g.device), None
        return g * 2, None


@pytest.mark.both_backends
def test_a_zero_tensor_out_of_an_opaque_call_is_zeros():
    """calls/opaque.py Note [ZeroTensors from opaque calls]: a custom backward returning an
    efficient ZeroTensor, which traced formulas then use (exp's and mul's), on a hit of the
    compiled graph.  Before, the step's own checks raised "Attempted to access the data pointer
    on an invalid python storage" where eager gives zeros; now that backward computes eager's
    values and the graph's later backwards run eager autograd."""
    def build():
        return torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True), {"n": 0}

    def step(state):
        w, x, st = state
        w.grad = x.grad = None
        st["zero"] = st["n"] > 0            # a dense grad on the capture step, zeros after
        st["n"] += 1
        _ZeroGradFrom.apply(x.exp() * w, st).sin().sum().backward()
        return w.grad.clone(), x.grad.clone()

    st = differential(build, step, steps=3, captures=1, fallbacks=1, strict=False)
    assert all("ZeroTensor" in r for r in st.fallback_reasons), st.fallback_reasons


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "saved_tensor_hooks"])
def test_a_sparse_embedding_grad_into_a_custom_function(hooked):
    """EmbeddingBag's sparse grad (sparse=True) goes into a custom Function's backward
    (PyTorch's test_no_grad_copy_sparse).  With saved-tensor hooks the node runs as an opaque
    call, whose output the graph would hold dense: the backward runs eager autograd (a
    fallback naming the node), never an error eager does not raise."""
    import torch.nn.functional as F

    def build():
        return [torch.randn(10, 3, requires_grad=True), torch.randn(10, 3, requires_grad=True)]

    def step(st):
        a, b = st
        a.grad = b.grad = None
        hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t) if hooked \
            else contextlib.nullcontext()
        with hooks:
            y = F.embedding_bag(ToBoth.apply(a, b), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
                                torch.tensor([0, 4]), sparse=True)
        loss = y.sum()
        for _ in range(3):
            loss.backward(retain_graph=True)
        return [a.grad.to_dense(), b.grad.to_dense(), a.grad.layout]
    differential(build, step, steps=3, fallbacks=None, captures=None)
