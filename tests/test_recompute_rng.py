"""Random ops (dropout) inside checkpointed regions whose recomputation is traced.

Consumes programs that checkpoint nn.Modules holding nn.Dropout (training mode) with
torch.utils.checkpoint(use_reentrant=False); produces eager vs compiled_bw comparisons
(strict=True): grads (a recomputed mask other than the forward's is a wrong grad), the global
generator after the step (its state and the next torch.rand), and which regions were traced
(graph/rng.py Note [Functional RNG in recomputation]).  Runs on both backends.
"""
import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads
from torch import nn

import compiled_bw
from compiled_bw.graph.rng import rng_draw

pytestmark = [pytest.mark.both_backends, pytest.mark.needs_feature("traced checkpoint recomputation")]


def _region():
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.4), nn.Linear(16, 6),
                         nn.Dropout(0.2))


def _opaque_nodes() -> str:
    line = [ln for ln in compiled_bw.explain().splitlines() if "opaque nodes" in ln]
    return line[0] if line else ""


def _draws() -> int:
    gm = compiled_bw.last_graph()
    return len(gm.graph.find_nodes(op="call_function", target=rng_draw))


def _build(n=1):
    def build():
        return [nn.ModuleList(_region() for _ in range(n)), nn.Linear(6, 2), torch.randn(7, 6)]
    return build


def _step(between=True, **kw):
    """Each region checkpointed; the global generator is used between the forward and the
    backward (so the backward's state is not the forward's) and after it."""
    def step(st):
        ms, head, x = st
        for p in (*ms.parameters(), *head.parameters()):
            p.grad = None
        xr = x.detach().requires_grad_()
        h = xr
        for m in ms:
            h = cp.checkpoint(m, h, use_reentrant=False, **kw)
        loss = head(h).pow(2).sum()
        if between:
            torch.rand(3)
        loss.backward()
        return [*grads(ms), *grads(head), xr.grad, torch.get_rng_state(), torch.rand(4)]
    return step


def test_dropout_in_checkpointed_mlp_is_traced_with_the_forwards_masks():
    differential(_build(), _step(), strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert _draws() == 2, compiled_bw.last_graph().code     # one per dropout


def test_two_regions_each_replay_their_own_state():
    differential(_build(2), _step(), strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert _draws() == 4


def test_no_rng_use_between_forward_and_backward():
    differential(_build(2), _step(between=False), strict=True)
    assert _draws() == 4


def test_explicit_default_determinism_check():
    differential(_build(), _step(determinism_check="default"), strict=True)
    assert _draws() == 2


def test_preserve_rng_state_false_keeps_the_per_node_path():
    """Eager's recomputation then draws from the global generator at backward time (and
    advances it): those regions run as eager's recomputation, one call per region."""
    differential(_build(), _step(preserve_rng_state=False), strict=True)
    assert "carry hooks" in _opaque_nodes(), _opaque_nodes()


class _Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _region()
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(6, 6)

    def forward(self, x):
        h = cp.checkpoint(self.inner, self.drop(x), use_reentrant=False)
        return self.out(self.drop(torch.tanh(h)))


def test_nested_checkpoint_with_dropout_in_both():
    def build():
        return [nn.ModuleList([_Nested()]), nn.Linear(6, 2), torch.randn(7, 6)]
    differential(build, _step(), strict=True, captures=None)


def test_masks_follow_each_steps_forward():
    """Each step's forward draws new masks: the graph is reused, the state is an input."""
    st = differential(_build(), _step(), strict=True, steps=4)
    assert st.captures == 1


def test_eval_mode_dropout_draws_nothing():
    def build():
        ms, head, x = _build()()
        ms.eval()
        return [ms, head, x]
    differential(build, _step(), strict=True)
    assert _draws() == 0
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _UserBlock(nn.Module):
    """Not opted in (traced under Dynamo's guards); `branchy` blocks branch on a tensor's
    value, which Dynamo refuses (a graph break), as Hugging Face T5's first decoder block
    sets `requires_grad` on a tensor: the blocks share one function key."""

    def __init__(self, branchy=False):
        super().__init__()
        self.branchy = branchy
        self.lin = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        h = self.drop(torch.tanh(self.lin(x)))
        if self.branchy and torch.isfinite(h).all():     # always taken here
            h = h * 2
        return h


def test_refused_block_beside_traced_ones_keeps_the_first_steps_graph():
    """Blocks of one class, one of which Dynamo refuses (walked after the others): every
    step traces the same regions (the refused one runs eager's recomputation), so the
    second step reuses the first step's graph -- with each step's own dropout masks."""
    def build():
        blocks = [_UserBlock(branchy=True), _UserBlock(), _UserBlock()]
        return [nn.ModuleList(blocks), nn.Linear(6, 2), torch.randn(7, 6)]
    st = differential(build, _step(), strict=True, steps=3)
    assert st.captures == 1, st.recompile_reasons
    assert st.recompute_refused == 1, st
    assert _draws() == 2, compiled_bw.last_graph().code     # the two traced blocks' dropouts
    assert "carry hooks" in _opaque_nodes(), _opaque_nodes()  # the refused block's nodes
