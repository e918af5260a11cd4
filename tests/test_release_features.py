"""Features that are off on some torch releases: on each release, the named fallback where the
feature is off (the reason from `torchapi.features_off()`, naming the release, in
`stats().notes`) and the compiled path where it is on.  Grads equal eager's either way
(differential).  `python -m compiled_bw.doctor` prints the same table.

Consumes the installed torch's feature table; produces, per feature, a program that needs it.
"""
import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads
from torch import nn

import compiled_bw
from compiled_bw import torchapi
from compiled_bw.torchapi import checkpoint as torch_checkpoint
from compiled_bw.torchapi import dynamo as torch_dynamo

pytestmark = pytest.mark.release


def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))


def _ops() -> set:
    return {n.target for n in compiled_bw.last_graph().graph.nodes if n.op == "call_function"}


def _checkpointed(context_fn=None):
    def build():
        return [_mlp(), torch.randn(5, 6)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        xr = x.detach().requires_grad_()
        kw = {} if context_fn is None else {"context_fn": context_fn}
        cp.checkpoint(m, xr, use_reentrant=False, **kw).pow(2).sum().backward()
        return [*grads(m), xr.grad]
    return build, step


def _off(feature: str):
    return torchapi.features_off().get(feature)


def test_traced_checkpoint_recomputation():
    st = differential(*_checkpointed(), captures=None)
    why = _off(torch_checkpoint.RECOMPUTE_FEATURE)
    if why is not None:
        assert why in st.notes and torch.__version__ in why, st.notes
        assert torch.ops.aten.addmm.default not in _ops()
    else:
        assert torch.ops.aten.addmm.default in _ops(), compiled_bw.last_graph().code
        assert not any(torch_checkpoint.RECOMPUTE_FEATURE in n for n in st.notes), st.notes


def _save_mm(ctx, op, *args, **kwargs):
    return (cp.CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.addmm.default
            else cp.CheckpointPolicy.PREFER_RECOMPUTE)


def test_traced_selective_checkpointing():
    st = differential(*_checkpointed(lambda: cp.create_selective_checkpoint_contexts(_save_mm)),
                      captures=None)
    # traced recomputation off takes every checkpointed region with it (2.11)
    why = _off(torch_checkpoint.RECOMPUTE_FEATURE) or _off(torch_checkpoint.SAC_FEATURE)
    if why is not None:
        assert why in st.notes and torch.__version__ in why, st.notes
        assert torch.ops.aten.gelu_backward.default not in _ops()
    else:
        ops = _ops()    # saved addmm outputs are inputs; the pointwise ops are recomputed
        assert torch.ops.aten.gelu.default in ops and torch.ops.aten.addmm.default not in ops, (
            compiled_bw.last_graph().code)


def test_aot_backward_splicing():
    def build():
        torch._dynamo.reset()
        m = _mlp()
        return [m, torch.compile(m, backend="aot_eager"), torch.randn(5, 6)]

    def step(st):
        m, cm, x = st
        m.zero_grad(set_to_none=True)
        cm(x).pow(2).mean().backward()
        return grads(m)
    st = differential(build, step, captures=None)
    why = _off(torch_dynamo.AOT_SPLICE_FEATURE)
    code = compiled_bw.last_graph().code
    if why is not None:
        assert any(why in n for n in st.notes) and torch.__version__ in why, st.notes
        assert "CompiledFunctionBackward" in code and "aot0_" not in code, code
    else:
        assert "aot0_" in code and "custom CompiledFunctionBackward" not in code, code
