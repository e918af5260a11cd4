"""create_graph=True backwards, captured (trace/differentiable.py Note [create_graph]): the grads
they return, and the `.grad`s they accumulate, carry eager's history, so second- and
third-order grads through them equal eager's; what cannot record history falls back, named.

Each step returns the first-order results, whether they require grad, and the grads of a
backward through them (itself captured), compared with eager's by the differential helper."""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from differential import differential

D = torch.float64
# Both backends: on Inductor the create_graph graphs themselves run on the eager backend too
# (trace/differentiable.py Note [create_graph]); the backward through their results is
# compiled like any other.
pytestmark = pytest.mark.both_backends


def _history(ts) -> list:
    """What a caller can see of a result's history: requires_grad and whether it has a grad_fn."""
    return [None if t is None else (t.requires_grad, t.grad_fn is not None) for t in ts]


def _mlp(din=2, width=16, dout=1, act=torch.nn.Tanh):
    return torch.nn.Sequential(torch.nn.Linear(din, width), act(), torch.nn.Linear(width, width),
                               act(), torch.nn.Linear(width, dout)).to(D)


def test_burgers_pinn_residual():
    """u(x, t) by an MLP; u_x, u_t, u_xx by grad(create_graph=True); loss.backward() through them."""
    def build():
        return _mlp()

    def step(net):
        net.zero_grad(set_to_none=True)
        xt = torch.rand(64, 2, dtype=D, requires_grad=True)
        u = net(xt)
        du = torch.autograd.grad(u.sum(), xt, create_graph=True)[0]
        u_x, u_t = du[:, 0], du[:, 1]
        u_xx = torch.autograd.grad(u_x.sum(), xt, create_graph=True)[0][:, 0]
        res = u_t + u.squeeze(1) * u_x - 0.01 / torch.pi * u_xx
        loss = res.pow(2).mean()
        loss.backward()
        return [du, u_xx, _history([du, u_xx]), [p.grad for p in net.parameters()]]
    st = differential(build, step, captures=None)
    assert st.captures >= 3 and st.cache_hits >= 3, st


def test_heat_residual_2d_with_grad_outputs():
    """A 2-D heat residual u_t - (u_xx + u_yy), grads taken with grad_outputs and inputs=."""
    def build():
        return _mlp(din=3, act=torch.nn.SiLU)

    def step(net):
        net.zero_grad(set_to_none=True)
        p = torch.rand(32, 3, dtype=D, requires_grad=True)
        u = net(p)
        du, = torch.autograd.grad(u, p, grad_outputs=torch.ones_like(u), create_graph=True)
        lap = 0
        for k in (0, 1):
            lap = lap + torch.autograd.grad(du[:, k], p, torch.ones_like(du[:, k]),
                                            create_graph=True)[0][:, k]
        loss = (du[:, 2] - lap).pow(2).mean()
        torch.autograd.backward(loss, inputs=list(net.parameters()))
        return [du, lap, [q.grad for q in net.parameters()], p.grad]
    differential(build, step, captures=None)


def test_double_backprop_backward_create_graph():
    """loss.backward(create_graph=True): `.grad` is stored with history (AccumulateGrad with
    grad mode on); a penalty on the grads' norm is then backpropagated into the weights."""
    def build():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))

    def step(net):
        net.zero_grad(set_to_none=True)
        x = torch.randn(6, 5)
        loss = F.cross_entropy(net(x), torch.tensor([0, 1, 2, 0, 1, 2]))
        loss.backward(create_graph=True)
        gs = [p.grad for p in net.parameters()]
        hist = _history(gs)
        penalty = sum(g.pow(2).sum() for g in gs)
        grads2 = torch.autograd.grad(penalty, list(net.parameters()))
        first = [g.detach().clone() for g in gs]
        net.zero_grad(set_to_none=True)     # break the cycle .grad -> graph -> .grad
        return [first, hist, grads2]
    differential(build, step, captures=None)


