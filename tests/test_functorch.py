"""functorch transforms (torch.func) around code that calls backward()/autograd.grad:
under them compiled_bw runs eager autograd (runtime/run.py _precheck) before anything
observable happens, so results, hook calls and errors are eager's.  Differential, per pattern;
`fallbacks` counts only the backward calls made inside a transform."""
import pytest
import torch
from differential import differential, grads
from functions import Double

import compiled_bw


def _x():
    return [torch.randn(3, requires_grad=True), []]


def test_backward_inside_func_grad_raises_as_eager():
    def step(st):
        x, _ = st

        def f(v):
            y = (v * x).sum()
            y.backward()        # eager: "backward() called inside a functorch transform"
            return y
        return torch.func.grad(f)(torch.randn(3))
    # torch.autograd.backward raises before the engine (compiled_bw's interception point)
    differential(_x, step, captures=0, fallbacks=0, allow_errors=True)


def test_autograd_grad_inside_vmap():
    def step(st):
        x, log = st

        y = Double.apply(x.sin()) * 2
        y.register_hook(lambda g: log.append("hook") or g * 3)

        def f(v):      # vmap over grad_outputs: the batched vjp (jacobian rows) pattern
            return torch.autograd.grad(y, x, v, retain_graph=True)[0]
        return torch.func.vmap(f)(torch.eye(3)), list(log)
    differential(_x, step, captures=0, fallbacks=3, strict=False)


class _Exp(torch.autograd.Function):
    """A custom Function usable under torch.func (setup_context, a generated vmap rule)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "vmap-grad"])
def test_autograd_grad_inside_a_transform(transform):
    """A function that itself calls torch.autograd.grad with create_graph (an inner gradient,
    as in meta-learning) under torch.func transforms."""
    def step(st):
        x, _ = st

        def inner(v):
            y = _Exp.apply(v).sin() * 3
            (g,) = torch.autograd.grad(y.sum(), v, create_graph=True)
            return (g * v).sum()
        v = x.detach() + 1
        if transform == "grad":
            return torch.func.grad(inner)(v)
        if transform == "vjp":
            out, fn = torch.func.vjp(inner, v)
            return out, fn(torch.ones_like(out))
        if transform == "jacrev":
            return torch.func.jacrev(inner)(v)
        return torch.func.vmap(torch.func.grad(inner))(torch.stack([v, v * 2]))
    st = differential(_x, step, captures=0, fallbacks=None, strict=False)
    # (vjp's vjp_fn runs its autograd.grad(create_graph=True) after the transform exited)
    # (vjp: the custom Function whose forward ran inside the transform, which custom.py did
    # not record)
    assert st.fallbacks >= 3 and all("functorch" in r or "create_graph" in r
                                     or "before compiled_bw was imported" in r
                                     for r in st.fallback_reasons), st.fallback_reasons


@pytest.mark.parametrize("batched", [False, True])
def test_gradcheck_batched_grad(batched):
    def build():
        return [torch.randn(3, dtype=torch.float64, requires_grad=True)]

    def step(st):
        (x,) = st
        return torch.autograd.gradcheck(lambda v: Double.apply(v.sin()) * v, (x,),
                                        check_batched_grad=batched)
    # gradcheck's own backward calls: the batched ones run eager (a transform is active)
    st = differential(build, step, captures=None, fallbacks=None, strict=False)
    assert not batched or st.fallbacks > 0


def test_functional_call_then_backward_compiles():
    """torch.func.functional_call is not a transform: its backward compiles, grads reach the
    tensors passed in (not the module's own parameters)."""
    def build():
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        params = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
        return [m, params, torch.randn(2, 3)]

    def step(st):
        m, params, x = st
        for p in params.values():
            p.grad = None
        torch.func.functional_call(m, params, (x,)).pow(2).sum().backward()
        return grads(list(params.values())), grads(m)
    differential(build, step)


def test_functional_call_inside_func_grad():
    def build():
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        return [m, torch.randn(2, 3)]

    def step(st):
        m, x = st
        params = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p):
            out = torch.func.functional_call(m, p, (x,)).pow(2).sum()
            return out
        g = torch.func.grad(loss)(params)
        # and a real backward after the transform returned: compiled
        m.zero_grad(set_to_none=True)
        m(x).pow(2).sum().backward()
        return g, grads(m)
    # torch.func.grad's own autograd.grad call (inside the transform) runs eager
    st = differential(build, step, fallbacks=3, strict=False)
    assert all("functorch" in r for r in st.fallback_reasons)


