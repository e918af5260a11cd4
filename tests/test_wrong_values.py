"""Values eager autograd defines precisely (issue 15, "wrong values"): undefined grads stay
undefined, `grad_dtype`, grads for inputs that need no grad.

Differential: each program returns its grads (None kept) and a log of what hooks and custom
backwards received (None kept, tensors cloned); eager and compiled_bw must agree on every step.
"""
import pytest
import torch
from differential import differential, grads
from torch import nn


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
