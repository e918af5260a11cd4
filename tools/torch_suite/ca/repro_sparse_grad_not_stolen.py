"""Repro: a custom backward's new sparse grad for a leaf is stolen into .grad by eager
autograd's AccumulateGrad (x.grad's values/indices are the very buffers the backward returned),
but copied by compiled_bw (values equal, storages differ).  docs/semantics.md says "A custom
backward's new buffer ... [is] taken as in eager".  Found from test_compiled_autograd.py's
test_accumulate_grad_polyfill_case_1_2 (expectedFailure there, so the harness cannot see it).

On backend="inductor" (COMPILED_BW_BACKGROUND_COMPILE=0) the first backward raises NotDense
instead (eager: no error), the second runs eager autograd -- documented in docs/semantics.md
("A sparse grad where the graph holds a dense one").

Usage: PYTHONPATH=<repo> python repro_sparse_grad_not_stolen.py [eager|inductor] [--hook]
"""
import sys

import torch

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "eager"
HOOK = "--hook" in sys.argv
RETURNED = {}


class SparseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        i = torch.tensor([[0, 1], [0, 1]])
        v = torch.tensor([5.0, 5.0])
        RETURNED["values_ptr"] = v.data_ptr()      # a pointer only: no extra reference
        RETURNED["indices_ptr"] = i.data_ptr()
        return torch.sparse_coo_tensor(i, v, g.shape)


def run():
    x = torch.randn(2, 2, requires_grad=True)
    if HOOK:
        x.register_hook(lambda g: None)
    SparseGrad.apply(x).sum().backward()
    g = x.grad
    return {"stolen_values": g._values().data_ptr() == RETURNED["values_ptr"],
            "stolen_indices": g._indices().data_ptr() == RETURNED["indices_ptr"],
            "is_sparse": g.is_sparse, "grad": g.to_dense().tolist()}


if __name__ == "__main__":
    eager = [run() for _ in range(2)]
    ours = []
    with compiled_bw.enable(backend=BACKEND):
        for _ in range(2):                      # 1st: capture; 2nd: cached / fallback
            try:
                ours.append(run())
            except Exception as e:  # noqa: BLE001 -- Inductor: NotDense (docs/semantics.md)
                ours.append(f"raised {type(e).__name__}: {str(e)[:150]}")
    for i, (e, c) in enumerate(zip(eager, ours, strict=False)):
        print(f"backward {i}: eager       {e}\n            compiled_bw {c}\n"
              f"            {'SAME' if e == c else 'DIFFERENT'}")
    s = compiled_bw.stats()
    print(f"backend={BACKEND} hook={HOOK}: captures={s.captures} hits={s.cache_hits} "
          f"fallbacks={s.fallbacks} reasons={[str(r)[:90] for r in s.fallback_reasons]} "
          f"notes={[str(n)[:90] for n in s.notes]}")
