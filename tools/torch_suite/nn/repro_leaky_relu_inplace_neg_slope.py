"""test_nn.py TestNNDeviceTypeCPU::test_leaky_relu_inplace_with_neg_slope_cpu fails under
compiled_bw.enable(backend="inductor") ("AssertionError: RuntimeError not raised"); passes under eager
and under compiled_bw's eager backend.

Eager: leaky_relu_ (in place, so the backward sees the result, self_is_result=True) with a negative
slope cannot be differentiated; LeakyReluBackward0 raises "In-place leakyReLu backward calculation is
triggered with a negative slope which is not supported. ... call out-of-place version" (a TORCH_CHECK
inside the aten leaky_relu_backward kernel).  Same for rrelu_ with lower < 0 (second case).

Needs COMPILED_BW_BACKGROUND_COMPILE=0 (as run_suite.sh inductor sets): with background compile on,
the first backward runs the captured graph without Inductor, which still raises.

Run: COMPILED_BW_BACKGROUND_COMPILE=0 PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_nn /tmp/v2.15.0/bin/python \
     repro_leaky_relu_inplace_neg_slope.py [inductor|eager]
"""
import sys

import torch

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "inductor"


def case_leaky():
    a = torch.tensor([-1., 1.], requires_grad=True)
    b = torch.nn.functional.leaky_relu_(a.clone(), -2)
    b.backward(torch.ones(2))
    return a.grad


def case_rrelu():
    a = torch.tensor([-1., 1.], requires_grad=True)
    b = torch.nn.functional.rrelu_(a.clone(), -5.0, 1.0)
    b.backward(torch.ones(2))
    return a.grad


def outcome(fn, compiled):
    try:
        if compiled:
            with compiled_bw.enable(backend=BACKEND):
                g = fn()
        else:
            g = fn()
        return f"no error, grad={g.tolist()}"
    except RuntimeError as e:
        return "RuntimeError: " + ("call out-of-place version" if "out-of-place" in str(e) else str(e)[:80])


same = True
for fn in (case_leaky, case_rrelu):
    e, c = outcome(fn, False), outcome(fn, True)
    same &= e == c
    print(f"{fn.__name__}: eager: {e} | compiled_bw({BACKEND}): {c}")
print(f"torch={torch.__version__}", compiled_bw.stats().captures, "captures,", compiled_bw.stats().fallbacks, "fallbacks")
print("SAME" if same else "DIFFERENT")
