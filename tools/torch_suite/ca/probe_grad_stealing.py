"""Probe (not a failing test): test_compiled_autograd.py's test_accumulate_grad_polyfill_case_1_1
and _1_2 are unittest.expectedFailure (torch's compiled autograd does not steal), so their
outcome (xfailed in both harness modes) cannot show whether compiled_bw keeps eager's
AccumulateGrad stealing.  This runs their bodies directly, eager vs compiled_bw, and prints
whether var.grad is the very storage the tensor hook saw (eager: stolen) plus the values.

Usage: PYTHONPATH=<repo> python probe_grad_stealing.py [eager|inductor]
"""
import sys

import torch

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "eager"


class BaseCustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


class StealableDenseOp(BaseCustomOp):
    @staticmethod
    def backward(ctx, grad_output):
        return torch.ones_like(grad_output, requires_grad=False) * 5


class StealableSparseOp(BaseCustomOp):
    @staticmethod
    def backward(ctx, grad_output):
        indices = torch.tensor([[0, 1], [0, 1]], dtype=torch.int64)
        return torch.sparse_coo_tensor(indices, torch.tensor([5.0, 5.0]), grad_output.size())


def dense():
    seen = []
    var = torch.randn(2, 2, requires_grad=True)
    var.register_hook(lambda g: seen.append(id(g.untyped_storage())))
    out = StealableDenseOp.apply(var)
    out.backward(torch.ones_like(out))
    return {"stolen": id(var.grad.untyped_storage()) == seen[0],
            "grad": var.grad.tolist(), "requires_grad": var.grad.requires_grad}


def sparse():
    seen = []
    var = torch.randn(2, 2, requires_grad=True)
    var.register_hook(lambda g: seen.append((id(g._indices().untyped_storage()),
                                             id(g._values().untyped_storage()))))
    out = StealableSparseOp.apply(var)
    out.backward(torch.ones_like(out))
    g = var.grad
    return {"stolen": (id(g._indices().untyped_storage()), id(g._values().untyped_storage()))
            == seen[0], "is_sparse": g.is_sparse, "grad": g.to_dense().tolist()}


for name, fn in (("dense (case 1_1)", dense), ("sparse (case 1_2)", sparse)):
    e = fn()
    with compiled_bw.enable(backend=BACKEND):
        c = fn()
    print(f"{name}: eager {e}\n{' ' * len(name)}  compiled_bw[{BACKEND}] {c}\n"
          f"{' ' * len(name)}  {'SAME' if e == c else 'DIFFERENT'}")
print("stats:", compiled_bw.stats().captures, "captures,", compiled_bw.stats().fallbacks,
      "fallbacks", [str(r)[:100] for r in compiled_bw.stats().fallback_reasons])