def test_input_gradient_regularization_accumulates_into_grad_with_history():
    """backward(create_graph=True) twice into the same .grad: the second sums out of place."""
    def build():
        return [torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(st):
        w, b = st
        w.grad = b.grad = None
        x = torch.randn(5, 4)
        (x @ w + b).tanh().pow(2).sum().backward(create_graph=True)
        (x @ w * b).sin().sum().backward(create_graph=True)
        hist = _history([w.grad, b.grad])
        gg = torch.autograd.grad((w.grad.pow(2).sum() + b.grad.sum()), [w, b])
        out = [w.grad.detach().clone(), b.grad.detach().clone(), hist, gg]
        w.grad = b.grad = None
        return out
    differential(build, step, captures=None)


def test_hessian_vector_product_and_third_order():
    def build():
        return [torch.randn(7, dtype=D, requires_grad=True), torch.randn(7, dtype=D)]

    def step(st):
        x, v = st
        y = (x.sin() * x.pow(3)).sum() + (x.exp() * x.roll(1)).sum()
        g1, = torch.autograd.grad(y, x, create_graph=True)
        hv, = torch.autograd.grad(g1, x, grad_outputs=v, create_graph=True)
        g3, = torch.autograd.grad(hv.sum(), x)
        return [g1, hv, g3, _history([g1, hv, g3])]
    differential(build, step, captures=None)


def test_copy_into_a_buffer_records_history():
    """`buf.copy_(f(x))` (CopyBackwards, traced: graph/nodes.py Note [CopyBackwards is traced]),
    also into a float32 buffer (its grad cast back to float64): the create_graph grads carry
    eager's history, and the second-order grads through them are eager's, with no fallback."""
    def build():
        return [torch.randn(5, dtype=D, requires_grad=True)]

    def step(st):
        (x,) = st
        buf = torch.zeros(2, 5, dtype=D)
        buf.copy_(x.sin() * x)
        low = torch.zeros(5, dtype=torch.float32)
        low.copy_(x.exp())
        y = (buf.pow(2).sum() + (low.double() * x).sum())
        g1, = torch.autograd.grad(y, x, create_graph=True)
        g2, = torch.autograd.grad(g1.pow(2).sum(), x)
        return [g1, g2, _history([g1, g2])]
    st = differential(build, step, captures=None)
    assert not st.fallback_reasons, st.fallback_reasons


def test_grad_outputs_that_require_grad():
    """A vector-Jacobian product whose vector has history: differentiable in the vector too."""
    def build():
        return [torch.randn(3, 4, dtype=D, requires_grad=True),
                torch.randn(3, 4, dtype=D, requires_grad=True)]

    def step(st):
        x, v = st
        y = x.tanh() * x.sigmoid()
        vjp, = torch.autograd.grad(y, x, grad_outputs=v * 2, create_graph=True)
        gx, gv = torch.autograd.grad(vjp.pow(2).sum(), [x, v])
        return [vjp, gx, gv, _history([vjp])]
    differential(build, step, captures=None)


def _critic():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.LeakyReLU(0.2),
        torch.nn.Conv2d(4, 8, 3, stride=2, padding=1), torch.nn.LeakyReLU(0.2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 1)).to(D)


