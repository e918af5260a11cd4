"""test_nn.py TestNN::test_LayerNorm_3d_no_affine_large_feature: passes under eager and under
compiled_bw.enable(backend="eager"), fails under compiled_bw.enable(backend="inductor") with
GradcheckError "For output 0 and input 0: gradcheck or gradgradcheck failed while testing batched
gradient computation".

What the test runs (common_nn NewModuleTest._check_gradients): torch.set_num_threads(1);
gradcheck(module, (x,), fast_mode=True, check_batched_grad=True) with
nn.LayerNorm([56, 56, 56], eps=1e-5, elementwise_affine=False), x float32 (4, 56, 56, 56).
gradcheck's batched-grad check computes the same vector-Jacobian products twice: once under legacy
vmap (compiled_bw falls back to eager autograd there: "legacy vmap ... is active") and once per row
in a loop (compiled_bw captures that backward and runs it through Inductor), then compares them with
torch.allclose(rtol=1e-5, atol=1e-8).  This script does the same comparison directly.

Needs COMPILED_BW_BACKGROUND_COMPILE=0 (as run_suite.sh inductor sets; with background compile the
first backward does not run Inductor code).

Run: COMPILED_BW_BACKGROUND_COMPILE=0 PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_nn /tmp/v2.15.0/bin/python \
     repro_layernorm_batched_gradcheck.py [inductor|eager]
"""
import sys

import torch
import torch.nn as nn

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "inductor"
torch.set_num_threads(1)
torch.manual_seed(0)
m = nn.LayerNorm([56, 56, 56], 1e-5, False)
x = torch.randn(4, 56, 56, 56, requires_grad=True)
out = m(x)
vs = [torch.randn_like(out) for _ in range(2)]


def vjps(compiled):
    res = []
    for v in vs:
        if compiled:
            with compiled_bw.enable(backend=BACKEND, cache_size_limit=100000):
                (g,) = torch.autograd.grad(out, x, v, retain_graph=True)
        else:
            (g,) = torch.autograd.grad(out, x, v, retain_graph=True)
        res.append(g)
    return res


eager = vjps(False)
comp = vjps(True)
print(f"torch={torch.__version__} backend={BACKEND} stats={compiled_bw.stats().captures} captures")
for i, (a, b) in enumerate(zip(eager, comp, strict=False)):
    print(f"vjp {i}: bitwise equal {torch.equal(a, b)}, max|diff| {(a - b).abs().max().item():.3e}, "
          f"allclose(1e-5, 1e-8) {torch.allclose(a, b, rtol=1e-5, atol=1e-8)}")
same = all(torch.equal(a, b) for a, b in zip(eager, comp, strict=False))

# The test itself: gradcheck's batched-grad comparison.
def run_gradcheck(compiled):
    xx = x.detach().clone().requires_grad_()
    try:
        if compiled:
            with compiled_bw.enable(backend=BACKEND, cache_size_limit=100000):
                torch.autograd.gradcheck(m, (xx,), fast_mode=True, check_batched_grad=True,
                                         raise_exception=True, eps=1e-3, atol=1e-2, rtol=1e-2)
        else:
            torch.autograd.gradcheck(m, (xx,), fast_mode=True, check_batched_grad=True,
                                     raise_exception=True, eps=1e-3, atol=1e-2, rtol=1e-2)
        return "gradcheck passed"
    except Exception as e:  # noqa: BLE001 -- the outcome is what is compared
        return f"{type(e).__name__}: {str(e).splitlines()[1] if len(str(e).splitlines()) > 1 else str(e)[:100]}"


print("eager     :", run_gradcheck(False))
print("compiled_bw:", run_gradcheck(True))
print("SAME" if same else "DIFFERENT")
