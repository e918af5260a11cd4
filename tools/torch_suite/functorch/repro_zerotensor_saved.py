"""compiled_bw (Inductor backend) vs eager autograd: a saved tensor that is an efficient ZeroTensor.

Found through test_eager_transforms.py TestExamplesCorrectnessCPU::test_lennard_jones_batched_jac_jac_jacfwd_cpu
(passes under eager autograd and under compiled_bw's eager backend; fails under
enable(backend="inductor"), COMPILED_BW_BACKGROUND_COMPILE=0, with "RuntimeError:
aoti_torch_cpu_mm_out(...reinterpret_tensor_wrapper(arg12_1, ...)) API call failed").
Cause: the backward graph's input is a saved tensor that is a ZeroTensor
(`torch._efficientzerotensor`: no storage, data_ptr null; eager's ops short-circuit it through
the ZeroTensor dispatch key).  functorch's jvp makes one the tangent of every tensor captured
from outside (here the model weights), and mm's forward-AD formula saves it for the backward;
plain autograd makes one as sgn's grad (create_graph=True), which a later op saves.
compiled_bw passes the saved tensor to the compiled graph as a dense input: Inductor's C++
wrapper fails reinterpreting it for an extern mm (RuntimeError), and a generated C++ kernel
reading it dereferences the null pointer (the process dies with SIGSEGV, C++ or Python wrapper).
The eager backend runs aten ops on it and matches eager.

Each case runs in a child process (a segfault is reported, not fatal here):
  eager autograd, enable(backend="eager"), enable(backend="inductor"), and inductor with
  COMPILED_BW_CPP_WRAPPER=0.
Usage: python repro_zerotensor_saved.py [case ...]   cases: sgn_create_graph, jvp_mul, jvp_mm
"""
import os
import subprocess
import sys

CASES = ("sgn_create_graph", "jvp_mul", "jvp_mm")


def case_sgn_create_graph():
    # no functorch: sgn's backward returns a ZeroTensor; with create_graph it is saved by g * w
    import torch
    x = torch.randn(5, requires_grad=True)
    w = torch.randn(5, requires_grad=True)
    (g,) = torch.autograd.grad((torch.sgn(x) * 3).sum(), x, create_graph=True)
    assert g._is_zerotensor()
    loss = ((g * w).tanh() + w.sin()).sum()
    return torch.autograd.grad(loss, w)


def case_jvp_mul():
    # functorch jvp: the tangent of the captured w is a ZeroTensor, saved by MulBackward0
    import torch
    from torch.func import jvp
    w = torch.randn(5, requires_grad=True)
    x, t = torch.randn(5), torch.ones(5)
    _, d = jvp(lambda x: (x * w) * w, (x,), (t,))
    return torch.autograd.grad((d ** 2).sum(), w)


def case_jvp_mm():
    # the Lennard-Jones test's pattern: jacfwd/jvp through Linear-Tanh-Linear, grad of the
    # tangent w.r.t. the weights; MmBackward0 saves the weight's ZeroTensor tangent as mat2
    import torch
    import torch.nn.functional as F
    from torch.func import jvp
    w1 = torch.randn(16, 1, requires_grad=True)
    w2 = torch.randn(1, 16, requires_grad=True)
    x, t = torch.tensor([0.7]), torch.ones(1)
    _, d = jvp(lambda x: F.linear(torch.tanh(F.linear(x, w1)), w2), (x,), (t,))
    return torch.autograd.grad((d ** 2).sum(), [w1, w2])


def child(case, mode):
    os.environ.setdefault("COMPILED_BW_BACKGROUND_COMPILE", "0")
    import torch

    import compiled_bw
    torch.manual_seed(0)
    fn = globals()["case_" + case]
    try:
        if mode == "eager":
            out = fn()
        else:
            with compiled_bw.enable(backend=mode.split("/")[0]):
                out = fn()
        print("RESULT ok " + " ".join(f"{v.flatten()[:4].tolist()}" for v in out), flush=True)
    except Exception as e:  # noqa: BLE001 -- the error is the result printed
        print(f"RESULT {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


def main():
    cases = sys.argv[1:] or CASES
    for case in cases:
        for mode in ("eager", "eager_backend", "inductor", "inductor/COMPILED_BW_CPP_WRAPPER=0"):
            env = dict(os.environ)
            if mode.endswith("=0"):
                env["COMPILED_BW_CPP_WRAPPER"] = "0"
            m = "eager" if mode == "eager" else ("eager/" if mode == "eager_backend" else mode)
            p = subprocess.run([sys.executable, __file__, "--child", case, m], check=False,
                               env=env, capture_output=True, text=True, timeout=900)
            res = [ln[7:] for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            what = res[0] if res else f"process died, returncode {p.returncode}" + (
                " (SIGSEGV)" if p.returncode in (-11, 139) else "")
            label = {"eager": "eager autograd", "eager_backend": "compiled_bw eager backend"}.get(mode, "compiled_bw " + mode)
            print(f"[{case}] {label:45s} {what}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
