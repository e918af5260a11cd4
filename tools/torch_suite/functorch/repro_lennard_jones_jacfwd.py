"""compiled_bw (Inductor backend) vs eager autograd: TestExamplesCorrectness.test_lennard_jones_batched_jac.

From test_eager_transforms.py TestExamplesCorrectnessCPU::test_lennard_jones_batched_jac_jac_jacfwd_cpu,
which passes under eager autograd and under compiled_bw.enable(backend="eager") and fails under
compiled_bw.enable(backend="inductor") (COMPILED_BW_BACKGROUND_COMPILE=0) with a RuntimeError
raised by an aoti_torch_cpu_mm_out call of Inductor's C++ wrapper.
Each backward of the test is run separately, under eager and under compiled_bw.
Usage: python repro_lennard_jones_jacfwd.py [inductor|eager] [jacfwd|jacrev] [which...]
  which: functorch (grad of the vmap(jacfwd) forces loss) and/or reference (grad of the
  autograd.functional.jacobian(create_graph=True) loss); default both.
"""
import os
import sys

os.environ.setdefault("COMPILED_BW_BACKGROUND_COMPILE", "0")

import functorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from functorch import vmap

import compiled_bw

backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"
jacname = sys.argv[2] if len(sys.argv) > 2 else "jacfwd"
which = sys.argv[3:] or ["functorch", "reference"]
jac = getattr(functorch, jacname)

sigma, epsilon = 0.5, 4.0


def lennard_jones(r):
    return epsilon * ((sigma / r) ** 12 - (sigma / r) ** 6)


def lennard_jones_force(r):
    return -epsilon * ((-12 * sigma**12 / r**13) + (6 * sigma**6 / r**7))


def setup(n=100):
    torch.manual_seed(0)
    r = torch.linspace(0.5, 2 * sigma, steps=n, requires_grad=True)
    drs = torch.outer(r, torch.tensor([1.0, 0, 0]))
    norms = torch.norm(drs, dim=1).reshape(-1, 1)
    energies = torch.stack(list(map(lennard_jones, norms))).reshape(-1, 1)
    forces = torch.stack([f * dr for f, dr in zip(map(lennard_jones_force, norms), drs, strict=False)])
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 1))
    return drs, energies, forces, model


def loss_of(model, drs, energies_t, forces_t, use_functorch):
    norms = torch.norm(drs, dim=1).reshape(-1, 1)
    energies = model(norms)
    if use_functorch:
        network_derivs = vmap(jac(model))(norms).squeeze(-1)
        forces = -network_derivs * drs / norms
    else:
        forces = []
        for r, dr in zip(norms, drs, strict=False):
            d = torch.autograd.functional.jacobian(model, r, create_graph=True)
            forces.append(-d * dr / r)
        forces = torch.cat(forces)
    return F.mse_loss(energies_t, energies) + 0.01 * F.mse_loss(forces_t, forces) / 3


def one(use_functorch, mode):
    drs, e_t, f_t, model = setup()
    try:
        if mode == "eager":
            loss = loss_of(model, drs, e_t, f_t, use_functorch)
            return torch.autograd.grad(loss, model.parameters())
        with compiled_bw.enable(backend=backend):
            loss = loss_of(model, drs, e_t, f_t, use_functorch)
            return torch.autograd.grad(loss, model.parameters())
    except Exception as e:  # noqa: BLE001 -- the error is the result printed
        return f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


for w in which:
    uf = w == "functorch"
    e = one(uf, "eager")
    c = one(uf, "compiled_bw")
    print(f"[{jacname} {w}] eager:       {'ok' if not isinstance(e, str) else e}")
    if isinstance(c, str) or isinstance(e, str):
        print(f"[{jacname} {w}] compiled_bw: {c if isinstance(c, str) else 'ok'}  (backend={backend})")
    else:
        err = max((a - b).abs().max().item() for a, b in zip(e, c, strict=False))
        print(f"[{jacname} {w}] compiled_bw: ok, max |grad diff| vs eager = {err:.3g}  (backend={backend})")
s = compiled_bw.stats()
print("stats: captures", s.captures, "fallbacks", s.fallbacks, [str(r)[:80] for r in s.fallback_reasons])
