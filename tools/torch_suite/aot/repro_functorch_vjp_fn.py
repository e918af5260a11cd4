"""compiled_bw vs eager autograd: calling the vjp_fn returned by functorch's vjp().

From test_aotdispatch.py TestPythonKey.test_make_fx_vjp, which passes under eager autograd and
fails under compiled_bw.enable() (AttributeError in torch.autograd.graph.get_gradient_edge).
Usage: python repro_functorch_vjp_fn.py [eager|inductor]
"""
import sys

import torch
from functorch import make_fx, vjp

import compiled_bw

backend = sys.argv[1] if len(sys.argv) > 1 else "eager"


def f(x):
    return torch.sin(x).sum()


def case(name, use_make_fx):
    torch.manual_seed(0)
    primals = torch.randn(3)
    _, vjp_fn = vjp(f, primals)
    if use_make_fx:
        make_fx(vjp_fn)(torch.randn(()), True, True)
    cot = torch.randn(())
    results = {}
    for mode in ("eager", "compiled_bw"):
        try:
            if mode == "eager":
                r = vjp_fn(cot)
            else:
                with compiled_bw.enable(backend=backend):
                    r = vjp_fn(cot)
            results[mode] = f"ok {r[0]}"
        except Exception as e:  # noqa: BLE001 -- the error is the result printed
            results[mode] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    print(f"[{name}] eager:       {results['eager']}")
    print(f"[{name}] compiled_bw: {results['compiled_bw']}  (backend={backend})")
    print(f"[{name}] expected {torch.cos(primals) * cot}")


case("vjp_fn(cot)", use_make_fx=False)
case("vjp_fn(cot) after make_fx(vjp_fn)(...)", use_make_fx=True)
print("stats:", compiled_bw.stats())
