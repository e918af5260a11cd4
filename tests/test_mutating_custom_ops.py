"""Custom ops that mutate their input (torch.library, `Tensor(a!)`), wherever a backward runs
them: recomputed by selective checkpointing inside a `torch.compile`d forward (issue #36 item 0),
in plain checkpoint regions (compiled and eager), in an AOT backward, in a custom Function's
backward.  Four kinds of op: returning nothing, a fresh tensor, the mutated input itself (as
PyTorch's own `trace_auto_functionalized` test does, Meta kernel too), and the input itself
only in the real kernel.  Each is differential (grads and the op's side effect on what it
mutates) on both backends, for both auto_functionalized versions where AOTAutograd
functionalizes it.  The last test fails once torch's Inductor gets the aliasing op right
(backends/fresh_returns.py Note [Inductor: mutating ops that return their input])."""
from __future__ import annotations

import contextlib

import pytest
import torch
from differential import differential
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

pytestmark = pytest.mark.slow   # Inductor compiles of torch.compile'd forwards

_LIB = torch.library.Library("cbwtest_mut", "FRAGMENT")
KINDS = ("none", "fresh", "alias", "alias_real")


def _define(kind: str) -> None:
    ret = "()" if kind == "none" else "Tensor"
    for name in (kind, kind + "_wrap"):
        _LIB.define(f"{name}(Tensor(a!) x) -> {ret}", tags=torch.Tag.pt2_compliant_tag)

    def real(x):
        x.add_(5)
        if kind == "fresh":
            return x * 2
        return None if kind == "none" else x

    def meta(x):
        if kind == "none":
            return None
        return x if kind == "alias" else torch.empty_like(x)

    _LIB.impl(kind, real, "CPU")
    _LIB.impl(kind, real, "CUDA")
    _LIB.impl(kind, meta, "Meta")
    op = getattr(torch.ops.cbwtest_mut, kind)
    _LIB.impl(kind + "_wrap", op, "CompositeImplicitAutograd")


for _k in KINDS:
    _define(_k)


def _mutate(kind: str, y: torch.Tensor):
    """The op through its CompositeImplicitAutograd wrapper; its return where it has one."""
    return getattr(torch.ops.cbwtest_mut, kind + "_wrap")(y)


def _region(kind: str, use_return: bool):
    def g(x):
        y = torch.matmul(x, x)
        r = _mutate(kind, y)
        out = torch.matmul(y, y)
        return out + r.sin() if use_return and r is not None else out
    return g


def _sac(ops):
    def policy(ctx, func, *args, **kwargs):
        return CheckpointPolicy.MUST_RECOMPUTE if func in ops else CheckpointPolicy.PREFER_RECOMPUTE
    return lambda: create_selective_checkpoint_contexts(policy)


AUTO_FUNCTIONALIZED = (torch.ops.higher_order.auto_functionalized,
                       torch.ops.higher_order.auto_functionalized_v2)


@contextlib.contextmanager
def _functionalization(version: int):
    import torch._inductor.config as inductor_config
    with inductor_config.patch(enable_auto_functionalized_v2=(version == 2)):
        torch._dynamo.reset()
        yield
    torch._dynamo.reset()


# An op with no autograd kernel called on a tensor that requires grad gets the autograd
# fallback's warning hook, a C++ tensor hook compiled_bw cannot run: that backward runs eager
# autograd, named (only where the op's output is part of the graph: eager contexts).
NO_AUTOGRAD_KERNEL = "a C++ tensor hook on"


