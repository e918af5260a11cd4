"""Programs compiled_bw cannot (or must not) compile run exactly as eager, errors included,
and a failed backward leaves every .grad as eager leaves it."""
import logging

import pytest
import torch
from differential import differential, grads, selected_backend

import compiled_bw


def _leaf_pair():
    return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]


def test_anomaly_mode_falls_back():
    def step(ps):
        a, b = ps
        for p in ps:
            p.grad = None
        with torch.autograd.detect_anomaly(check_nan=False):
            (a * b).exp().sum().backward()
        return grads(ps)
    st = differential(_leaf_pair, step, captures=0, fallbacks=3, strict=False)
    assert st.fallback_reasons[0] == "anomaly mode is enabled"


def test_create_graph_double_backward_is_captured():
    """The create_graph=True grad() is captured (tests/test_create_graph.py has the rest); the
    second one, through the graph it built, is an ordinary grad() and compiles too."""
    def step(ps):
        a, b = ps
        (ga,) = torch.autograd.grad((a * b).pow(3).sum(), [a], create_graph=True)
        (gga,) = torch.autograd.grad(ga.sum(), [a])
        return [ga.detach(), gga, ga.requires_grad]
    # 2: each grad() once.  In the first step the first graph's nodes carry our slots from its
    # capture (the C++ walk keys them with the bytes recorded then), in the second they are
    # walked fresh: the same key (walk/fastwalk.py Note [Node-local tensor ids])
    differential(_leaf_pair, step, captures=2)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_not_implemented_derivative_raises_eagers_error(backend):
    """IgammaBackward0's formula raises "not implemented" for d/d input: the node runs as the
    real node (trace.py Note [Built-in formulas fake tensors reject]), which raises eager's
    error each step; b's grad, from a branch that eager runs first (higher sequence number),
    is delivered before the error as in eager; a's stays as it was."""
    def step(ps):
        a, b = ps
        a.grad, b.grad = torch.ones(3), None
        try:
            (torch.igamma(a.abs() + 1, torch.ones(3)).sum() + (b * b).sum()).backward()
        except RuntimeError as e:
            return str(e), a.grad.clone(), None if b.grad is None else b.grad.clone()
        return "no error"
    out = []

    def record(ps):
        out.append(step(ps))
        return out[-1]
    differential(_leaf_pair, record, captures=1, backend=backend)
    assert all("not implemented" in r[0] for r in out), out


def _complex_pair():
    return [torch.randn(4, 4, dtype=torch.complex128, requires_grad=True),
            torch.randn(3, requires_grad=True)]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("op", ["eig", "eigh"])
def test_an_eigenvector_phase_dependent_loss_raises_eagers_error(backend, op):
    """graph/nodes.py Note [Checks fake tensors skip]: linalg_eig_backward checks that the loss
    does not depend on the complex eigenvectors' phase only on tensors that are not
    subclass-like, so a formula traced on fake tensors skipped it and returned a grad where
    eager raises "... specified up to multiplication by e^{i phi} ... ill-defined" (a
    Koopman-style loss on eigenvectors' real parts).  b's grad is delivered before the error
    as in eager.  Even steps take a phase-independent loss (|V|): same grads, no error."""
    out = []

    def step(ps):
        a, b = ps
        a.grad, b.grad = None, None
        m = a if op == "eig" else a @ a.mH
        vectors = (torch.linalg.eig if op == "eig" else torch.linalg.eigh)(m)[1]
        phase_free = len(out) % 2 == 0
        loss = (vectors.abs() if phase_free else vectors.real).sum() + (b * b).sum()
        try:
            loss.backward()
        except RuntimeError as e:
            out.append(str(e))
            return str(e), None if a.grad is None else a.grad.clone(), b.grad.clone()
        out.append("no error")
        return a.grad.clone(), b.grad.clone()
    differential(_complex_pair, step, steps=4, captures=2, backend=backend, allow_errors=True)
    assert ["e^{i phi}" in r for r in out] == [False, True] * 4, out


def test_custom_backward_that_raises_leaves_grads_untouched():
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    def step(ps):
        a, b = ps
        a.grad, b.grad = torch.ones(3), torch.full((3,), 2.0)
        try:
            (Boom.apply(a) * b).sum().backward()
        except ValueError as e:
            return [a.grad, b.grad, str(e)]

    # Same error as eager, and the same .grads: eager has already accumulated into b.grad when
    # BoomBackward raises (leaves run first), a.grad is untouched; compiled_bw delivers leaf
    # grads at eager's points where user code runs (runtime/run.py Note [Delivery points]).
    torch.manual_seed(0)
    eager = step(_leaf_pair())
    assert not torch.equal(eager[1], torch.full((3,), 2.0))
    compiled_bw.reset()
    torch.manual_seed(0)
    with compiled_bw.enable(strict=True):
        ours = step(_leaf_pair())
    assert ours[2] == eager[2] == "boom in backward"
    assert torch.equal(ours[0], torch.ones(3)) and torch.equal(ours[1], eager[1])
    assert compiled_bw.stats().captures == 1


@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_nested_tensors_run_eager_with_a_named_reason(layout):
    # #36 item 6: a strided nested tensor's grad reached the Python walk's read of the node's
    # input shape, and the fallback reason was torch's "std::get: wrong index for variant"
    import warnings
    lay = torch.strided if layout == "strided" else torch.jagged

    def build():
        return [torch.randn(2, 4), torch.randn(3, 4)]

    def step(parts):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # strided nested tensors are a prototype
            nt = torch.nested.nested_tensor([p.clone() for p in parts], layout=lay,
                                            requires_grad=True)
            y = nt.sin() * 2
            go = torch.ones_like(y)
            (g,) = torch.autograd.grad(y, [nt], go)
        return list(g.unbind())
    st = differential(build, step, steps=2, captures=0, fallbacks=2)
    assert all("nested" in r and "std::get" not in r for r in st.fallback_reasons), \
        st.fallback_reasons


class _LogRecords(logging.Handler):
    """The records a user sees by default (WARNING and above)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append((record.name, record.levelname, record.getMessage()))


@pytest.mark.both_backends
def test_a_failed_meta_kernel_logs_nothing_eager_does_not():
    """torchapi/dynamo.py Note [Meta failures are our fallbacks]: a backward whose formula's
    meta kernel raises (adaptive pooling to an empty output: eager raises the same error from
    the real kernel) printed FakeTensor's ERROR log with a traceback when compiled_bw traced
    it; eager logs nothing.  The error and the warnings and errors logged by every torch
    logger (torch sets up its loggers with their own handlers, not propagating) are eager's."""
    def step(state):
        (x,) = state
        x.grad = None
        torch.nn.functional.adaptive_avg_pool2d(x * 2, (0, 0)).sum().backward()

    def logged(run):
        handler = _LogRecords()
        loggers = [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)
                   if n == "torch" or n.startswith("torch.")]
        for lg in loggers:
            lg.addHandler(handler)
        try:
            with pytest.raises(RuntimeError) as e:
                run()
        finally:
            for lg in loggers:
                lg.removeHandler(handler)
        return str(e.value), handler.records

    state = [torch.randn(1, 3, 8, 8, requires_grad=True)]
    want = logged(lambda: step(state))
    compiled_bw.reset()
    with compiled_bw.enable(backend=selected_backend()):
        got = logged(lambda: step(state))
    assert got == want, (got, want)