def test_wgan_gp_gradient_penalty():
    def step(critic):
        critic.zero_grad(set_to_none=True)
        real, fake = torch.randn(4, 1, 8, 8, dtype=D), torch.randn(4, 1, 8, 8, dtype=D)
        eps = torch.rand(4, 1, 1, 1, dtype=D)
        mix = (eps * real + (1 - eps) * fake).requires_grad_()
        d_mix = critic(mix)
        g, = torch.autograd.grad(d_mix.sum(), mix, create_graph=True)
        gp = (g.flatten(1).norm(dim=1) - 1).pow(2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        loss.backward()
        return [g, gp, [p.grad for p in critic.parameters()]]
    differential(_critic, step, captures=None)


def test_r1_penalty():
    def step(critic):
        critic.zero_grad(set_to_none=True)
        real = torch.randn(4, 1, 8, 8, dtype=D, requires_grad=True)
        d_real = critic(real)
        g, = torch.autograd.grad(d_real.sum(), real, create_graph=True)
        r1 = g.pow(2).sum(dim=(1, 2, 3)).mean()
        (F.softplus(-d_real).mean() + 5 * r1).backward()
        return [g, r1, [p.grad for p in critic.parameters()], real.grad]
    differential(_critic, step, captures=None)


def test_maml_inner_step():
    """One inner SGD step inside the graph (fast weights from grad(create_graph=True)), then
    the outer loss backpropagated through it into the initial weights."""
    def build():
        torch.manual_seed(3)
        return [torch.randn(4, 8, dtype=D, requires_grad=True),
                torch.randn(8, dtype=D, requires_grad=True),
                torch.randn(8, 1, dtype=D, requires_grad=True)]

    def step(params):
        for p in params:
            p.grad = None
        w1, b1, w2 = params
        xs, ys = torch.randn(10, 4, dtype=D), torch.randn(10, 1, dtype=D)
        xq, yq = torch.randn(10, 4, dtype=D), torch.randn(10, 1, dtype=D)

        def f(x, w1, b1, w2):
            return torch.relu(x @ w1 + b1) @ w2
        inner = F.mse_loss(f(xs, w1, b1, w2), ys)
        gs = torch.autograd.grad(inner, params, create_graph=True)
        fast = [p - 0.1 * g for p, g in zip(params, gs, strict=True)]
        F.mse_loss(f(xq, *fast), yq).backward()
        return [gs, [p.grad for p in params]]
    differential(build, step, captures=None)


def test_dropout_in_the_forward():
    def build():
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Dropout(0.3),
                                   torch.nn.Linear(16, 1)).to(D)

    def step(net):
        net.zero_grad(set_to_none=True)
        x = torch.randn(20, 3, dtype=D, requires_grad=True)
        g, = torch.autograd.grad(net(x).sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        return [g, [p.grad for p in net.parameters()]]
    differential(build, step, captures=None)


def test_functional_hvp_and_hessian():
    def f(x):
        t = x.tanh()        # (not prod(): its node runs as itself there, FALLBACK_CASES)
        return (x.pow(3) * x.flip(0)).sum() + t[0] * t[1] * t[2]

    def build():
        return [torch.randn(3, dtype=D, requires_grad=True), torch.randn(3, dtype=D)]

    def step(st):
        x, v = st
        _, hv = torch.autograd.functional.hvp(f, x, v, create_graph=True)
        h = torch.autograd.functional.hessian(f, x, create_graph=True)
        gx, = torch.autograd.grad(hv.sum() + h.sum(), x)
        return [hv, h, gx]
    differential(build, step, captures=None)


def test_retain_graph_false_with_create_graph_frees_as_eager():
    """create_graph=True with retain_graph=False: the first-order graph's saved tensors are
    freed, so a backward through the result that reaches them raises eager's error."""
    def build():
        return [torch.randn(4, dtype=D, requires_grad=True)]

    def step(st):
        (x,) = st
        g, = torch.autograd.grad(x.exp().sum(), x, create_graph=True, retain_graph=False)
        return [g, torch.autograd.grad(g.sum(), x)]
    # the second grad() raises eager's error (a fallback that is the error itself)
    st = differential(build, step, captures=None, fallbacks=3, allow_errors=True)
    assert st.captures >= 1, st


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class _CubeOnce(_Cube):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


@pytest.mark.parametrize("fn", [_Cube, _CubeOnce], ids=["differentiable", "once_differentiable"])
def test_custom_function_falls_back_named(fn):
    """User code inside the graph does not record history here: eager autograd runs that
    backward (its result, and eager's error for once_differentiable, are eager's), named."""
    def build():
        return [torch.randn(4, dtype=D, requires_grad=True)]

    def step(st):
        (x,) = st
        g, = torch.autograd.grad(fn.apply(x.sin()).sum(), x, create_graph=True)
        return [g, torch.autograd.grad(g.sum(), x)]
    st = differential(build, step, captures=None, fallbacks=None, allow_errors=True)
    assert any("create_graph=True" in r and fn.__name__ in r for r in st.fallback_reasons), \
        st.fallback_reasons


def test_interior_hook_falls_back_named():
    def build():
        return [torch.randn(4, dtype=D, requires_grad=True), []]

    def step(st):
        x, log = st
        y = x.exp()
        y.register_hook(lambda g: log.append(g.requires_grad) or g * 2)
        g, = torch.autograd.grad(y.sum(), x, create_graph=True)
        return [g, torch.autograd.grad(g.sum(), x), list(log)]
    st = differential(build, step, captures=None, fallbacks=None)
    assert any(r.startswith("create_graph=True: ") for r in st.fallback_reasons), \
        st.fallback_reasons


def test_engine_warning_only_for_backward_create_graph():
    """Eager's engine warns (once per process) for backward(create_graph=True), never for
    grad(create_graph=True); compiled_bw's run goes through the engine, which must not warn
    for grad().  A fresh process: the warning is once per process."""
    code = textwrap.dedent("""
        import warnings, torch, compiled_bw
        x = torch.randn(3, requires_grad=True)
        with warnings.catch_warnings(record=True) as ws, compiled_bw.enable(strict=True):
            warnings.simplefilter("always")
            torch.autograd.grad((x.tanh() * x).sum(), x, create_graph=True)
            n_grad = len(ws)
            (x.tanh() * x).sum().backward(create_graph=True)
        print(n_grad, sum("create_graph=True will create a reference cycle" in str(w.message)
                          for w in ws), x.grad.requires_grad, compiled_bw.stats().captures)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["0", "1", "True", "2"], out


GRADGRAD_OPS = {
    "tanh": (lambda x: x.tanh(), [(3, 4)]),
    "silu": (F.silu, [(3, 4)]),
    "softplus": (F.softplus, [(5,)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(3, 4)]),
    "layer_norm": (lambda x, w: F.layer_norm(x, (4,), w), [(3, 4), (4,)]),
    "matmul_pow": (lambda a, b: (a @ b).pow(3), [(3, 4), (4, 2)]),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1), [(2, 3, 5), (4, 3, 3)]),
    # eager raises "the derivative for '_cdist_backward' is not implemented" in gradgradcheck
    "cdist": (torch.cdist, [(3, 2), (4, 2)]),
}
EAGER_RAISES = {"cdist"}


@pytest.mark.parametrize("op", sorted(GRADGRAD_OPS))
def test_gradgradcheck_through_compiled_bw(op):
    """torch.autograd.gradcheck and gradgradcheck (numerical vs analytical first and second
    derivatives; the analytical ones from create_graph=True backwards) pass, and compiled_bw
    captured those backwards instead of falling back."""
    fn, shapes = GRADGRAD_OPS[op]

    def build():
        return [torch.randn(s, dtype=D, requires_grad=True) for s in shapes]

    def step(xs):
        return [torch.autograd.gradcheck(fn, xs), torch.autograd.gradgradcheck(fn, xs)]
    st = differential(build, step, steps=1, captures=None, fallbacks=None,
                      allow_errors=op in EAGER_RAISES)
    assert st.captures >= 2, st
    assert not [r for r in st.fallback_reasons if "create_graph" in r], st.fallback_reasons


def test_input_gradient_penalty_through_common_layers():
    """Double backprop through conv, batch norm (training), max pooling, gather, embedding,
    an LSTM and cross-entropy: their formulas' second derivatives, recorded as eager's."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.emb = torch.nn.Embedding(7, 4)
            self.lstm = torch.nn.LSTM(4, 5, batch_first=True)
            self.head = torch.nn.Linear(5 + 16, 3)

        def forward(self, img, ids):
            h = F.max_pool2d(self.bn(self.conv(img)).relu(), 2).flatten(1)
            seq, _ = self.lstm(self.emb(ids))
            h = torch.cat([seq[:, -1], h], 1)
            return self.head(h).gather(1, torch.tensor([[0], [2], [1]]).expand(3, 2))

    def build():
        torch.manual_seed(2)
        return Net().to(D)

    def step(net):
        net.zero_grad(set_to_none=True)
        img = torch.randn(3, 2, 4, 4, dtype=D, requires_grad=True)
        ids = torch.randint(0, 7, (3, 5))
        out = net(img, ids)
        loss = F.cross_entropy(out, torch.tensor([0, 1, 1]))
        g, = torch.autograd.grad(loss, img, create_graph=True)
        (loss + g.pow(2).sum()).backward()
        return [g, [p.grad for p in net.parameters()], net.bn.running_mean.clone()]
    differential(build, step, captures=None)


def _leaf_hook(x):
    x.register_hook(lambda g: g * 2)
    return x.exp().sum()


def _checkpointed(x):
    return torch.utils.checkpoint.checkpoint(lambda v: v.sin().exp(), x, use_reentrant=False).sum()


def _saved_tensors_hooks(x):
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
        return (x.sin() * x).sum()


def _compiled_forward(x):
    return torch.compile(lambda v: v.sin().exp(), backend="aot_eager")(x).sum()


def _prod(x):
    # eager's prod_backward divides by the input where no element is 0 (trace/dynamic.py Note
    # [Formulas of the plain-tensor branch]): which branch is data, so its node runs as itself
    return (x * x).prod()


FALLBACK_CASES = {"leaf_hook": (_leaf_hook, "a hook on a leaf"),
                  "prod": (_prod, "ProdBackward0"),
                  "checkpoint": (_checkpointed, "C++ walk gave this graph up"),
                  "saved_tensors_hooks": (_saved_tensors_hooks, "C++ walk gave this graph up"),
                  "torch_compile_forward": (_compiled_forward, "torch.compile backwards")}


@pytest.mark.parametrize("case", sorted(FALLBACK_CASES))
def test_what_cannot_record_history_falls_back_named(case):
    """docs/semantics.md (Higher-order grads): each thing a create_graph=True graph cannot hold yet runs
    eager autograd with its reason; the results, and the grads through them, are eager's."""
    fn, why = FALLBACK_CASES[case]

    def build():
        torch._dynamo.reset()
        return [torch.randn(4, dtype=D, requires_grad=True)]

    def step(st):
        (x,) = st
        x.grad = None
        fn(x).backward(create_graph=True)
        g = x.grad
        x.grad = None
        return [g, torch.autograd.grad(g.sum(), x)]
    # eager raises for the compiled forward's double backward (AOTAutograd's error)
    st = differential(build, step, captures=None, fallbacks=None,
                      allow_errors=case == "torch_compile_forward")
    assert any(r.startswith("create_graph=True") and why in r for r in st.fallback_reasons), \
        st.fallback_reasons


@pytest.mark.parametrize("case", ["det_identity", "det_random", "cumprod_overflow"])
def test_second_order_of_formulas_with_a_grad_mode_branch(case):
    """trace/dynamic.py GRAD_MODE_BRANCH: with grad mode on, linalg_det_backward takes
    linalg_solve on plain tensors (the SVD formula on fake ones: NaN second derivatives at
    matrices with repeated singular values, such as the identity) and cumprod_backward divides
    by the input where it has no zero (inf on overflow where the traced one was finite).  Those
    nodes run as themselves in create_graph=True graphs."""
    def build():
        if case == "det_identity":
            return [torch.eye(3, dtype=D, requires_grad=True)]
        if case == "det_random":
            return [torch.randn(3, 3, dtype=D, requires_grad=True)]
        return [torch.tensor([1e30, 1e30, 1e-30], requires_grad=True)]

    def step(st):
        (x,) = st
        x.grad = None
        y = (x * 1).det() if case.startswith("det") else (x * 1).cumprod(0).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        return [g, _history([g]), torch.autograd.grad((g * g).sum(), x)]
    differential(build, step, captures=None, fallbacks=None)
