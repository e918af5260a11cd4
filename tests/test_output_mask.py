"""passes/prune_output_mask.py Note [Output masks]: a grad() through a conv, layer norm or
batch norm computes only the grads eager's task computes (the traced op's output_mask has
False where nothing reads that output), with eager's values."""
import pytest
import torch
import torch.nn.functional as F
from differential import differential

import compiled_bw


@pytest.mark.both_backends
def test_grad_of_the_input_only_through_conv_and_norms():
    def build():
        torch.manual_seed(0)
        return [torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.LayerNorm(4)]

    def step(st):
        conv, bn, ln = st
        x = torch.randn(2, 2, 6, 6, requires_grad=True)
        y = ln(bn(conv(x)).flatten(2)[..., :4])
        g, = torch.autograd.grad(F.silu(y).sum(), x)
        return g
    differential(build, step)
    code = compiled_bw.last_graph().code
    for op in ("convolution_backward", "native_batch_norm_backward", "native_layer_norm_backward"):
        line = next(ln for ln in code.splitlines() if f"aten.{op}." in ln)
        assert line.rstrip().rsplit("[", 1)[1].startswith("True, False, False]"), line
