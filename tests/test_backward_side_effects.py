"""Side effects in a backward happen as under eager autograd (issue #36 items 3 and 11;
passes/dce.py Note [Side effects stay]): an effectful custom op (registered with
`_register_effectful_op`, so AOTAutograd threads it with effect tokens) or torch's own
effectful `aten._print`, called for its side effect alone inside the backward of a
torch.compile'd forward, runs as often and in the same order as eagerly, on both backends,
with the graph compiled (not falling back)."""
from __future__ import annotations

import pytest
import torch
from differential import differential
from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

pytestmark = pytest.mark.slow   # torch.compile'd forwards

LOG: list = []
_LIB = torch.library.Library("cbwtest_eff", "FRAGMENT")
for _name in ("note_a", "note_b"):
    _LIB.define(f"{_name}(Tensor x) -> Tensor")

    def _impl(x, _name=_name):
        LOG.append((_name, round(float(x.sum()), 3)))
        return x.clone()
    _LIB.impl(_name, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"cbwtest_eff::{_name}", torch.empty_like, lib=_LIB)
    _register_effectful_op(getattr(torch.ops.cbwtest_eff, _name).default, _EffectType.ORDERED)


class Noted(torch.autograd.Function):
    """Its backward notes the incoming grad twice (result unused), in a fixed order."""
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        torch.ops.cbwtest_eff.note_a(g)
        h = g * 2
        torch.ops.cbwtest_eff.note_b(h)
        return h


class Printed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        torch.ops.aten._print("backward of Printed")
        return g * 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_effectful_custom_op_in_aot_backward_runs_as_eager(backend):
    def build():
        lin = torch.nn.Linear(4, 4)
        f = torch.compile(lambda x: Noted.apply(lin(x)).sin(), backend="aot_eager")
        return [lin, f, torch.randn(3, 4)]

    def step(st):
        lin, f, x = st
        lin.zero_grad(set_to_none=True)
        LOG.clear()
        f(x).sum().backward()
        return [lin.weight.grad.clone(), list(LOG)]
    torch._dynamo.reset()
    differential(build, step, steps=3, backend=backend)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_torch_effectful_print_in_aot_backward_runs_as_eager(backend, capfd):
    def build():
        lin = torch.nn.Linear(4, 4)
        return [lin, torch.compile(lambda x: Printed.apply(lin(x)).cos(), backend="aot_eager"),
                torch.randn(3, 4)]

    def step(st):
        lin, f, x = st
        lin.zero_grad(set_to_none=True)
        capfd.readouterr()
        f(x).sum().backward()
        return [lin.weight.grad.clone(), capfd.readouterr().out.count("backward of Printed")]
    torch._dynamo.reset()
    st = differential(build, step, steps=3, backend=backend)
    if backend == "inductor":
        # #36 item 11: a graph calling torch's own effectful op compiles in the background
        # worker as any other (before: in this process, "with_effects, defined outside
        # torch"), and its later steps run Inductor's code, printing as eager's
        assert st.background_compiles == 1 and st.native_runs == 2 and not st.notes, st
