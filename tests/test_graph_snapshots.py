"""Graph snapshots: the captured last_graph() of canonical programs, compared as text.

A change in capture shows up here as a readable diff.  After an intended change, refresh with
    EXPECTTEST_ACCEPT=1 python -m pytest tests/test_graph_snapshots.py
and review the diff like code.  (Custom Functions, hooks and AOT-spliced graphs get their
snapshots with the issues that compile them.)
"""
import expecttest
import pytest
import snapshot
import torch
from functions import Double, scaled_sin
from torch import nn

import compiled_bw


def captured(fn) -> str:
    compiled_bw.reset()
    torch.manual_seed(0)
    with compiled_bw.enable(strict=True):
        fn()
    gm = compiled_bw.last_graph()
    return gm.print_readable(False, include_stride=False, include_device=False).strip()


class TestSnapshots(expecttest.TestCase):
    def test_mlp(self):
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        x = torch.randn(3, 4)
        snapshot.check(self, captured(lambda: m(x).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_addmm1_mat1: "f32[3, 8]", saved_addmm1_mat2: "f32[8, 2]", saved_relu3_result: "f32[3, 8]", saved_addmm6_mat1: "f32[3, 4]"):
        # No stacktrace found for following nodes
        t: "f32[2, 8]" = torch.ops.aten.t.default(saved_addmm1_mat2);  saved_addmm1_mat2 = None
        expand: "f32[3, 2]" = torch.ops.aten.expand.default(grad_root0, [3, 2]);  grad_root0 = None
        t_1: "f32[2, 3]" = torch.ops.aten.t.default(expand)
        mm_1: "f32[2, 8]" = torch.ops.aten.mm.default(t_1, saved_addmm1_mat1);  t_1 = saved_addmm1_mat1 = None
        mm: "f32[3, 8]" = torch.ops.aten.mm.default(expand, t);  t = None
        t_2: "f32[8, 2]" = torch.ops.aten.t.default(mm_1);  mm_1 = None
        t_3: "f32[2, 8]" = torch.ops.aten.t.default(t_2);  t_2 = None
        sum_1: "f32[1, 2]" = torch.ops.aten.sum.dim_IntList(expand, [0], True);  expand = None
        view: "f32[2]" = torch.ops.aten.view.default(sum_1, [2]);  sum_1 = None
        threshold_backward: "f32[3, 8]" = torch.ops.aten.threshold_backward.default(mm, saved_relu3_result, 0);  mm = saved_relu3_result = None
        t_4: "f32[8, 3]" = torch.ops.aten.t.default(threshold_backward)
        mm_2: "f32[8, 4]" = torch.ops.aten.mm.default(t_4, saved_addmm6_mat1);  t_4 = saved_addmm6_mat1 = None
        t_5: "f32[4, 8]" = torch.ops.aten.t.default(mm_2);  mm_2 = None
        t_6: "f32[8, 4]" = torch.ops.aten.t.default(t_5);  t_5 = None
        sum_2: "f32[1, 8]" = torch.ops.aten.sum.dim_IntList(threshold_backward, [0], True);  threshold_backward = None
        view_1: "f32[8]" = torch.ops.aten.view.default(sum_2, [8]);  sum_2 = None
        return [view, t_3, view_1, t_6]""")

    def test_broadcast_sum_to(self):
        a = torch.randn(3, 1, requires_grad=True)
        b = torch.randn(4, requires_grad=True)
        snapshot.check(self, captured(lambda: (a * b).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul1_other: "f32[4]", saved_mul1_self: "f32[3, 1]"):
        # No stacktrace found for following nodes
        expand: "f32[3, 4]" = torch.ops.aten.expand.default(grad_root0, [3, 4]);  grad_root0 = None
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_self);  saved_mul1_self = None
        mul_1: "f32[3, 4]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_other);  expand = saved_mul1_other = None
        sum_1: "f32[3, 1]" = torch.ops.aten.sum.dim_IntList(mul_1, [1], True);  mul_1 = None
        sum_2: "f32[1, 4]" = torch.ops.aten.sum.dim_IntList(mul, [0], True);  mul = None
        view: "f32[4]" = torch.ops.aten.view.default(sum_2, [4]);  sum_2 = None
        return [sum_1, view]""")

    def test_dtype_cast(self):
        a = torch.randn(3, requires_grad=True)
        b = torch.randn(3, dtype=torch.float64, requires_grad=True)
        snapshot.check(self, captured(lambda: (a * b).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f64[]", saved_mul1_other: "f64[3]", saved_mul1_self: "f32[3]"):
        # No stacktrace found for following nodes
        expand: "f64[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        mul: "f64[3]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_self);  saved_mul1_self = None
        mul_1: "f64[3]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_other);  expand = saved_mul1_other = None
        _to_copy: "f32[3]" = torch.ops.aten._to_copy.default(mul_1, dtype = torch.float32);  mul_1 = None
        return [_to_copy, mul]""")

    def test_grad_wrt_intermediate(self):
        x = torch.randn(3, requires_grad=True)

        def prog():
            h = x.exp()
            torch.autograd.grad((h * h).sum(), [h])
        snapshot.check(self, captured(prog), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul1_other: "f32[3]", saved_mul1_self: "f32[3]", saved_exp2_result: "f32[3]"):
        # No stacktrace found for following nodes
        expand: "f32[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        mul: "f32[3]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_self);  saved_mul1_self = None
        mul_1: "f32[3]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_other);  expand = saved_mul1_other = None
        add: "f32[3]" = torch.ops.aten.add.Tensor(mul_1, mul);  mul_1 = mul = None
        return [add]""")

    def test_multiple_roots(self):
        x = torch.randn(2, requires_grad=True)

        def prog():
            torch.autograd.backward([x.sin(), x.cos()], [torch.ones(2), torch.ones(2)])
        snapshot.check(self, captured(prog), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[2]", grad_root1: "f32[2]", saved_cos1_self: "f32[2]", saved_sin0_self: "f32[2]"):
        # No stacktrace found for following nodes
        sin: "f32[2]" = torch.ops.aten.sin.default(saved_cos1_self);  saved_cos1_self = None
        neg: "f32[2]" = torch.ops.aten.neg.default(sin);  sin = None
        mul: "f32[2]" = torch.ops.aten.mul.Tensor(grad_root1, neg);  grad_root1 = neg = None
        cos: "f32[2]" = torch.ops.aten.cos.default(saved_sin0_self);  saved_sin0_self = None
        mul_1: "f32[2]" = torch.ops.aten.mul.Tensor(grad_root0, cos);  grad_root0 = cos = None
        add: "f32[2]" = torch.ops.aten.add.Tensor(mul, mul_1);  mul = mul_1 = None
        return [add]""")

    def test_inputs_prunes(self):
        a = torch.randn(2, requires_grad=True)
        b = torch.randn(2, requires_grad=True)
        snapshot.check(self, captured(lambda: (a.exp() * b.sin()).sum().backward(inputs=[b])), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul1_other: "f32[2]", saved_mul1_self: "f32[2]", saved_sin3_self: "f32[2]", saved_exp2_result: "f32[2]"):
        # No stacktrace found for following nodes
        expand: "f32[2]" = torch.ops.aten.expand.default(grad_root0, [2]);  grad_root0 = None
        mul: "f32[2]" = torch.ops.aten.mul.Tensor(expand, saved_mul1_self);  expand = saved_mul1_self = None
        cos: "f32[2]" = torch.ops.aten.cos.default(saved_sin3_self);  saved_sin3_self = None
        mul_2: "f32[2]" = torch.ops.aten.mul.Tensor(mul, cos);  mul = cos = None
        return [mul_2]""")

    def test_copyslices_is_opaque(self):
        x = torch.randn(4, requires_grad=True)

        def prog():
            y = x * 2
            y[1:3].mul_(3)
            y.sum().backward()
        snapshot.check(self, captured(prog), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul2_other: "i64[]"):
        # No stacktrace found for following nodes
        expand: "f32[4]" = torch.ops.aten.expand.default(grad_root0, [4]);  grad_root0 = None
        opaque = torch.ops.compiled_bw.opaque.default(0, [expand], 'node CopySlices');  expand = None
        getitem: "f32[4]" = opaque[0];  opaque = None
        mul: "f32[4]" = torch.ops.aten.mul.Tensor(getitem, saved_mul2_other);  getitem = saved_mul2_other = None
        return [mul]""")

    def test_cat_with_non_grad_inputs_on_both_sides_is_opaque(self):
        # x's offset is the first input's length, hidden in the node (nodes.py Note [Hidden
        # saved state]): the real node runs
        x = torch.randn(2, requires_grad=True)
        snapshot.check(self, captured(lambda: torch.cat([torch.zeros(1), x * 2, torch.zeros(1)]).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul2_other: "i64[]"):
        # No stacktrace found for following nodes
        expand: "f32[4]" = torch.ops.aten.expand.default(grad_root0, [4]);  grad_root0 = None
        opaque = torch.ops.compiled_bw.opaque.default(0, [expand], 'node CatBackward0');  expand = None
        getitem: "f32[2]" = opaque[0];  opaque = None
        mul: "f32[2]" = torch.ops.aten.mul.Tensor(getitem, saved_mul2_other);  getitem = saved_mul2_other = None
        return [mul]""")

    def test_cat_with_a_non_grad_input_before_is_traced(self):
        # the hidden length is what x leaves of the grad's: x's offset is known
        x = torch.randn(2, requires_grad=True)
        snapshot.check(self, captured(lambda: torch.cat([torch.zeros(1), x * 2]).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_mul2_other: "i64[]"):
        # No stacktrace found for following nodes
        expand: "f32[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        slice_2: "f32[2]" = torch.ops.aten.slice.Tensor(expand, 0, 1, 3);  expand = None
        mul: "f32[2]" = torch.ops.aten.mul.Tensor(slice_2, saved_mul2_other);  slice_2 = saved_mul2_other = None
        return [mul]""")

    def test_data_dependent_node_is_opaque(self):
        x = torch.randn(5, requires_grad=True)
        snapshot.check(self, captured(lambda: x[x > 0].exp().sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_exp1_result: "f32[2]", saved_index2_indices_0: "b8[5]"):
        # No stacktrace found for following nodes
        expand: "f32[2]" = torch.ops.aten.expand.default(grad_root0, [2]);  grad_root0 = None
        mul: "f32[2]" = torch.ops.aten.mul.Tensor(expand, saved_exp1_result);  expand = saved_exp1_result = None
        new_zeros: "f32[5]" = torch.ops.aten.new_zeros.default(mul, [5], dtype = torch.float32, layout = torch.strided, device = device(type='cpu'))
        index_put: "f32[5]" = torch.ops.aten.index_put.default(new_zeros, [saved_index2_indices_0], mul, True);  new_zeros = saved_index2_indices_0 = mul = None
        return [index_put]""")

    def test_layernorm_gelu(self):
        m = nn.Sequential(nn.LayerNorm(4), nn.GELU())
        x = torch.randn(2, 4)
        snapshot.check(self, captured(lambda: m(x).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_gelu1_self: "f32[2, 4]", saved_nativelayernorm2_bias: "f32[4]", saved_nativelayernorm2_input: "f32[2, 4]", saved_nativelayernorm2_result1: "f32[2, 1]", saved_nativelayernorm2_result2: "f32[2, 1]", saved_nativelayernorm2_weight: "f32[4]"):
        # No stacktrace found for following nodes
        expand: "f32[2, 4]" = torch.ops.aten.expand.default(grad_root0, [2, 4]);  grad_root0 = None
        gelu_backward: "f32[2, 4]" = torch.ops.aten.gelu_backward.default(expand, saved_gelu1_self);  expand = saved_gelu1_self = None
        native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(gelu_backward, saved_nativelayernorm2_input, [4], saved_nativelayernorm2_result1, saved_nativelayernorm2_result2, saved_nativelayernorm2_weight, saved_nativelayernorm2_bias, [False, True, True]);  gelu_backward = saved_nativelayernorm2_input = saved_nativelayernorm2_result1 = saved_nativelayernorm2_result2 = saved_nativelayernorm2_weight = saved_nativelayernorm2_bias = None
        getitem_1: "f32[4]" = native_layer_norm_backward[1]
        getitem_2: "f32[4]" = native_layer_norm_backward[2];  native_layer_norm_backward = None
        return [getitem_1, getitem_2]""")

    def test_custom_function_is_one_opaque_call(self):
        x = torch.randn(3, requires_grad=True)
        snapshot.check(self, captured(lambda: Double.apply(x.exp()).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_exp2_result: "f32[3]"):
        # No stacktrace found for following nodes
        expand: "f32[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        opaque = torch.ops.compiled_bw.opaque.default(0, [expand], 'custom DoubleBackward');  expand = None
        getitem: "f32[3]" = opaque[0];  opaque = None
        mul: "f32[3]" = torch.ops.aten.mul.Tensor(getitem, saved_exp2_result);  getitem = saved_exp2_result = None
        deliver = torch.ops.compiled_bw.deliver.default(1, mul, 'leaf AccumulateGrad', True);  mul = deliver = None
        return []""")

    def test_custom_op_backward_is_traced(self):
        x = torch.randn(3, requires_grad=True)
        snapshot.check(self, captured(lambda: scaled_sin(x.exp(), 1.5).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_generatedbackwardfor_cbw_test_scaled_sin_defaultbackward1_tensors_0: "f32[3]", saved_exp2_result: "f32[3]"):
        # No stacktrace found for following nodes
        expand: "f32[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        cos: "f32[3]" = torch.ops.aten.cos.default(saved_generatedbackwardfor_cbw_test_scaled_sin_defaultbackward1_tensors_0);  saved_generatedbackwardfor_cbw_test_scaled_sin_defaultbackward1_tensors_0 = None
        mul: "f32[3]" = torch.ops.aten.mul.Tensor(expand, cos);  expand = cos = None
        mul_1: "f32[3]" = torch.ops.aten.mul.Tensor(mul, 1.5);  mul = None
        mul_2: "f32[3]" = torch.ops.aten.mul.Tensor(mul_1, saved_exp2_result);  mul_1 = saved_exp2_result = None
        return [mul_2]""")

    def test_tensor_hook_and_node_post_hook_are_opaque_calls(self):
        x = torch.randn(3, requires_grad=True)

        def prog():
            y = x.exp()
            y.register_hook(lambda g: g * 2)
            y.grad_fn.register_hook(lambda gi, go: None)
            y.sum().backward()
        snapshot.check(self, captured(prog), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", saved_exp1_result: "f32[3]"):
        # No stacktrace found for following nodes
        expand: "f32[3]" = torch.ops.aten.expand.default(grad_root0, [3]);  grad_root0 = None
        opaque = torch.ops.compiled_bw.opaque.default(0, [expand], 'pre ExpBackward0');  expand = None
        getitem: "f32[3]" = opaque[0];  opaque = None
        mul: "f32[3]" = torch.ops.aten.mul.Tensor(getitem, saved_exp1_result);  saved_exp1_result = None
        opaque_1 = torch.ops.compiled_bw.opaque.default(1, [mul, getitem], 'post ExpBackward0');  mul = getitem = None
        getitem_1: "f32[3]" = opaque_1[0];  opaque_1 = None
        deliver = torch.ops.compiled_bw.deliver.default(2, getitem_1, 'leaf AccumulateGrad');  getitem_1 = deliver = None
        return []""")

    @pytest.mark.needs_feature("traced checkpoint recomputation")
    def test_checkpointed_mlp_recompute_is_in_the_graph(self):
        """Non-reentrant checkpoint: the region's recomputed addmm and gelu are graph ops fed by
        its parameters and saved argument (checkpoint/recompute.py), not an opaque call."""
        import torch.utils.checkpoint as cp
        m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
        x = torch.randn(3, 4)
        snapshot.check(self, captured(
            lambda: cp.checkpoint(m, x, use_reentrant=False).sum().backward()), """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", ckpt0_0_weight: "f32[8, 4]", ckpt0_0_bias: "f32[8]", ckpt0_2_weight: "f32[2, 8]", ckpt0_2_bias: "f32[2]", ckpt0_arg0: "f32[3, 4]"):
        # No stacktrace found for following nodes
        t: "f32[4, 8]" = torch.ops.aten.t.default(ckpt0_0_weight);  ckpt0_0_weight = None
        t_1: "f32[8, 2]" = torch.ops.aten.t.default(ckpt0_2_weight);  ckpt0_2_weight = None
        expand: "f32[3, 2]" = torch.ops.aten.expand.default(grad_root0, [3, 2]);  grad_root0 = None
        t_3: "f32[2, 3]" = torch.ops.aten.t.default(expand)
        addmm: "f32[3, 8]" = torch.ops.aten.addmm.default(ckpt0_0_bias, ckpt0_arg0, t);  ckpt0_0_bias = t = None
        gelu: "f32[3, 8]" = torch.ops.aten.gelu.default(addmm)
        t_2: "f32[2, 8]" = torch.ops.aten.t.default(t_1);  t_1 = None
        mm: "f32[3, 8]" = torch.ops.aten.mm.default(expand, t_2);  t_2 = None
        mm_1: "f32[2, 8]" = torch.ops.aten.mm.default(t_3, gelu);  t_3 = gelu = None
        t_4: "f32[8, 2]" = torch.ops.aten.t.default(mm_1);  mm_1 = None
        t_5: "f32[2, 8]" = torch.ops.aten.t.default(t_4);  t_4 = None
        sum_1: "f32[1, 2]" = torch.ops.aten.sum.dim_IntList(expand, [0], True);  expand = None
        view: "f32[2]" = torch.ops.aten.view.default(sum_1, [2]);  sum_1 = None
        gelu_backward: "f32[3, 8]" = torch.ops.aten.gelu_backward.default(mm, addmm);  mm = addmm = None
        t_6: "f32[8, 3]" = torch.ops.aten.t.default(gelu_backward)
        mm_2: "f32[8, 4]" = torch.ops.aten.mm.default(t_6, ckpt0_arg0);  t_6 = ckpt0_arg0 = None
        t_7: "f32[4, 8]" = torch.ops.aten.t.default(mm_2);  mm_2 = None
        t_8: "f32[8, 4]" = torch.ops.aten.t.default(t_7);  t_7 = None
        sum_2: "f32[1, 8]" = torch.ops.aten.sum.dim_IntList(gelu_backward, [0], True);  gelu_backward = None
        view_1: "f32[8]" = torch.ops.aten.view.default(sum_2, [8]);  sum_2 = None
        return [view, t_5, view_1, t_8]""")

    @pytest.mark.needs_feature("traced checkpoint recomputation", "traced selective checkpointing")
    def test_sac_mlp_saved_mm_are_inputs_and_pointwise_recomputed(self):
        """Selective checkpointing saving addmm: the forward's saved addmm outputs are graph
        inputs (ckpt0_sac*), the gelu between them is recomputed in the graph
        (checkpoint/recompute.py Note [Selective recomputation])."""
        import torch.utils.checkpoint as cp
        m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
        x = torch.randn(3, 4)

        def context():
            return cp.create_selective_checkpoint_contexts([torch.ops.aten.addmm.default])
        snapshot.check(self, captured(
            lambda: cp.checkpoint(m, x, use_reentrant=False, context_fn=context).sum().backward()),
            """\
class <lambda>(torch.nn.Module):
    def forward(self, grad_root0: "f32[]", ckpt0_0_weight: "f32[8, 4]", ckpt0_0_bias: "f32[8]", ckpt0_2_weight: "f32[2, 8]", ckpt0_2_bias: "f32[2]", ckpt0_arg0: "f32[3, 4]", ckpt0_sac0: "f32[3, 8]", ckpt0_sac1: "f32[3, 2]"):
        # No stacktrace found for following nodes
        t: "f32[8, 2]" = torch.ops.aten.t.default(ckpt0_2_weight);  ckpt0_2_weight = None
        expand: "f32[3, 2]" = torch.ops.aten.expand.default(grad_root0, [3, 2]);  grad_root0 = None
        t_2: "f32[2, 3]" = torch.ops.aten.t.default(expand)
        gelu: "f32[3, 8]" = torch.ops.aten.gelu.default(ckpt0_sac0)
        t_1: "f32[2, 8]" = torch.ops.aten.t.default(t);  t = None
        mm: "f32[3, 8]" = torch.ops.aten.mm.default(expand, t_1);  t_1 = None
        mm_1: "f32[2, 8]" = torch.ops.aten.mm.default(t_2, gelu);  t_2 = gelu = None
        t_3: "f32[8, 2]" = torch.ops.aten.t.default(mm_1);  mm_1 = None
        t_4: "f32[2, 8]" = torch.ops.aten.t.default(t_3);  t_3 = None
        sum_1: "f32[1, 2]" = torch.ops.aten.sum.dim_IntList(expand, [0], True);  expand = None
        view: "f32[2]" = torch.ops.aten.view.default(sum_1, [2]);  sum_1 = None
        gelu_backward: "f32[3, 8]" = torch.ops.aten.gelu_backward.default(mm, ckpt0_sac0);  mm = ckpt0_sac0 = None
        t_5: "f32[8, 3]" = torch.ops.aten.t.default(gelu_backward)
        mm_2: "f32[8, 4]" = torch.ops.aten.mm.default(t_5, ckpt0_arg0);  t_5 = ckpt0_arg0 = None
        t_6: "f32[4, 8]" = torch.ops.aten.t.default(mm_2);  mm_2 = None
        t_7: "f32[8, 4]" = torch.ops.aten.t.default(t_6);  t_6 = None
        sum_2: "f32[1, 8]" = torch.ops.aten.sum.dim_IntList(gelu_backward, [0], True);  gelu_backward = None
        view_1: "f32[8]" = torch.ops.aten.view.default(sum_2, [8]);  sum_2 = None
        return [view, t_4, view_1, t_7]""")