def _check(fn, backend, shape=(4, 4), fallback=None):
    """Differential; with `fallback`, a backward may instead run eager autograd for that
    named reason (and for no other)."""
    def build():
        return [torch.randn(*shape, requires_grad=True)]

    def step(st):
        (x,) = st
        x.grad = None
        fn(x).sum().backward()
        return [x.grad]
    if fallback is None:
        differential(build, step, steps=3, backend=backend)
        return
    st = differential(build, step, steps=3, backend=backend, fallbacks=None, captures=None)
    assert all(fallback in r for r in st.fallback_reasons), st.fallback_reasons


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("use_return", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_sac_recomputes_mutating_op_in_compiled_forward(kind, use_return, version):
    """Issue #36 item 0: SAC marks auto_functionalized MUST_RECOMPUTE, everything else
    PREFER_RECOMPUTE; the forward is torch.compile(backend="aot_eager", fullgraph=True); the
    AOT backward recomputes the mutating op.  Inductor gave x.grad all zeros for `alias`."""
    if kind == "none" and use_return:
        pytest.skip("returns nothing")
    g = _region(kind, use_return)
    ctx = _sac(AUTO_FUNCTIONALIZED)
    with _functionalization(version):
        cg = torch.compile(lambda x: checkpoint(g, x, use_reentrant=False, context_fn=ctx),
                           backend="aot_eager", fullgraph=True)
        _check(cg, "inductor")


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("kind", ["none", "alias", "alias_real"])
def test_checkpoint_in_compiled_forward(kind, backend):
    """Plain non-reentrant checkpoint inside a compiled forward (its region is tagged for
    recomputation; the partitioner decides)."""
    g = _region(kind, True)
    with _functionalization(2):
        cg = torch.compile(lambda x: checkpoint(g, x, use_reentrant=False),
                           backend="aot_eager", fullgraph=True)
        _check(cg, backend)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("kind", ["none", "alias", "alias_real"])
def test_eager_checkpoint_recomputes_mutating_op(kind, backend):
    """Eager (uncompiled) non-reentrant checkpoint, selective (the op MUST_RECOMPUTE) and
    plain: the recomputation runs the mutating op again in the backward."""
    g = _region(kind, True)
    op = getattr(torch.ops.cbwtest_mut, kind).default
    why = NO_AUTOGRAD_KERNEL if kind != "none" else None
    _check(lambda x: checkpoint(g, x, use_reentrant=False, context_fn=_sac((op,))), backend,
           fallback=why)
    _check(lambda x: checkpoint(g, x, use_reentrant=False), backend, fallback=why)


def _mutating_backward(kind: str):
    """A custom Function whose backward mutates a buffer with the op and returns from it."""
    op = getattr(torch.ops.cbwtest_mut, kind + "_wrap")

    class MutatingBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            buf = g * x
            r = op(buf)
            out = buf * 2
            return out + r if r is not None else out
    return MutatingBackward


MUTATING_BACKWARD = {k: _mutating_backward(k) for k in KINDS}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("kind", ["none", "alias", "alias_real"])
def test_mutating_op_in_custom_backward(kind, backend, compiled):
    """In a custom Function's backward, eager (an opaque call) or torch.compile'd (then the
    op is in the AOT backward compiled_bw splices)."""
    f = MUTATING_BACKWARD[kind]

    def fn(x):
        return f.apply(x.sin()).cos()
    # traced into our graph, the op is called as it is (not auto_functionalized): on Inductor
    # it becomes its functional twin (Note [Inductor: mutating ops called directly]; before,
    # our functionalizing retrace refused it and the graph ran on the eager backend)
    with _functionalization(2):
        _check(torch.compile(fn, backend="aot_eager", fullgraph=True) if compiled else fn,
               backend)


def test_inductor_still_wrong_for_ops_returning_their_input():
    """Fails once torch.compile(backend="inductor") of the item-0 program gives eager's grad:
    then backends/fresh_returns.py can go (Note [Inductor: mutating ops that return their
    input])."""
    g = _region("alias", False)
    ctx = _sac(AUTO_FUNCTIONALIZED)

    def grad(fn):
        torch.manual_seed(0)
        x = torch.randn(4, 4, requires_grad=True)
        fn(x).sum().backward()
        return x.grad

    # With CI set in the environment, torch refuses custom ops whose output aliases an input
    # (functorch config error_on_custom_op_aliasing defaults to bool(os.getenv("CI"))); users
    # get a deprecation warning instead, and this test measures what users get.
    import torch._functorch.config as functorch_config
    with _functionalization(1), functorch_config.patch(error_on_custom_op_aliasing=False):
        eager = grad(lambda x: checkpoint(g, x, use_reentrant=False, context_fn=ctx))
        inductor = grad(torch.compile(
            lambda x: checkpoint(g, x, use_reentrant=False, context_fn=ctx),
            backend="inductor", fullgraph=True))
    assert not torch.allclose(inductor, eager, atol=1e-3), (
        "torch.compile(backend='inductor') gets a mutating op that returns its input right now: "
        "remove compiled_bw/backends/fresh_returns.py (and its test expectations)")
