"""torch.library custom ops with register_autograd: their backward (required by torch to be
made of PyTorch ops and custom ops, with no global state) is traced into the graph; the
custom ops it calls stay op calls of the graph.  Differential tests on both backends: values
and grads, ctx attributes that change between steps (a recapture, never a stale constant),
non-tensor inputs, several outputs, mark_non_differentiable, set_materialize_grads(False),
once_differentiable, a ctx attribute that is not a plain value (then an opaque call), and
the graph (no opaque call, the backward's ops inline)."""

import pytest
import torch
from differential import differential, grads
from functions import scaled_sin

import compiled_bw

pytestmark = pytest.mark.both_backends




@torch.library.custom_op("cbw_test::cube_kernel", mutates_args=())
def cube_kernel(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@cube_kernel.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("cbw_test::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@cube.register_fake
def _(x):
    return torch.empty_like(x)


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * 3 * cube_kernel(x) / x     # another custom op: called by the graph


cube.register_autograd(_cube_backward, setup_context=_cube_setup)


@torch.library.custom_op("cbw_test::split_idx", mutates_args=())
def split_idx(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return x.exp(), x.argmax().reshape(1), x * 2


@split_idx.register_fake
def _(x):
    return torch.empty_like(x), x.new_empty(1, dtype=torch.long), torch.empty_like(x)


def _split_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(output[0])


def _split_backward(ctx, g_exp, g_idx, g_two):
    (e,) = ctx.saved_tensors
    out = torch.zeros_like(e)
    if g_exp is not None:
        out = out + g_exp * e
    if g_two is not None:
        out = out + g_two * 2
    return out


split_idx.register_autograd(_split_backward, setup_context=_split_setup)


def _leaves(*shapes):
    def build():
        return [torch.randn(*s, requires_grad=True) for s in shapes]
    return build


def test_backward_is_traced_into_the_graph():
    def step(ps):
        (x,) = ps
        x.grad = None
        scaled_sin(x * 2, 1.5).sum().backward()
        return grads(ps)
    differential(_leaves((5,)), step)
    code = compiled_bw.last_graph().code
    assert "compiled_bw.opaque" not in code and "aten.cos" in code, code


def test_ctx_attribute_change_recaptures_never_stale():
    alphas = iter([1.5, -2.0, 1.5, 0.5] * 2)

    def step(ps):
        (x,) = ps
        x.grad = None
        scaled_sin(x, next(alphas)).sum().backward()
        return grads(ps)
    st = differential(_leaves((4,)), step, steps=4, captures=3)
    assert st.cache_hits == 1


def test_custom_op_called_by_the_backward_stays_an_op():
    def step(ps):
        (x,) = ps
        x.grad = None
        cube(x.exp()).sum().backward()
        return grads(ps)
    # a background compile worker does not know ops defined by the user's modules (docs/semantics.md)
    differential(_leaves((3, 2)), step, options={"background_compile": False})
    code = compiled_bw.last_graph().code
    assert "compiled_bw.opaque" not in code and "cbw_test.cube_kernel" in code, code


def test_several_outputs_non_differentiable_no_materialize():
    def step(ps):
        (x,) = ps
        x.grad = None
        e, idx, _two = split_idx(x)
        (e * idx).sum().backward()          # `two` unused: None reaches the backward
        return grads(ps)
    differential(_leaves((5,)), step)
    assert "compiled_bw.opaque" not in compiled_bw.last_graph().code


@torch.library.custom_op("cbw_test::once", mutates_args=())
def once(x: torch.Tensor) -> torch.Tensor:
    return x.square()


@once.register_fake
def _(x):
    return torch.empty_like(x)


def _once_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


@torch.autograd.function.once_differentiable
def _once_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return 2 * x * g


once.register_autograd(_once_backward, setup_context=_once_setup)


def test_once_differentiable_backward_used_several_times():
    def step(ps):
        x, w = ps
        x.grad = w.grad = None
        (once(x) + once(x * w) + once(once(w))).sum().backward()
        return grads(ps)
    differential(_leaves((4,), (4,)), step)
    assert "compiled_bw.opaque" not in compiled_bw.last_graph().code


class _Box:
    """Not a plain value: what it holds could change without the cache key seeing it."""

    def __init__(self, v: float) -> None:
        self.v = v


@torch.library.custom_op("cbw_test::boxed_scale", mutates_args=())
def boxed_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


@boxed_scale.register_fake
def _(x, alpha):
    return torch.empty_like(x)


_SHARED = _Box(1.0)


def _boxed_setup(ctx, inputs, output):
    _SHARED.v = inputs[1]
    ctx.box = _SHARED          # the same object every step, its value changing


def _boxed_backward(ctx, g):
    return g * ctx.box.v, None


boxed_scale.register_autograd(_boxed_backward, setup_context=_boxed_setup)


def test_ctx_attribute_not_a_plain_value_runs_opaque():
    alphas = iter([2.0, 3.0, -1.0] * 2)

    def step(ps):
        (x,) = ps
        x.grad = None
        boxed_scale(x.sin(), next(alphas)).sum().backward()
        return grads(ps)
    differential(_leaves((3,)), step)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code
