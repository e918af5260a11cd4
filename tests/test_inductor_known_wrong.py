"""Inductor lowerings known to give wrong grads stay out of our graphs (backends/inductor.py
Note [Inductor: known-wrong lowerings]): compiled_bw's grads equal eager's for them on the Inductor backend, and a second test
fails as soon as torch fixes the lowering (then the workaround can go)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from differential import differential

import compiled_bw
from compiled_bw import torchapi
from compiled_bw.backends import inductor
from compiled_bw.torchapi import checkpoint as torch_checkpoint

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

pytest.importorskip("torch._inductor.compile_fx")

POOLS = {
    "1d": (F.avg_pool1d, (2, 3, 8)),
    "2d": (F.avg_pool2d, (2, 3, 8, 9)),
    "3d": (F.avg_pool3d, (1, 2, 6, 7, 6)),
}


@pytest.mark.parametrize("padding", [0, 1])
@pytest.mark.parametrize("dims", list(POOLS))
def test_avg_pool_ceil_mode_include_pad_grads_on_inductor(dims, padding):
    pool, shape = POOLS[dims]

    def step(x):
        x.grad = None
        pool(x, 3, 2, padding, ceil_mode=True, count_include_pad=True).pow(2).sum().backward()
        return [x.grad]
    differential(lambda: torch.randn(*shape, requires_grad=True), step, steps=2,
                 backend="inductor")


def test_inductor_avg_pool_backward_still_wrong():
    """Fails once torch.compile of avg_pool2d_backward(ceil_mode, count_include_pad) is right:
    then remove it from backends/inductor.py KNOWN_WRONG (Note [Inductor: known-wrong lowerings])."""
    op = torch.ops.aten.avg_pool2d_backward.default
    assert op in inductor.KNOWN_WRONG
    x = torch.randn(2, 3, 8, 8)
    args = ([3, 3], [2, 2], [1, 1], True, True, None)
    g = torch.randn(2, 3, 5, 5)
    eager = op(g, x, *args)
    torch._dynamo.reset()
    compiled = torch.compile(lambda g, x: op(g, x, *args), backend="inductor")(g, x)
    assert not torch.allclose(compiled, eager, atol=1e-5), (
        "Inductor's avg_pool2d_backward with ceil_mode and count_include_pad is right now: "
        "remove it from compiled_bw/backends/inductor.py KNOWN_WRONG")


def test_sgn_grad_device_on_inductor(monkeypatch):
    """sgn's grad is `_efficientzerotensor(device=cpu)`: Inductor's C++ wrapper passed device
    index 0 (`cpu:0`); such graphs get the Python wrapper (Note [Inductor: device index])."""
    monkeypatch.setenv("COMPILED_BW_CPP_WRAPPER", "1")

    def step(st):
        x, w = st
        x.grad = w.grad = None
        gx, gw = torch.autograd.grad((x.sgn() * w).sum(), [x, w], retain_graph=True)
        (x.sgn() * w).sum().backward()
        return [str(gx.device), str(gw.device), torch._is_zerotensor(gx), gx, gw,
                str(x.grad.device), x.grad, w.grad]
    differential(lambda: (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)),
                 step, steps=2, backend="inductor", captures=2)


def test_max_pool3d_of_a_squeezed_channels_last_3d_input_on_inductor():
    """PyTorch's test_max_pool3d_ndhwc: Inductor asserted the meta kernel's (contiguous)
    strides on the CPU kernel's channels-last result and raised where eager succeeds
    (backends/inductor.py Note [Inductor: unbatched max_pool3d backward])."""
    def build():
        base = torch.randn(1, 6, 8, 7, 9).contiguous(memory_format=torch.channels_last_3d)
        return base.squeeze(0).detach().requires_grad_()

    def step(x):
        x.grad = None
        out, _ = F.max_pool3d(x, 3, 3, return_indices=True)
        out.pow(2).sum().backward()
        return [x.grad]
    differential(build, step, steps=3, backend="inductor")


@pytest.mark.parametrize("act", ["leaky_relu_", "rrelu_", "elu_", "celu_"])
def test_inplace_leaky_relu_with_a_negative_slope_raises(act):
    """Note [Inductor: errors eager's kernels raise]: an in-place leaky_relu_ (or an eval-mode
    rrelu_, or an elu_ / celu_) with a negative slope cannot be differentiated; eager's kernel raises "... call
    out-of-place version".  Inductor's decomposition of the backward raised nothing and returned
    a grad (found with PyTorch's test_nn.py, test_leaky_relu_inplace_with_neg_slope).  Inductor's
    code runs on the first backward here (background compile off); a positive slope beside it
    is still compiled."""
    def step(x):
        x.grad = None
        h = x * 2
        if act == "leaky_relu_":
            y = F.leaky_relu_(h.clone(), -2.0) + F.leaky_relu_(h.clone(), 0.5)
        elif act == "elu_":
            y = F.elu_(h.clone(), -2.0) + F.elu_(h.clone(), 0.5)
        elif act == "celu_":
            y = F.celu_(h.clone(), -2.0) + F.celu_(h.clone(), 0.5)
        else:
            y = F.rrelu_(h.clone(), -5.0, 1.0) + F.rrelu_(h.clone(), 0.1, 0.3)
        y.sum().backward()
        return [x.grad]
    differential(lambda: torch.randn(2, 3, requires_grad=True), step, steps=2,
                 backend="inductor", allow_errors=True, captures=None, fallbacks=None,
                 strict=False, options={"background_compile": False})


def test_refused_arguments_of_the_decompositions():
    """The decompositions Note [Inductor: errors eager's kernels raise] guards still return a
    grad where the aten kernel raises (traced with Inductor's table, run on real tensors):
    once torch's raise too, REFUSED can go."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx
    g, x = torch.ones(2), torch.tensor([-1.0, 1.0])
    for op, args in [(torch.ops.aten.leaky_relu_backward.default, (g, x, -2.0, True)),
                     (torch.ops.aten.rrelu_with_noise_backward.default,
                      (g, x, torch.ones(2), -5.0, 1.0, False, True)),
                     (torch.ops.aten.elu_backward.default, (g, -2.0, 1.0, 1.0, True, x))]:
        assert op in inductor.REFUSED and inductor.REFUSED[op](*args)
        with pytest.raises(RuntimeError, match="out-of-place"):
            op(*args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        def call(*ts, op=op, args=args):
            it = iter(ts)
            return op(*[next(it) if isinstance(a, torch.Tensor) else a for a in args])
        decomposed = make_fx(call, decomposition_table=select_decomp_table())(*tensors)
        decomposed(*tensors)   # raises once torch's decomposition checks it: then drop REFUSED


@pytest.mark.parametrize("case", ["mean", "sum_weighted", "none_ignore", "2d", "cross_entropy"])
def test_nll_loss_with_a_grad_that_is_not_finite(case):
    """Note [Inductor: grads eager leaves untouched]: eager's nll_loss backward writes only at
    each target that is not ignored; Inductor's decomposition multiplied a one-hot by the grad,
    NaN everywhere else for an inf or NaN grad (cross_entropy: NaN where eager has inf).  A
    class weight of 0, an ignored target and the 2-d (image) loss are covered; the steps'
    upstream grads are inf, NaN, -inf."""
    weight = torch.tensor([1.0, 0.0, 2.0])
    grads_in = [float("inf"), float("nan"), -float("inf")]

    def build():
        if case == "2d":
            return [torch.randn(2, 3, 2, 2, requires_grad=True), torch.randint(0, 3, (2, 2, 2))]
        return [torch.randn(4, 3, requires_grad=True), torch.tensor([1, 2, 0, 2])]

    def step(st):
        x, t = st
        x.grad = None
        k = step.k = (step.k + 1) % 3
        if case == "cross_entropy":
            y = F.cross_entropy(x * 1, t)
        elif case == "none_ignore":
            y = F.nll_loss((x * 1).log_softmax(1), t, reduction="none", ignore_index=2)
        else:
            y = F.nll_loss((x * 1).log_softmax(1), t, weight=weight if "weighted" in case else None,
                           reduction="sum" if "sum" in case else "mean")
        y.backward(torch.full_like(y, grads_in[k]))
        return [x.grad]
    step.k = -1
    differential(build, step, steps=3, backend="inductor")


class FloorDivision(torch.nn.Module):
    compiled_bw_traceable = True    # its recomputation is traced (checkpoint/recompute.py)

    def forward(self, u, v):
        return u * torch.div(u, v.detach(), rounding_mode="floor")


@pytest.mark.parametrize("case", ["smooth_l1_nan", "smooth_l1_beta_0", "soft_margin_overflow",
                                  "soft_margin_half",
                                  "remainder_inf", "floor_divide_recomputed", "logit_negative_eps"])
def test_kernels_whose_inf_or_nan_inductors_code_did_not_give(case):
    """Notes [Inductor: eager's kernel for its inf and NaN] and [Inductor: known-wrong
    lowerings]: eager's kernels give NaN where
    Inductor's decompositions or lowerings gave a finite value or another non-finite one:
    smooth_l1_loss where input - target is NaN (0 decomposed) or, for beta == 0, 0 (eager: -grad);
    soft_margin_loss where
    exp(-target * input) overflows -- an infinite input, but also a finite margin past ~88 in
    float32 or ~11 in float16 (-target * grad / n decomposed); the grad of remainder's divisor
    where an operand is infinite (eager's floor division gives NaN and -1 where Inductor's gave
    inf and -0.0), a float floor division recomputed in a checkpointed region; and logit with a
    negative eps, which eager's kernel takes as no eps (NaN outside [0, 1]) where the
    decomposition clamped to [eps, 1 - eps] (found by a survey of the decompositions' arguments)."""
    inf, nan = float("inf"), float("nan")
    dtype = torch.float16 if case == "soft_margin_half" else torch.float32

    def build():
        return [torch.tensor([inf, nan, 1.0, 2.0, -100.0, 100.0, -12.0, 3.0], dtype=dtype,
                             requires_grad=True),
                torch.tensor([inf, 0.0, nan, 2.5, 3.0, -inf, -12.0, inf], dtype=dtype,
                             requires_grad=True)]

    def step(st):
        a, b = st
        a.grad = b.grad = None
        if case == "smooth_l1_nan":
            y = F.smooth_l1_loss(a * 1, b * 1)
        elif case == "smooth_l1_beta_0":     # F.smooth_l1_loss calls l1_loss for beta == 0
            y = torch.ops.aten.smooth_l1_loss(a * 1, b * 1, 1, 0.0)
        elif case.startswith("soft_margin"):
            y = F.soft_margin_loss(a * 1, torch.tensor([-1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0],
                                                       dtype=dtype))
        elif case == "logit_negative_eps":   # eager: NaN outside [0, 1], as without eps
            y = torch.logit(a.sigmoid() * 1.2 - 0.1, eps=-0.1) + torch.logit(b.sigmoid(), eps=0.2)
        elif case == "remainder_inf":
            y = torch.remainder(a * 1, b * 1)
        else:
            from torch.utils.checkpoint import checkpoint
            y = checkpoint(FloorDivision(), a * 1, b * 1, use_reentrant=False)
        y.backward(torch.ones_like(y))
        return [a.grad, b.grad]
    differential(build, step, steps=3, backend="inductor")
    if case == "floor_divide_recomputed" and \
            torch_checkpoint.RECOMPUTE_FEATURE not in torchapi.features_off():
        # the region's recomputation is in the graph (where this release allows tracing it:
        # not on torch 2.11, whose checkpoint's recompute_fn does not close over its kwargs)
        assert "carry hooks" not in compiled_bw.explain(), compiled_bw.explain()