def test_transform_exit_restores_compiled_path():
    compiled_bw.reset()
    x = torch.randn(3, requires_grad=True)
    with compiled_bw.enable(backend="eager"):
        y = x.sin()
        torch.func.vmap(lambda v: torch.autograd.grad(y, x, v, retain_graph=True)[0])(torch.eye(3))
        (x * 2).sum().backward()
    st = compiled_bw.stats()
    assert st.fallbacks == 1 and "functorch" in st.fallback_reasons[0]
    assert st.captures == 1


@pytest.mark.parametrize("has_aux", [False, True])
def test_vjp_fn_called_after_the_transform(has_aux):
    """torch.func.vjp's vjp_fn, called after vjp returned, runs grad() on the finished
    transform's wrapped tensors (functorch's GradTrackingTensor of an exited level): eager
    autograd gives the vjp (it raised AttributeError in get_gradient_edge under compiled_bw:
    test_aotdispatch.py's test_make_fx_vjp), with retain_graph so it is called twice; a plain
    backward in the same step still compiles."""
    def build():
        return [torch.nn.Linear(3, 3), torch.randn(4, 3)]

    def step(st):
        lin, x = st
        lin.zero_grad(set_to_none=True)

        def f(v):
            y = lin(v).tanh()
            return (y, y.sum()) if has_aux else y
        out = torch.func.vjp(f, x, has_aux=has_aux)
        vjp_fn = out[1]
        cot = torch.randn(4, 3)
        g1 = vjp_fn(cot)
        g2 = vjp_fn(cot * 2)
        lin(x).pow(2).sum().backward()
        return [g1, g2, grads(lin)]
    st = differential(build, step, fallbacks=6, strict=False)
    assert all("functorch" in r for r in st.fallback_reasons), st.fallback_reasons


def _zero_tangent_mm():
    """torch.func.jvp through Linear-Tanh-Linear (PyTorch's Lennard-Jones jacfwd example): the
    weights, captured from outside the jvp, get ZeroTensor tangents, which MmBackward0 saves."""
    def build():
        return [torch.randn(16, 1, requires_grad=True), torch.randn(1, 16, requires_grad=True)]

    def step(st):
        w1, w2 = st
        x, t = torch.randn(1), torch.ones(1)
        _, d = torch.func.jvp(lambda x: torch.nn.functional.linear(
            torch.tanh(torch.nn.functional.linear(x, w1)), w2), (x,), (t,))
        return list(torch.autograd.grad((d ** 2).sum(), [w1, w2]))
    return build, step


def _zero_grad_saved():
    """No functorch: sgn's create_graph grad is a ZeroTensor, which `g * w` saves."""
    def build():
        return [torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)]

    def step(st):
        x, w = st
        (g,) = torch.autograd.grad((torch.sgn(x) * 3).sum(), x, create_graph=True)
        assert g._is_zerotensor()
        return list(torch.autograd.grad(((g * w).tanh() + w.sin()).sum(), w))
    return build, step


@pytest.mark.both_backends
@pytest.mark.parametrize("program", [_zero_tangent_mm, _zero_grad_saved],
                         ids=["jvp_tangent", "create_graph_grad"])
def test_a_saved_zero_tensor_runs_eager_autograd(program):
    """walk.py Note [ZeroTensors]: a saved efficient ZeroTensor (no storage) made Inductor's
    code fail on a null pointer (a RuntimeError from its C++ wrapper, or a segfault) where eager
    short-circuits it; that backward now runs eager autograd, with the reason (found with
    PyTorch's test_eager_transforms.py, test_lennard_jones_batched_jac_jac_jacfwd)."""
    build, step = program()
    st = differential(build, step, steps=2, captures=None, fallbacks=None, strict=False)
    assert any("ZeroTensor" in r for r in st.fallback_reasons), st.fallback_reasons
