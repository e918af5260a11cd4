# Owner(s): ["module: dynamo"]
import copy
import functools
import inspect
import math
import types
from dataclasses import dataclass
from unittest import mock

import torch
import torch._dynamo.test_case
import torch._dynamo.testing
import torch._dynamo.utils
from torch._dynamo.testing import AotEagerAndRecordGraphs
from torch.testing._internal.triton_utils import HAS_GPU, requires_gpu


device_type = (
    acc.type if (acc := torch.accelerator.current_accelerator(True)) else "cpu"
)

if HAS_GPU:
    import triton

    from torch.testing._internal.triton_utils import add_kernel


class CustomFunc1(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return foo + foo

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class CustomFunc3(torch.autograd.Function):
    # Test there is graph break in forward function
    @staticmethod
    def forward(ctx, foo):
        result = foo + foo
        torch._dynamo.graph_break()
        result = result + foo
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * math.sqrt(result.numel())


class Module1(torch.nn.Module):
    def forward(self, foo):
        return CustomFunc1().apply(foo)


class Module2(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fn = CustomFunc1.apply

    def forward(self, foo):
        return self.fn(foo)


class Module3(torch.nn.Module):
    def forward(self, foo):
        return CustomFunc1().apply(foo)


class Module4(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fn = CustomFunc1.apply

    def forward(self, foo):
        return self.fn(foo)


class Module5(torch.nn.Module):
    def forward(self, foo):
        return CustomFunc3().apply(foo)


class Module6(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fn = CustomFunc3.apply

    def forward(self, foo):
        return self.fn(foo)


class LinearFunction(torch.autograd.Function):
    # Note that forward, setup_context, and backward are @staticmethods
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    # inputs is a Tuple of all of the inputs passed to forward.
    # output is the output of the forward().
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    # This function has only a single output, so it gets only one gradient
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)

        return grad_input, grad_weight, grad_bias


class ModuleLinear(torch.nn.Module):
    def forward(self, input, weight, bias=None):
        return LinearFunction.apply(input, weight, bias)


class MaterializingGradFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        return grad_out1, grad_out2


class MaterializingGradModule(torch.nn.Module):
    def forward(self, x):
        return MaterializingGradFunction.apply(x)


class CustomFuncBwdPrintGraphBreak(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return torch.add(foo, foo)

    @staticmethod
    def backward(ctx, grad_output):
        print("graph break!")
        return grad_output


class CustomFuncBwdPrintModule(torch.nn.Module):
    def forward(self, x):
        return CustomFuncBwdPrintGraphBreak.apply(x)


class CustomFuncStrideBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return torch.add(foo, foo)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * grad_output.stride()[-1]


class CustomFuncStrideModule(torch.nn.Module):
    def forward(self, x):
        return CustomFuncStrideBwd.apply(x)


class CustomFuncSaveForBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = foo + foo
        result = result + foo
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * math.sqrt(result.numel())


class SaveForBwdModule(torch.nn.Module):
    def forward(self, foo):
        return CustomFuncSaveForBwd().apply(foo)


class ContextSaveAndMark(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            ctx.save_for_backward(x)
            ctx.mark_non_differentiable(x)
            return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ContextMarkAndSave(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            ctx.mark_non_differentiable(x)
            ctx.save_for_backward(x)
            return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ModuleWithGradFunc(torch.nn.Module):
    def __init__(self, func):
        super().__init__()
        self.f = func.apply

    def forward(self, x):
        return self.f(x)


class AutogradFunctionTests(torch._dynamo.test_case.TestCase):
    # Sound behaviors, tested for working capture
    def test_function_ctx_does_not_instantiate_function(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.scale = 3
                return x.sin()

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * ctx.scale

        def fn(x):
            return Foo.apply(x)

        x = torch.randn(3, requires_grad=True)
        ref = fn(x)
        with mock.patch.object(
            torch.autograd.Function,
            "__init__",
            side_effect=AssertionError("deprecated Function instantiated"),
        ):
            res = torch.compile(fn, backend="eager", fullgraph=True)(x)

        self.assertEqual(res, ref)

    def test_autograd_function_equivalence(self):
        for grad in [True, False]:
            for i in range(1, 5):
                torch._dynamo.reset()
                model = globals()[f"Module{i}"]()
                opt_model = torch.compile(model, backend="eager")
                self.assertTrue(
                    torch.allclose(
                        opt_model(torch.ones(2, 3, requires_grad=grad)),
                        torch.tensor([2.0], requires_grad=grad),
                    )
                )

    def test_autograd_function_has_graph_break(self):
        for grad in [True, False]:
            x = torch.randn(10, requires_grad=grad)
            for model in [Module5(), Module6()]:
                torch._dynamo.reset()
                cnts = torch._dynamo.testing.CompileCounter()
                opt_model = torch.compile(model, backend=cnts)
                for _ in range(3):
                    ref = model(x)
                    res = opt_model(x)
                    self.assertTrue(torch.allclose(ref, res))
                self.assertEqual(cnts.frame_count, 2)

    def test_linear_setup_context(self):
        model = ModuleLinear()
        opt_model = torch.compile(model, backend="eager", fullgraph=True)
        input = torch.randn(2, 2, dtype=torch.double, requires_grad=True)
        weight = torch.randn(3, 2, dtype=torch.double, requires_grad=True)
        eager_result = model(input, weight)
        optim_result = opt_model(input, weight)
        self.assertEqual(optim_result, eager_result)

    def test_materialize_grad(self):
        model = MaterializingGradModule()
        opt_model = torch.compile(model, backend="eager")
        x = torch.randn(2, 2, dtype=torch.double, requires_grad=True)
        optim_result = opt_model(x)
        eager_result = model(x)
        self.assertEqual(optim_result, eager_result)

    def test_print_in_bwd(self):
        model = CustomFuncBwdPrintModule()
        opt_model = torch.compile(model, backend="eager", fullgraph=True)
        x = torch.randn(2, 2, dtype=torch.double, requires_grad=True)
        with self.assertRaisesRegex(
            torch._dynamo.exc.Unsupported,
            "Dynamo does not know how to trace builtin operator `print`",
        ):
            opt_model(x)

    def test_stride_in_bwd(self):
        torch._dynamo.utils.counters.clear()
        cnt = torch._dynamo.testing.CompileCounter()
        model = CustomFuncStrideModule()
        opt_model = torch.compile(backend=cnt, fullgraph=True)(model)
        x1 = torch.randn(2, 2, dtype=torch.double, requires_grad=True)
        x2 = copy.deepcopy(x1)
        ref = model(x1)
        ref.backward(x1.clone().detach())
        res = opt_model(x2)
        res.backward(x2.clone().detach())

        self.assertEqual(ref, res)
        self.assertEqual(x1.grad, x2.grad)
        self.assertEqual(cnt.frame_count, 1)

    def test_enum_arg(self):
        from enum import Enum

        class SomeEnum(Enum):
            A = 0
            B = 1

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, e):
                if e is SomeEnum.A:
                    return x.sin()
                else:
                    return x.cos()

            @staticmethod
            def backward(ctx, g):
                return g

        @torch.compile(backend="eager", fullgraph=True)
        def f(x, enum):
            output = Foo.apply(
                x,
                enum,
            )
            return output

        x = torch.tensor([[1.0, 2, 3], [4, 5, 6]], requires_grad=True)
        y = f(x, SomeEnum.A)
        self.assertEqual(y, x.sin())

    def test_save_for_bwd(self):
        model = SaveForBwdModule()
        opt_model = torch.compile(model, backend="eager", fullgraph=True)
        x = torch.randn(2, 2, dtype=torch.double, requires_grad=True)
        opt_model(x)

    def test_allow_in_graph(self):
        torch._dynamo.utils.counters.clear()
        cnt = torch._dynamo.testing.CompileCounter()

        @torch._dynamo.allow_in_graph
        class AllowInGraphFunc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                torch._dynamo.graph_break()
                ctx.x0 = x.size(0)
                return x * 2

            @staticmethod
            def backward(ctx, grad_out):
                return grad_out * ctx.x0

        @torch.compile(backend=cnt, fullgraph=True)
        def fn(x):
            return AllowInGraphFunc.apply(x)

        x = torch.rand(2, 3, requires_grad=True)
        result = fn(x)

        self.assertEqual(result, AllowInGraphFunc.apply(x))
        self.assertEqual(cnt.frame_count, 1)

    def test_once_differentiable(self):
        from torch.autograd.function import once_differentiable

        torch._dynamo.utils.counters.clear()
        cnt = torch._dynamo.testing.CompileCounter()

        class ScaleGradient(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                return grad * 0.5

        @torch.compile(backend=cnt, fullgraph=True)
        def fn(x):
            return ScaleGradient.apply(x)

        x = torch.randn(3, requires_grad=True)
        result = fn(x)

        self.assertEqual(result, ScaleGradient.apply(x))
        self.assertEqual(cnt.frame_count, 1)

    def test_classmethod(self):
        class Shake(torch.autograd.Function):
            @classmethod
            def forward(cls, ctx, foo):
                return foo + foo

            @classmethod
            def backward(cls, ctx, grad_output):
                return grad_output

        def f(x):
            return Shake.apply(x)

        x = torch.randn(4, 4, 4, 4, requires_grad=True)
        opt_m = torch.compile(backend="eager")(f)
        opt_m(x)

    def test_function_context_save_and_mark(self):
        mod = ModuleWithGradFunc(ContextSaveAndMark)
        args, kwargs = ([torch.rand([1])], {})
        before = mod(*args, **kwargs)

        torch._dynamo.reset()
        compiled_model = torch.compile(mod, backend="eager")
        after = compiled_model(*args, **kwargs)
        self.assertEqual(before, after)

    def test_function_context_mark_and_save(self):
        mod = ModuleWithGradFunc(ContextMarkAndSave)
        args, kwargs = ([torch.rand([1])], {})
        before = mod(*args, **kwargs)

        torch._dynamo.reset()
        compiled_model = torch.compile(mod, backend="eager")
        after = compiled_model(*args, **kwargs)
        self.assertEqual(before, after)

    def test_mark_dirty_discarded_output_grad(self):
        class TimesThreeInplace(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(3)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 3

        def fn(w):
            y = torch.ones(2, 2) @ w
            TimesThreeInplace.apply(y)
            return y.sum()

        def grad_for(compiled):
            torch._dynamo.reset()
            w = torch.eye(2, requires_grad=True)
            f = torch.compile(fn, backend="eager", fullgraph=True) if compiled else fn
            loss = f(w)
            loss.backward()
            return loss.detach(), w.grad

        eager_loss, eager_grad = grad_for(compiled=False)
        compiled_loss, compiled_grad = grad_for(compiled=True)

        self.assertEqual(eager_loss, compiled_loss)
        self.assertEqual(eager_grad, compiled_grad)

    def test_mark_dirty_on_view_preserves_error(self):
        class Inplace(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad

        def fn(x):
            return Inplace.apply(x.view_as(x))

        x = torch.randn(2, requires_grad=True)
        with self.assertRaisesRegex(
            RuntimeError, "a view of a leaf Variable that requires grad"
        ):
            torch.compile(fn, backend="eager")(x)

        torch._dynamo.reset()
        x = torch.randn(2, requires_grad=True)
        with self.assertRaisesRegex(
            RuntimeError, "a view of a leaf Variable that requires grad"
        ):
            torch.compile(fn, backend="eager", fullgraph=True)(x)

    def test_multi_output(self):
        torch._dynamo.utils.counters.clear()
        cnt = torch._dynamo.testing.CompileCounter()

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone(), x.clone()

            @staticmethod
            def backward(ctx, grad1, grad2):
                return grad1 + grad2

        @torch.compile(backend=cnt, fullgraph=True)
        def f(x):
            return Foo.apply(x)

        x = torch.randn(3, requires_grad=True)
        result = f(x)

        self.assertEqual(result, Foo.apply(x))
        self.assertEqual(cnt.frame_count, 1)

    def test_data_in_bwd(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input_tensor):
                ctx.save_for_backward(input_tensor)
                return input_tensor * 3

            @staticmethod
            def backward(ctx, grad_output):
                (input_tensor,) = ctx.saved_tensors

                # Modify gradient using .data (Dangerous: Breaks autograd tracking!)
                modified_grad = grad_output.clone()
                modified_grad.data[input_tensor.data < 0] = (
                    0  # Zero-out gradients for negative inputs
                )

                return modified_grad * 3

        @torch.compile(backend="aot_eager", fullgraph=True)
        def fn(x):
            return Foo.apply(x)

        x = torch.tensor([-2.0, 1.0, 3.0], requires_grad=True)
        res = fn(x)
        self.assertEqual(res, Foo.apply(x))
        res.sum().backward()
        self.assertEqual(x.grad, torch.tensor([0.0, 3.0, 3.0]))

    def test_requires_grad_in_bwd(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.sin(x + 1)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                if grad_output.requires_grad:
                    return grad_output * torch.sin(
                        x + 1
                    )  # Wrong gradient, we should never get here.
                else:
                    return grad_output * torch.cos(x + 1)

        @torch.compile(backend="aot_eager", fullgraph=True)
        def fn(x):
            return Foo.apply(x)

        x = torch.tensor([1.0, 3.0], requires_grad=True)
        res = fn(x)
        self.assertEqual(res, Foo.apply(x))
        res.sum().backward()
        self.assertEqual(x.grad, torch.cos(x + 1))

    def test_amp_custom_fwd_bwd(self):
        torch._dynamo.utils.counters.clear()
        cnt = torch._dynamo.testing.CompileCounter()

        class MyMM(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type=device_type)
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a.mm(b)

            @staticmethod
            @torch.amp.custom_bwd(device_type=device_type)
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                return grad.mm(b.t()), a.t().mm(grad)

        @torch.compile(backend=cnt, fullgraph=True)
        def fn(a, b):
            return MyMM.apply(a, b)

        a = torch.randn([64, 64], dtype=torch.float32, requires_grad=True)
        b = torch.randn([64, 64], dtype=torch.float32, requires_grad=True)
        res = fn(a, b)
        grad = torch.randn_like(res)
        res.backward(grad)

        self.assertEqual(res, MyMM.apply(a, b))
        self.assertEqual(cnt.frame_count, 1)

    def test_set_materialize_grads_no_graph_break(self):
        class MulY(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(True)
                return x * 3

            @staticmethod
            def backward(ctx, grad_out):
                return grad_out * 3

        @torch.compile(backend="eager", fullgraph=True)
        def f(x):
            return MulY.apply(x)

        x = torch.tensor(2.0, requires_grad=True)
        result = f(x)
        result.sum().backward()
        self.assertEqual(result, MulY.apply(x))
        self.assertEqual(x.grad, 3.0)

    def test_user_defined_object_as_input(self):
        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")

        @dataclass
        class Weird:
            x: int
            b: torch.Tensor
            c: torch.Tensor

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x: torch.Tensor, weird: Weird, z: torch.Tensor):
                ctx.save_for_backward(weird.b, weird.c)
                return weird.b * weird.c * x.clone()

            @staticmethod
            def backward(ctx, grad):
                b, c = ctx.saved_tensors
                return grad * b * c, None, grad * 2

        @torch.compile(backend=cnt, fullgraph=True)
        def f(x, weird, z):
            return Foo.apply(x, weird, z)

        x = torch.tensor(2.0, requires_grad=True)
        weird = Weird(1.2, torch.tensor(2.5, requires_grad=True), torch.tensor(3.5))
        z = torch.tensor(3.0, requires_grad=True)

        result = f(x, weird, z)
        result.sum().backward()

        self.assertEqual(result, Foo.apply(x, weird, z))
        self.assertEqual(x.grad, 2.5 * 3.5)
        self.assertEqual(z.grad, 2.0)
        self.assertEqual(weird.b.grad, None)

        # check Dynamo captured graph is correct!
        actual_graph = torch._dynamo.testing.normalize_gm(
            cnt.graphs[0].print_readable(print_output=False)
        )
        self.assertExpectedInline(
            actual_graph,
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_weird_b: "f32[]", L_weird_c: "f32[]", L_x_: "f32[]", L_z_: "f32[]"):
        l_weird_b = L_weird_b
        l_weird_c = L_weird_c
        l_x_ = L_x_
        l_z_ = L_z_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_weird_b, l_weird_c, l_x_, l_z_, non_differentiable_idx = [], saved_for_backward_idx = [0, 1]);  fwd_body_0 = bwd_body_0 = l_weird_b = l_weird_c = l_x_ = l_z_ = None
        getitem: "f32[]" = autograd_function_apply[0];  autograd_function_apply = None
        return (getitem,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, grad: "f32[]", l_weird_b: "f32[]", l_weird_c: "f32[]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[]" = grad * l_weird_b;  l_weird_b = None
            mul_1: "f32[]" = mul * l_weird_c;  mul = l_weird_c = None
            mul_2: "f32[]" = grad * 2;  grad = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (None, None, mul_1, mul_2)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_weird_b: "f32[]", l_weird_c: "f32[]", l_x_: "f32[]", l_z_: "f32[]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[]" = l_weird_b * l_weird_c
            clone: "f32[]" = l_x_.clone();  l_x_ = None
            outs: "f32[]" = mul * clone;  mul = clone = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((outs,), (l_weird_b, l_weird_c))
""",
        )

    def test_tensor_list_as_input(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, tl):
                ctx.save_for_backward(tl[0], tl[1])
                return x.clone() * (tl[0] + tl[1])

            @staticmethod
            def backward(ctx, grad):
                tl0, tl1 = ctx.saved_tensors
                return grad * (tl0 + tl1), None

        @torch.compile(backend="aot_eager", fullgraph=True)
        def f(x, tl):
            return Foo.apply(x, tl)

        x = torch.tensor(2.0, requires_grad=True)
        tl = [
            torch.tensor(3.0, requires_grad=True),
            torch.tensor(4.0, requires_grad=True),
        ]

        result = f(x, tl)
        result.sum().backward()

        self.assertEqual(result, Foo.apply(x, tl))
        self.assertEqual(x.grad, 7.0)
        self.assertEqual(tl[0].grad, None)
        self.assertEqual(tl[1].grad, None)

    def test_multiple_different_non_tensor_inputs(self):
        @dataclass
        class Weird:
            x: int
            b: torch.Tensor
            c: torch.Tensor

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weird, z, tl):
                ctx.save_for_backward(weird.b, weird.c, tl[0], tl[1])
                return x.clone() * weird.b * weird.c * tl[0]

            @staticmethod
            def backward(ctx, grad):
                b, c, tl0, _ = ctx.saved_tensors
                return grad * b * c * tl0, None, grad * 2, None

        @torch.compile(backend="aot_eager", fullgraph=True)
        def f(x, weird, z, tl):
            return Foo.apply(x, weird, z, tl)

        x = torch.tensor(2.0, requires_grad=True)
        weird = Weird(
            1.2,
            torch.tensor(2.5, requires_grad=True),
            torch.tensor(3.5, requires_grad=True),
        )
        z = torch.tensor(3.0, requires_grad=True)
        tl = [
            torch.tensor(0.5, requires_grad=True),
            torch.tensor(0.6, requires_grad=True),
        ]

        result = f(x, weird, z, tl)
        result.sum().backward()

        self.assertEqual(result, Foo.apply(x, weird, z, tl))
        self.assertEqual(x.grad, 2.5 * 3.5 * 0.5)
        self.assertEqual(z.grad, 2.0)
        self.assertEqual(weird.b.grad, None)
        self.assertEqual(weird.c.grad, None)
        self.assertEqual(tl[0].grad, None)
        self.assertEqual(tl[1].grad, None)

    def test_backward_returns_none_for_tensor_input(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(y)
                return x.clone() * y

            @staticmethod
            def backward(ctx, grad):
                (y,) = ctx.saved_tensors
                return grad * y, None

        @torch.compile(backend="aot_eager", fullgraph=True)
        def f(x, y):
            return Foo.apply(x, y)

        x = torch.tensor(2.0, requires_grad=True)
        y = torch.tensor(3.0, requires_grad=True)

        result = f(x, y)
        result.sum().backward()

        self.assertEqual(result, Foo.apply(x, y))
        self.assertEqual(x.grad, 3.0)
        self.assertEqual(y.grad, None)

    def test_function_with_bound_free_variable(self):
        class LowerBound(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inputs, bound):
                ctx.save_for_backward(inputs, inputs.new_ones(1) * bound)
                return inputs.clamp(min=bound)

            @staticmethod
            def backward(ctx, grad_output):
                inputs, bound = ctx.saved_tensors
                return (inputs >= bound) * grad_output, None

        class MyMod(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.gamma = torch.nn.Parameter(torch.rand([4, 128, 32, 32]))

            def forward(self, x):
                gamma = LowerBound.apply(self.gamma, 1)
                return x + gamma

        mod = MyMod()
        args, kwargs = ([torch.rand([4, 128, 32, 32])], {})
        before = mod(*args, **kwargs)

        compiled_model = torch.compile(mod, backend="eager")
        after = compiled_model(*args, **kwargs)
        self.assertEqual(before, after)

    def test_forward_returns_constant(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x, [1, 2, 3]  # Tensor and list of integers

            @staticmethod
            def backward(ctx, grad_output1, grad_output2):
                return grad_output1

        @torch.compile(backend="aot_eager", fullgraph=True)
        def f(x):
            return Foo.apply(x)

        x = torch.tensor(2.0, requires_grad=True)
        result = f(x)
        result[0].sum().backward()

        self.assertEqual(result, Foo.apply(x))

    # I pulled all of these test cases from test_autograd.py
    # In the future, we should make the Dynamo test suite actually
    # run on test_autograd.py (it's disabled right now) and delete these.
    def test_smoke_from_test_autograd(self):
        def mult1(x):
            return x.prod(dim=-1).prod(dim=-1)

        class Mult(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = mult1(x)
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                x, y = ctx.saved_tensors
                return (grad_output * y)[:, None, None] / x

        mult2 = Mult.apply

        class Double(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x**2
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                x, _ = ctx.saved_tensors
                return grad_output * 2 * x

        # this is equivalent, but uses the output of .forward() in .backward()
        class Double2(Double):
            @staticmethod
            def backward(ctx, grad_output):
                x, y = ctx.saved_tensors
                return grad_output * 2 * y / x

        double = Double.apply
        double2 = Double2.apply

        class Identity(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a, a + b

            @staticmethod
            def backward(ctx, grad_a, grad_b):
                return grad_a + grad_b, grad_b

        class MyFunc2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp):
                return inp.clone()

            @staticmethod
            def backward(ctx, gO):
                return torch.tensor(float("nan")).expand(10, 10)

        def run_fn(a):
            out = MyFunc2.apply(a)
            return out.sum()

        class MyFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp):
                return inp.view_as(inp)

            @staticmethod
            def backward(ctx, grad):
                return grad

        class MyAdder(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                a.add_(b)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, grad):
                return grad, grad

        class InplaceMul(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                result = x.mul_(2)
                ctx.mark_dirty(result)
                return result

            @staticmethod
            def backward(ctx, grad_output):
                pass

            @staticmethod
            def jvp(ctx, x_t):
                if jvp_err:  # noqa: F821
                    return x_t
                else:
                    return x_t.mul_(2)

        class MyFn2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x + y, x

            @staticmethod
            def vjp(ctx, gO1, gO2):
                return gO1 + gO2, gO1

            @staticmethod
            def jvp(ctx, x_t, y_t):
                return x_t + y_t, fn(x_t)  # noqa: F821

        class MyFn3(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp, inplace):
                view = inp.clone()[:3]
                if inplace:
                    view += 2
                return view

            @staticmethod
            def backward(ctx, grad):
                return grad, None

        def test():
            x = torch.ones(2, 4, 4).requires_grad_()
            mult2(x)

            x = torch.tensor(2).double().requires_grad_()
            double(x)
            double2(x)

            x = torch.randn(5, 5, requires_grad=True)
            y = torch.randn(5, 5, requires_grad=True)
            Identity.apply(x, y)

            a = torch.rand(1, 2)
            b = torch.rand(1, requires_grad=True)
            MyFn.apply(a)

            a = torch.ones(2, requires_grad=True)
            b = torch.ones(2, requires_grad=True)
            c = MyAdder.apply(a.clone(), b)
            c.sum().backward()

            z = torch.tensor(1.0, requires_grad=True)
            x = z.clone()
            y = InplaceMul.apply(x)

            a = torch.tensor(1.0, dtype=torch.double, requires_grad=True)
            b = torch.tensor(1.0, dtype=torch.double, requires_grad=True)
            c = torch.tensor(1.0, dtype=torch.double)
            d = torch.tensor(1.0, dtype=torch.double)
            MyFn2.apply(a, b)
            MyFn2.apply(c, d)

            base = torch.rand(10, requires_grad=True)
            MyFn3.apply(base, False)

        test()
        opt_test = torch.compile(test, backend="eager")
        opt_test()

    def test_tensor_subclass_intermediary_input(self):
        class FooTensor(torch.Tensor):
            @staticmethod
            def __new__(cls, data, config, scale):
                self = torch.Tensor._make_wrapper_subclass(
                    cls,
                    config[0],
                    strides=config[1],
                    storage_offset=config[2],
                    dtype=config[3],
                    layout=config[4],
                    requires_grad=config[5],
                    device=data.device,
                )
                self._data = data
                self._config = config
                self._scale = scale
                return self

            def __repr__(self):
                return "FooTensor"

            def __tensor_flatten__(self):
                return ("_data", "_scale"), (self._config,)

            @staticmethod
            def __tensor_unflatten__(tensors, metadatas, outer_size, outer_stride):
                return FooTensor(tensors["_data"], metadatas[0], tensors["_scale"])

            @classmethod
            def __torch_dispatch__(cls, func, types, args, kwargs=None):
                # handling clone and view is so dynamo fakefication passes, it's not
                # intended to be handling user code
                if func == torch.ops.aten.clone.default:
                    return FooTensor(
                        args[0]._data.clone(), args[0]._config, args[0]._scale
                    )
                elif func == torch.ops.aten.view.default:
                    new_data = args[0]._data.view(*args[1:])
                    return FooTensor(new_data, args[0]._config, args[0]._scale)

                raise NotImplementedError

        class foo_autograd_fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                # access some data from `x`, where `x` is a tensor subclass
                x2 = x._data + 1.0
                # create and return a tensor subclass from within a torch.autograd.Function
                x3 = FooTensor(x2, x._config, x._scale)
                return x3._data

            @staticmethod
            def backward(ctx, g):
                return g

        x_ref = torch.randn(4, 4).requires_grad_(True)
        x = copy.deepcopy(x_ref)
        scale = torch.tensor(1.0)
        # Weird that this is needed, but not having this breaks a lot of things
        torch._dynamo.allow_in_graph(FooTensor)

        def foo(x, scale):
            config = (
                x.size(),
                x.stride(),
                x.storage_offset(),
                x.dtype,
                x.layout,
                x.requires_grad,
            )
            x = FooTensor(x, config, scale)
            x = foo_autograd_fn.apply(x)
            return x

        y_ref = foo(x_ref, scale)
        y_ref.sum().backward()

        foo_opt = torch.compile(foo, backend="eager")
        y = foo_opt(x, scale)
        y.sum().backward()

        self.assertEqual(y, y_ref)
        self.assertEqual(x.grad, x_ref.grad)

    def test_assert_is_contiguous_after_matmul(self):
        class LinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                y = x.matmul(weight.t())
                return y

            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_x = grad_output.matmul(weight)
                assert grad_x.is_contiguous()  # noqa: S101
                grad_weight = grad_output.transpose(0, 1).matmul(x)

                return grad_x, grad_weight

        def fn(x, weight):
            return LinearFunction.apply(x, weight)

        x1 = torch.randn(5, 3, requires_grad=True)
        x2 = copy.deepcopy(x1)
        W1 = torch.randn(4, 3, requires_grad=True)
        W2 = copy.deepcopy(W1)

        y1 = fn(x1, W1)
        y1.sum().backward()

        cnts = torch._dynamo.testing.CompileCounter()
        opt_fn = torch.compile(fn, backend=cnts)
        y2 = opt_fn(x2, W2)
        y2.sum().backward()

        self.assertEqual(y1, y2)
        self.assertEqual(x1.grad, x2.grad)
        self.assertEqual(W1.grad, W2.grad)
        self.assertEqual(cnts.frame_count, 1)

    def test_assert_is_contiguous_on_grad_output_directly(self):
        class LinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                y = x.matmul(weight.t())
                return y

            @staticmethod
            def backward(ctx, grad_output):
                assert grad_output.is_contiguous()  # noqa: S101
                x, weight = ctx.saved_tensors
                grad_x = grad_output.matmul(weight)
                grad_weight = grad_output.transpose(0, 1).matmul(x)

                return grad_x, grad_weight

        def fn(x, weight):
            return LinearFunction.apply(x, weight)

        x1 = torch.randn(5, 3, requires_grad=True)
        x2 = copy.deepcopy(x1)
        W1 = torch.randn(4, 3, requires_grad=True)
        W2 = copy.deepcopy(W1)

        y1 = fn(x1, W1)
        y1.backward(y1.clone().detach().requires_grad_(True))

        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        opt_fn = torch.compile(fn, backend=cnt)
        y2 = opt_fn(x2, W2)
        y2.backward(y2.clone().detach().requires_grad_(True))

        self.assertEqual(y1, y2)
        self.assertEqual(x1.grad, x2.grad)
        self.assertEqual(W1.grad, W2.grad)

        # Check the inserted .contiguous() call is there!
        actual_graph = torch._dynamo.testing.normalize_gm(
            cnt.graphs[0].print_readable(print_output=False)
        )
        self.assertExpectedInline(
            actual_graph,
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_weight_: "f32[4, 3]", L_x_: "f32[5, 3]"):
        l_weight_ = L_weight_
        l_x_ = L_x_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_weight_, l_x_, non_differentiable_idx = [], saved_for_backward_idx = [0, 1]);  fwd_body_0 = bwd_body_0 = l_weight_ = l_x_ = None
        getitem: "f32[5, 4]" = autograd_function_apply[0];  autograd_function_apply = None
        return (getitem,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, y: "f32[5, 4]", l_weight_: "f32[4, 3]", l_x_: "f32[5, 3]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            contiguous: "f32[5, 4]" = y.contiguous();  y = None

            grad_x: "f32[5, 3]" = contiguous.matmul(l_weight_);  l_weight_ = None

            transpose: "f32[4, 5]" = contiguous.transpose(0, 1);  contiguous = None
            grad_weight: "f32[4, 3]" = transpose.matmul(l_x_);  transpose = l_x_ = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (grad_weight, grad_x)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_weight_: "f32[4, 3]", l_x_: "f32[5, 3]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            t: "f32[3, 4]" = l_weight_.t()
            y: "f32[5, 4]" = l_x_.matmul(t);  t = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((y,), (l_weight_, l_x_))
""",
        )

    def test_smuggle_symint_issue_111031(self):
        from torch.autograd import Function

        class Foo(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x0 = x.size(0)
                return x * 2

            @staticmethod
            def backward(ctx, grad_out):
                return grad_out * ctx.x0

        cnts = torch._dynamo.testing.CompileCounter()

        @torch.compile(backend=cnts, fullgraph=True, dynamic=True)
        def foo(x):
            return Foo.apply(x)

        foo(torch.randn(2, requires_grad=True))
        self.assertEqual(cnts.frame_count, 1)

    def test_needs_input_grad(self):
        cnt = torch._dynamo.testing.CompileCounter()

        class NeedsInputGradFunc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, foo):
                result = foo + foo
                ctx.save_for_backward(result)
                return result

            @staticmethod
            @torch.compile(backend=cnt, fullgraph=True)
            def backward(ctx, grad_output):
                (result,) = ctx.saved_tensors
                if ctx.needs_input_grad[0]:
                    return grad_output * result.sin()
                return None

        x = torch.randn(10, requires_grad=True)
        NeedsInputGradFunc.apply(x).sum().backward()
        self.assertEqual(x.grad.shape, x.shape)
        self.assertEqual(cnt.frame_count, 1)
        self.assertEqual(cnt.op_count, 2)

    def test_needs_input_grad_setter_roundtrip(self):
        # When backward is traced by Dynamo, a store to ctx.needs_input_grad
        # must be honored on subsequent reads. Regression test for the read
        # short-circuiting to the construction-time value and dropping the store.
        sentinel = ([False, True],)
        seen = {}

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x + y

            @staticmethod
            @torch.compile(backend="eager", fullgraph=True)
            def backward(ctx, grad_output):
                seen["original"] = ctx.needs_input_grad
                ctx.needs_input_grad = sentinel
                seen["after_set"] = ctx.needs_input_grad
                ctx.needs_input_grad = None
                seen["after_none"] = ctx.needs_input_grad
                ctx.needs_input_grad = seen["original"]
                seen["after_restore"] = ctx.needs_input_grad
                return grad_output, None

        x = torch.randn(3, requires_grad=True)
        Foo.apply(x, torch.randn(3)).sum().backward()
        self.assertEqual(seen["original"], (True, False))
        self.assertIs(seen["after_set"], sentinel)
        self.assertIsNone(seen["after_none"])
        self.assertIs(seen["after_restore"], seen["original"])
        self.assertEqual(x.grad, torch.ones_like(x))

    def test_repeated_save_for_backward_calls(self):
        from torch.autograd import Function

        class Foo(Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x)
                ctx.save_for_backward(x, y)
                return x * y

            @staticmethod
            def backward(ctx, grad_out):
                x, y = ctx.saved_tensors
                return grad_out * x, grad_out * y

        cnts = torch._dynamo.testing.CompileCounter()

        def foo(x, y):
            return Foo.apply(x, y)

        x_ref = torch.randn(2, requires_grad=True)
        y_ref = torch.randn(2, requires_grad=True)
        x_test = x_ref.detach().clone().requires_grad_()
        y_test = y_ref.detach().clone().requires_grad_()

        out_ref = foo(x_ref, y_ref)
        out_ref.sum().backward()

        out_test = torch.compile(foo, backend=cnts)(x_test, y_test)
        out_test.sum().backward()

        self.assertEqual(cnts.frame_count, 1)
        self.assertEqual(out_ref, out_test)
        self.assertEqual(x_ref.grad, x_test.grad)
        self.assertEqual(y_ref.grad, y_test.grad)

    def test_smuggle_tensor_and_complex_structures(self):
        from torch.autograd import Function

        class Foo(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x0 = x
                ctx.x1 = [1, 2, 3]
                return x * 2

            @staticmethod
            def backward(ctx, grad_out):
                x0mul = grad_out * ctx.x0
                for i in ctx.x1:
                    x0mul = (x0mul * i) + x0mul
                return x0mul

        cnts = torch._dynamo.testing.CompileCounter()

        @torch.compile(backend=cnts, fullgraph=True, dynamic=True)
        def foo(x):
            return Foo.apply(x)

        foo(torch.randn(2, requires_grad=True)).sum().backward()
        self.assertEqual(cnts.frame_count, 1)

    def test_int_output(self):
        from torch.autograd import Function

        class MyFunction(Function):
            @staticmethod
            def forward(ctx, x, y):
                out1 = x.sin()
                out2 = out1.to(dtype=torch.int)
                return out1, out2

            @staticmethod
            def backward(ctx, grad1, grad2):
                return grad1.cos(), grad1 * 0.0

        @torch.compile(backend="aot_eager", fullgraph=True)
        def fn(x, y):
            return MyFunction.apply(x, y)

        x = torch.tensor(10.0, requires_grad=True)
        y = torch.tensor(20.0, requires_grad=True)
        ref1, ref2 = MyFunction.apply(x, y)
        res1, res2 = fn(x, y)
        self.assertEqual(ref1, res1)
        self.assertEqual(ref2, res2)
        # Ensure out1 requires gradients, out2 does not.
        self.assertTrue(ref1.requires_grad)
        self.assertTrue(res1.requires_grad)
        self.assertFalse(ref2.requires_grad)
        self.assertFalse(res2.requires_grad)

    def test_mark_non_differentiable(self):
        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        from torch.autograd import Function

        class MyFunction(Function):
            @staticmethod
            def forward(ctx, x, y):
                out1 = x.sin()
                out2 = y * 2
                ctx.mark_non_differentiable(out2)
                return out1, out2

            @staticmethod
            def backward(ctx, grad1, grad2):
                return grad1.cos(), grad2 * 0.0

        @torch.compile(backend=cnt, fullgraph=True)
        def fn(x, y):
            return MyFunction.apply(x, y)

        x = torch.tensor(10.0, requires_grad=True)
        y = torch.tensor(20.0, requires_grad=True)
        ref1, ref2 = MyFunction.apply(x, y)
        res1, res2 = fn(x, y)
        self.assertEqual(ref1, res1)
        self.assertEqual(ref2, res2)
        # Ensure out1 requires gradients, out2 does not.
        self.assertTrue(ref1.requires_grad)
        self.assertTrue(res1.requires_grad)
        self.assertFalse(ref2.requires_grad)
        self.assertFalse(res2.requires_grad)
        res1.sum().backward()

        # check Dynamo captured graph is correct!
        actual_graph = torch._dynamo.testing.normalize_gm(
            cnt.graphs[0].print_readable(print_output=False)
        )
        self.assertExpectedInline(
            actual_graph,
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[]", L_y_: "f32[]"):
        l_x_ = L_x_
        l_y_ = L_y_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_x_, l_y_, non_differentiable_idx = [1], saved_for_backward_idx = []);  fwd_body_0 = bwd_body_0 = l_x_ = l_y_ = None
        getitem: "f32[]" = autograd_function_apply[0]
        getitem_1: "f32[]" = autograd_function_apply[1];  autograd_function_apply = None
        return (getitem, getitem_1)

    class bwd_body_0(torch.nn.Module):
        def forward(self, grad1: "f32[]", grad2: "f32[]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            cos: "f32[]" = grad1.cos();  grad1 = None
            mul: "f32[]" = grad2 * 0.0;  grad2 = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (cos, mul)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_x_: "f32[]", l_y_: "f32[]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            out1: "f32[]" = l_x_.sin();  l_x_ = None

            out2: "f32[]" = l_y_ * 2;  l_y_ = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((out1, out2), ())
""",
        )

    def test_mark_multi_output_non_differentiable(self):
        from torch.autograd import Function

        class MyFunction(Function):
            @staticmethod
            def forward(ctx, x, y, z):
                out1 = x.sin()
                out2 = y * 2
                out3 = z + 3
                ctx.mark_non_differentiable(out2, out3)
                return out1, out2, out3

            @staticmethod
            def backward(ctx, grad1, grad2, grad3):
                return grad1.cos(), grad2, grad3

        @torch.compile(backend="aot_eager", fullgraph=True)
        def fn(x, y, z):
            return MyFunction.apply(x, y, z)

        x = torch.tensor(10.0, requires_grad=True)
        y = torch.tensor(20.0, requires_grad=True)
        z = torch.tensor(30.0, requires_grad=True)
        ref1, ref2, ref3 = MyFunction.apply(x, y, z)
        res1, res2, res3 = fn(x, y, z)
        self.assertEqual(ref1, res1)
        self.assertEqual(ref2, res2)
        self.assertEqual(ref3, res3)
        # Ensure out1 requires gradients, out2 does not.
        self.assertTrue(ref1.requires_grad)
        self.assertTrue(res1.requires_grad)
        self.assertFalse(ref2.requires_grad)
        self.assertFalse(res2.requires_grad)
        self.assertFalse(ref3.requires_grad)
        self.assertFalse(res3.requires_grad)
        res1.sum().backward()

    def test_default_values(self):
        from torch.autograd import Function

        class Foo(Function):
            @staticmethod
            def forward(ctx, x, alpha=0.99):
                return x

            @staticmethod
            def backward(ctx, grad_out):
                return grad_out

        @torch.compile(backend="eager")
        def foo(x):
            return Foo.apply(x)

        # Make sure guards for default values do not crash
        foo(torch.randn(2))
        foo(torch.randn(2, requires_grad=True))

    def test_fwd_no_grad(self):
        # autograd.Function.forward should be traced and called under no_grad mode.
        # torch.exp with out=... arguments don't support automatic differentiation,
        # so can't be traced/called under grad mode (throwing RuntimeError),
        # therefore this unit test ensures fwd is under no_grad mode.
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inputs):
                torch.exp(inputs, out=inputs)
                return inputs

            @staticmethod
            def backward(ctx, grad_output):
                return None

        @torch.compile(backend="eager", fullgraph=True)
        def f(x):
            return Foo.apply(x)

        x1 = torch.randn(2, 3, requires_grad=True)
        x2 = x1.clone()
        self.assertEqual(f(x1), Foo.apply(x2))

    # https://github.com/pytorch/pytorch/issues/129963
    def test_fwd_propogation_correctness(self):
        class MyCube(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                result = x**3
                dx = 3 * x**2
                ctx.save_for_backward(x, dx)
                return result, dx

            @staticmethod
            def backward(ctx, grad_output, grad_dx):
                x, dx = ctx.saved_tensors
                result = grad_output * dx + grad_dx * 6 * x
                # Intentionally return a wrong value to test if the backward is triggered twice.
                # Since if the first MyCube.apply returns values w/o requires_grad=True,
                # this backward would be only triggered once (the first MyCube.apply call),
                # as the second MyCube.apply is inlined by Dynamo and the corresponding backward
                # would be generated by autograd engine.
                return result * 0.5

        @torch.compile(backend="aot_eager", fullgraph=True)
        def fn(x):
            x, _ = MyCube.apply(x)
            x, _ = MyCube.apply(x)
            return x

        inp = torch.ones(2, requires_grad=True)
        out = fn(inp)
        out.sum().backward()
        self.assertEqual(out, inp**3)
        self.assertEqual(inp.grad, torch.tensor([2.25, 2.25]))

    def test_tuple_arg(self):
        cnt = torch._dynamo.testing.CompileCounter()

        class TupleArgFunc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, shape):
                ctx.save_for_backward(torch.randn(shape))
                return x + 1

            @staticmethod
            def backward(ctx, grad_output):
                (result,) = ctx.saved_tensors
                return result, None

        @torch.compile(backend=cnt, fullgraph=True)
        def fn():
            return TupleArgFunc.apply(x, shape)

        shape = (10, 10)
        x = torch.randn(shape, requires_grad=True)
        out = fn()
        out.sum().backward()
        self.assertEqual(out, x + 1)
        self.assertEqual(x.grad.shape, shape)
        self.assertEqual(cnt.frame_count, 1)
        self.assertEqual(cnt.op_count, 2)

    @requires_gpu
    def test_triton_kernel_basic(self):
        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                output = torch.zeros_like(x)
                n_elements = output.numel()
                grid = lambda meta: (  # noqa: E731
                    triton.cdiv(n_elements, meta["BLOCK_SIZE"]),
                )
                add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=16)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                x, y = ctx.saved_tensors
                return x * grad_output, y * grad_output

        @torch.compile(fullgraph=True, backend="inductor")
        def f(x, y):
            z = Add.apply(x, y)
            return z

        x = torch.randn(10, device=device_type, requires_grad=True)
        y = torch.randn(10, device=device_type, requires_grad=True)
        z = f(x, y)
        loss = z.sum()
        loss.backward()
        self.assertEqual(x + y, z)

    @requires_gpu
    def test_triton_kernel_multiple_out(self):
        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                ctx.t1 = x
                ctx.t2 = y
                output = torch.zeros_like(x)
                n_elements = output.numel()
                grid = lambda meta: (  # noqa: E731
                    triton.cdiv(n_elements, meta["BLOCK_SIZE"]),
                )
                add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=16)
                return output, x

            @staticmethod
            def backward(ctx, grad_output, old_x):
                x, y = ctx.saved_tensors
                x1 = ctx.t1
                y1 = ctx.t2
                return old_x * x * x1 * grad_output, y * y1 * grad_output

        @torch.compile(fullgraph=True, backend="inductor")
        def f(x, y):
            z = Add.apply(x, y)
            return z

        x = torch.randn(10, device=device_type, requires_grad=True)
        y = torch.randn(10, device=device_type, requires_grad=True)
        z, _ = f(x, y)
        loss = z.sum()
        loss.backward()
        self.assertEqual(x + y, z)

    @requires_gpu
    def test_triton_kernel_backward_mutation_with_aliased_output(self):
        """Test autograd function where backward triton kernel mutates a buffer
        that is also returned as a forward output aliasing an input.

        This triggers a specific partitioner case where a forward output depends
        on backward nodes (the mutation) but should be replaced with the original
        input.
        """
        import triton.language as tl

        @triton.jit
        def mul_and_mutate_kernel(
            grad_out_ptr,
            x_ptr,
            grad_x_ptr,
            buffer_ptr,
            n_elements,
            BLOCK_SIZE: tl.constexpr,
        ):
            pid = tl.program_id(0)
            offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            mask = offsets < n_elements
            grad_out = tl.load(grad_out_ptr + offsets, mask=mask)
            tl.store(grad_x_ptr + offsets, grad_out, mask=mask)
            buf = tl.load(buffer_ptr + offsets, mask=mask)
            tl.store(buffer_ptr + offsets, buf + grad_out, mask=mask)

        class TritonAddWithBuffer(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                n_elements = x.numel()
                out = torch.empty_like(x)
                buffer = x

                grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
                add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=1024)

                ctx.save_for_backward(x, buffer)
                ctx.n_elements = n_elements
                return out, buffer

            @staticmethod
            def backward(ctx, grad_out, grad_buffer):
                x, buffer = ctx.saved_tensors
                n_elements = ctx.n_elements
                grad_x = torch.empty_like(x)

                grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
                mul_and_mutate_kernel[grid](
                    grad_out, x, grad_x, buffer, n_elements, BLOCK_SIZE=1024
                )

                return grad_x, grad_x.clone()

        @torch.compile(backend="aot_eager")
        def compiled_f(x, y):
            return TritonAddWithBuffer.apply(x, y)

        x = torch.randn(1024, device=device_type, requires_grad=False)
        y = torch.randn(1024, device=device_type, requires_grad=True)

        out_compiled, buffer_compiled = compiled_f(x, y)
        loss_compiled = out_compiled.sum()
        loss_compiled.backward()

    @requires_gpu
    def test_triton_kernel_backward_readonly_passthrough_output(self):
        """Test autograd function where backward triton kernel takes a read-only
        tensor (e.g. seq_offsets) that is also a forward output.

        The functional wrapper for capture_triton returns all kwargs as outputs
        including read-only ones. When the wrapper is backward-only, a getitem
        extracting the read-only tensor is invalid in the forward graph but still
        listed as a forward output. The partitioner must replace it with the
        original input node.
        """
        import triton.language as tl

        @triton.jit
        def bwd_kernel(
            grad_out_ptr,
            offsets_ptr,
            grad_x_ptr,
            n_elements,
            BLOCK_SIZE: tl.constexpr,
        ):
            pid = tl.program_id(0)
            block_start = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            mask = block_start < n_elements
            grad_out = tl.load(grad_out_ptr + block_start, mask=mask)
            # Read offsets (read-only, not written back)
            _offsets_val = tl.load(offsets_ptr + 0)
            tl.store(grad_x_ptr + block_start, grad_out, mask=mask)

        class FnWithReadOnlyBwdInput(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, offsets):
                ctx.save_for_backward(offsets)
                ctx.n_elements = x.numel()
                return x.clone(), offsets

            @staticmethod
            def backward(ctx, grad_out, grad_offsets):
                (offsets,) = ctx.saved_tensors
                n_elements = ctx.n_elements
                grad_x = torch.empty_like(grad_out)

                grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
                bwd_kernel[grid](grad_out, offsets, grad_x, n_elements, BLOCK_SIZE=1024)

                return grad_x, None

        @torch.compile(backend="aot_eager")
        def compiled_f(x, offsets):
            return FnWithReadOnlyBwdInput.apply(x, offsets)

        x = torch.randn(1024, device=device_type, requires_grad=True)
        offsets = torch.tensor([0, 512, 1024], device=device_type)

        out, offsets_out = compiled_f(x, offsets)
        loss = out.sum()
        loss.backward()
        self.assertIsNotNone(x.grad)

    def test_nonlocal_list_mutation_in_autograd_function(self):
        """Test that nonlocal list mutation in autograd.Function forward is handled correctly."""

        class SimpleAutogradFunc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, z):
                # Simple computation
                o = torch.matmul(x, x) @ x
                out = x.sin()
                # Mutate the nonlocal list
                z.append(out)
                return torch.cos(torch.sin(o)), torch.sin(x)

            @staticmethod
            def backward(ctx, grad_output1, grad_output2):
                # Simple backward
                return grad_output1 + grad_output2, None

        def fn(x):
            z = []

            outs = SimpleAutogradFunc.apply(x, z)
            out1 = outs[0]
            # Check that the extra output pytree handling is done properly
            out2 = outs[-1]

            return out1 + out2, z[0]

        x = torch.randn(4, 4, requires_grad=True)
        ref = fn(x)

        opt_fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(ref[0], res[0])
        self.assertEqual(ref[1], res[1])

    def test_rewired_bwd_output(self):
        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                a = torch.sin(x)
                b = torch.cos(y)
                result = a * b
                # Save input, output and intermediate to test all cases
                ctx.save_for_backward(a, x, result)
                return result, a + b

            @staticmethod
            def backward(ctx, grad_a, grad_b):
                (a, x, result) = ctx.saved_tensors
                return a * grad_b * 2 + x, result + grad_a * 3

        def fn(x, y):
            z = Add.apply(torch.cos(x), torch.cos(y))
            return z[0] + z[1]

        backend = AotEagerAndRecordGraphs()
        opt_fn = torch.compile(fn, fullgraph=True, backend=backend)
        x = torch.randn(8, 8, requires_grad=True)
        y = torch.randn(8, 8, requires_grad=True)
        x_clone = x.detach().clone().requires_grad_(True)
        y_clone = y.detach().clone().requires_grad_(True)
        torch._dynamo.mark_dynamic(x_clone, 0)
        torch._dynamo.mark_dynamic(y_clone, 0)

        ref = fn(x, y)
        res = opt_fn(x_clone, y_clone)

        ref.sum().backward()
        res.sum().backward()

        self.assertEqual(ref, res)
        self.assertEqual(x.grad, x_clone.grad)

        self.assertExpectedInline(
            torch._dynamo.testing.normalize_gm(
                backend.graphs[0].print_readable(print_output=False)
            ),
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[s17, 8]", s77: "Sym(s17)", L_y_: "f32[s17, 8]", s17: "Sym(s17)"):
        l_x_ = L_x_
        l_y_ = L_y_

        cos: "f32[s17, 8]" = torch.cos(l_x_);  l_x_ = None
        cos_1: "f32[s17, 8]" = torch.cos(l_y_);  l_y_ = None
        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, s77, cos, s17, cos_1, non_differentiable_idx = [], saved_for_backward_idx = [1, 2, 3]);  fwd_body_0 = bwd_body_0 = s77 = cos = s17 = cos_1 = None
        getitem: "f32[s17, 8]" = autograd_function_apply[0]
        getitem_1: "f32[s17, 8]" = autograd_function_apply[1];  autograd_function_apply = None

        add: "f32[s17, 8]" = getitem + getitem_1;  getitem = getitem_1 = None
        return (add,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, grad_a: "f32[s17, 8]", grad_b: "f32[s17, 8]", s17: "Sym(s17)", a: "f32[s17, 8]", arg: "f32[s17, 8]", result: "f32[s17, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[s17, 8]" = a * grad_b;  a = grad_b = None
            mul_1: "f32[s17, 8]" = mul * 2;  mul = None
            add: "f32[s17, 8]" = mul_1 + arg;  mul_1 = arg = None
            mul_2: "f32[s17, 8]" = grad_a * 3;  grad_a = None
            add_1: "f32[s17, 8]" = result + mul_2;  result = mul_2 = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (None, add, None, add_1)

    class fwd_body_0(torch.nn.Module):
        def forward(self, s77: "Sym(s17)", cos: "f32[s17, 8]", s17: "Sym(s17)", cos_1: "f32[s17, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            a: "f32[s17, 8]" = torch.sin(cos)

            b: "f32[s17, 8]" = torch.cos(cos_1);  cos_1 = None

            result: "f32[s17, 8]" = a * b

            out: "f32[s17, 8]" = a + b;  b = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((result, out), (s17, a, cos, result))
""",
        )

    def test_duplicate_input_accumulates_grad(self):
        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b + a + b

            @staticmethod
            def backward(ctx, grad_output):
                a, b = ctx.saved_tensors
                return grad_output * (b + 1), grad_output * (a + 1)

        def fn(x):
            return Foo.apply(x, x).sum()

        def check_fallback():
            x = torch.tensor([0.7, -1.3, 2.1, 0.05, -0.5], requires_grad=True)

            x_ref = x.detach().clone().requires_grad_(True)
            ref = fn(x_ref)
            ref.backward()

            torch._dynamo.reset()
            x_compiled = x.detach().clone().requires_grad_(True)
            res = torch.compile(fn, backend="eager", fullgraph=False)(x_compiled)
            res.backward()

            self.assertEqual(ref, res)
            self.assertEqual(x_ref.grad, x_compiled.grad)

        check_fallback()

        torch._dynamo.reset()
        x = torch.randn(5, requires_grad=True)
        with self.assertRaisesRegex(
            torch._dynamo.exc.Unsupported,
            "duplicate tensor input",
        ):
            out = torch.compile(fn, backend="eager", fullgraph=True)(x)
            out.backward()

    def test_udf_output(self):
        class Foo:
            def __init__(self, a, b):
                self.a = a
                self.b = b

        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                a = torch.sin(x)
                b = torch.cos(y)
                ctx.save_for_backward(a)
                return Foo(a, b), x * y

            @staticmethod
            def backward(ctx, grad_a, grad_b):
                (a,) = ctx.saved_tensors
                return grad_b * 2, a * grad_b * 3

        def fn(x, y):
            z = Add.apply(x, y)
            return z[0].a + z[0].b + z[1]

        backend = AotEagerAndRecordGraphs()
        opt_fn = torch.compile(fn, fullgraph=True, backend=backend)
        x = torch.randn(8, 8, requires_grad=True)
        y = torch.randn(8, 8, requires_grad=True)
        x_clone = x.detach().clone().requires_grad_(True)
        y_clone = y.detach().clone().requires_grad_(True)

        ref = fn(x, y)
        res = opt_fn(x_clone, y_clone)

        ref.sum().backward()
        res.sum().backward()

        self.assertEqual(ref, res)
        self.assertEqual(x.grad, x_clone.grad)

        self.assertExpectedInline(
            torch._dynamo.testing.normalize_gm(
                backend.graphs[0].print_readable(print_output=False)
            ),
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[8, 8]", L_y_: "f32[8, 8]"):
        l_x_ = L_x_
        l_y_ = L_y_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_x_, l_y_, non_differentiable_idx = [], saved_for_backward_idx = [0]);  fwd_body_0 = bwd_body_0 = l_x_ = l_y_ = None
        getitem: "f32[8, 8]" = autograd_function_apply[0]
        getitem_1: "f32[8, 8]" = autograd_function_apply[1]

        add: "f32[8, 8]" = getitem + getitem_1;  getitem = getitem_1 = None

        getitem_2: "f32[8, 8]" = autograd_function_apply[2];  autograd_function_apply = None

        add_1: "f32[8, 8]" = add + getitem_2;  add = getitem_2 = None
        return (add_1,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, unused_0, unused_1, grad_b: "f32[8, 8]", a: "f32[8, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[8, 8]" = grad_b * 2
            mul_1: "f32[8, 8]" = a * grad_b;  a = grad_b = None
            mul_2: "f32[8, 8]" = mul_1 * 3;  mul_1 = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (mul, mul_2)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_x_: "f32[8, 8]", l_y_: "f32[8, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            a: "f32[8, 8]" = torch.sin(l_x_)

            b: "f32[8, 8]" = torch.cos(l_y_)

            out: "f32[8, 8]" = l_x_ * l_y_;  l_x_ = l_y_ = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((a, b, out), (a,))
""",
        )

    def test_aliasing_output(self):
        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, grad_out):
                return grad_out

        def fn(x):
            y = Add.apply(x)
            if y is x:
                return torch.cos(y)
            return torch.sin(y)

        x = torch.randn(8, 8, requires_grad=True)

        ref = fn(x)
        backend = AotEagerAndRecordGraphs()
        opt_fn = torch.compile(fn, fullgraph=True, backend=backend)
        res = opt_fn(x)
        self.assertEqual(ref, res)

        # Must have `view_as`
        self.assertTrue(
            "view_as" in backend.graphs[0].print_readable(print_output=False)
        )
        self.assertExpectedInline(
            torch._dynamo.testing.normalize_gm(
                backend.graphs[0].print_readable(print_output=False)
            ),
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[8, 8]"):
        l_x_ = L_x_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_x_, non_differentiable_idx = [], saved_for_backward_idx = []);  fwd_body_0 = bwd_body_0 = l_x_ = None
        getitem: "f32[8, 8]" = autograd_function_apply[0];  autograd_function_apply = None

        sin: "f32[8, 8]" = torch.sin(getitem);  getitem = None
        return (sin,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, grad_out: "f32[8, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None
            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (grad_out,)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_x_: "f32[8, 8]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None
            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None

            view_as: "f32[8, 8]" = l_x_.view_as(l_x_);  l_x_ = None
            return ((view_as,), ())
""",
        )

    def test_nn_module_dataclasses_as_inputs(self):
        @dataclass
        class InputData:
            count: int
            values: torch.Tensor

        class Mod(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = 4
                self.b = torch.randn(4, 4)

        module = Mod()

        # Create input dataclass
        input_data = InputData(count=5, values=torch.randn(4, 4))

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(
                ctx,
                module: torch.nn.Module,
                input_data: InputData,
                x: torch.Tensor,
            ) -> tuple[torch.Tensor, torch.Tensor]:
                # Extract inputs
                count = input_data.count
                values = input_data.values

                output_tensor = module.a + module.b * count * values

                return output_tensor + x, values + x

            @staticmethod
            def backward(ctx, grad_output, output_data):
                return grad_output * 4, None, grad_output * 2

        def fn(input_data, x):
            y, y_data = Foo.apply(module, input_data, x)
            return x + y + y_data + y_data

        # Call the function
        x = torch.randn(4, 4, requires_grad=True)
        ref = fn(input_data, x)

        backend = AotEagerAndRecordGraphs()
        opt_fn = torch.compile(fn, fullgraph=True, backend=backend)
        res = opt_fn(input_data, x)
        self.assertEqual(ref, res)

        # Must have `view_as`
        self.assertExpectedInline(
            torch._dynamo.testing.normalize_gm(
                backend.graphs[0].print_readable(print_output=False)
            ),
            """\
class GraphModule(torch.nn.Module):
    def forward(self, L_input_data_values: "f32[4, 4]", L_module_b: "f32[4, 4]", L_x_: "f32[4, 4]"):
        l_input_data_values = L_input_data_values
        l_module_b = L_module_b
        l_x_ = L_x_

        bwd_body_0 = self.bwd_body_0
        fwd_body_0 = self.fwd_body_0
        autograd_function_apply = torch.ops.higher_order.autograd_function_apply(fwd_body_0, bwd_body_0, l_module_b, l_input_data_values, l_x_, non_differentiable_idx = [], saved_for_backward_idx = []);  fwd_body_0 = bwd_body_0 = l_module_b = l_input_data_values = None
        getitem: "f32[4, 4]" = autograd_function_apply[0]

        add: "f32[4, 4]" = l_x_ + getitem;  l_x_ = getitem = None

        getitem_1: "f32[4, 4]" = autograd_function_apply[1];  autograd_function_apply = None

        add_1: "f32[4, 4]" = add + getitem_1;  add = None
        add_2: "f32[4, 4]" = add_1 + getitem_1;  add_1 = getitem_1 = None
        return (add_2,)

    class bwd_body_0(torch.nn.Module):
        def forward(self, grad_output: "f32[4, 4]", output_data: "f32[4, 4]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[4, 4]" = grad_output * 4;  mul = None
            mul_1: "f32[4, 4]" = grad_output * 2;  grad_output = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return (None, None, mul_1)

    class fwd_body_0(torch.nn.Module):
        def forward(self, l_module_b: "f32[4, 4]", l_input_data_values: "f32[4, 4]", l_x_: "f32[4, 4]"):
            _set_grad_enabled = torch._C._set_grad_enabled(False);  _set_grad_enabled = None

            mul: "f32[4, 4]" = l_module_b * 5;  l_module_b = None
            mul_1: "f32[4, 4]" = mul * l_input_data_values;  mul = None
            output_tensor: "f32[4, 4]" = 4 + mul_1;  mul_1 = None

            out: "f32[4, 4]" = output_tensor + l_x_;  output_tensor = None
            out_1: "f32[4, 4]" = l_input_data_values + l_x_;  l_input_data_values = l_x_ = None

            _set_grad_enabled_1 = torch._C._set_grad_enabled(True);  _set_grad_enabled_1 = None
            return ((out, out_1), ())
""",
        )

    def test_nn_module_dataclasses_as_io(self):
        @dataclass
        class InputData:
            count: int
            values: torch.Tensor

        @dataclass
        class OutputData:
            result1: torch.Tensor
            result2: torch.Tensor

        # Create a simple linear module

        class Mod(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = 4
                self.b = torch.randn(4, 4)

        module = Mod()

        # Create input dataclass
        input_data = InputData(count=5, values=torch.randn(4, 4))

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(
                ctx,
                module: torch.nn.Module,
                input_data: InputData,
                x: torch.Tensor,
            ) -> tuple[torch.Tensor, OutputData]:
                # Extract inputs
                count = input_data.count
                values = input_data.values

                output_tensor = module.a + module.b * count * values

                output_data = OutputData(
                    result1=output_tensor + count, result2=output_tensor * (count + 1)
                )

                return output_tensor + x, output_data

            @staticmethod
            def backward(ctx, grad_output, output_data):
                return grad_output * 4, None, grad_output * 2

        def fn(input_data, x):
            y, y_data = Foo.apply(module, input_data, x)
            return x + y + y_data.result1 + y_data.result2

        # Call the function
        x = torch.randn(4, 4, requires_grad=True)
        ref = fn(input_data, x)

        backend = AotEagerAndRecordGraphs()
        opt_fn = torch.compile(fn, fullgraph=True, backend=backend)
        res = opt_fn(input_data, x)
        self.assertEqual(ref, res)

    def test_inplace_op_with_side_effect_wrong_grad(self):
        # Repro for https://github.com/pytorch/pytorch/issues/180642
        # In-place op inside autograd.Function.forward combined with a side
        # effect (list append) causes collect_intermediate_outputs to add a
        # pre-mutation alias as an extra subgraph output. Because the alias
        # shares the same TensorImpl as the real return value,
        # set_gradient_edge overwrites output_nr, routing the backward
        # gradient to the wrong slot and producing zero gradients.
        captured = []

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                intermediate = torch.sin(x)
                captured.append(intermediate)
                loss = torch.tensor(0.0, device=x.device)
                loss += x.sum()
                return loss

            @staticmethod
            def backward(ctx, grad):
                return grad.expand(8)

        def fn(x):
            return Foo.apply(x)

        x = torch.randn(8, device="cpu", requires_grad=True)

        # Eager reference
        x_ref = x.detach().clone().requires_grad_(True)
        captured.clear()
        out_ref = fn(x_ref)
        out_ref.backward()

        # Compiled
        torch._dynamo.reset()
        captured.clear()
        x_c = x.detach().clone().requires_grad_(True)
        out_c = torch.compile(fn, backend="eager", fullgraph=True)(x_c)
        out_c.backward()

        self.assertEqual(x_ref.grad, x_c.grad)

    def test_aliased_intermediate_captured_by_side_effect(self):
        # An intermediate that aliases an input is captured via side effect
        # and used by the outer graph. filter_aliased_intermediates drops it
        # from the subgraph outputs, but the outer graph still needs it.
        # We should get a clear error telling the user to clone.
        captured = []

        class Bar(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                view = x.view(-1)
                captured.append(view)
                return x.sum()

            @staticmethod
            def backward(ctx, grad):
                return grad.expand(8)

        def fn(x):
            out = Bar.apply(x)
            return out + captured[0].sum()

        x = torch.randn(8, requires_grad=True)
        captured.clear()
        with self.assertRaisesRegex(
            RuntimeError,
            "aliases an input or output.*clone",
        ):
            torch.compile(fn, backend="eager", fullgraph=True)(x)

    def test_nullified_ctx_manager_side_effect_in_backward(self):
        # A context manager that flips a boolean attribute on enter and
        # restores it on exit has no net side effect. Dynamo defers the
        # check and validates nullification after tracing.
        import contextlib

        class State:
            def __init__(self):
                self.enabled = False

        state = State()

        @contextlib.contextmanager
        def toggle_flag():
            old = state.enabled
            state.enabled = True
            try:
                yield
            finally:
                state.enabled = old

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                with toggle_flag():
                    return grad.clone()

        def fn(x):
            return Foo.apply(x).sum()

        x = torch.randn(8, requires_grad=True)

        # Eager reference
        x_ref = x.detach().clone().requires_grad_(True)
        out_ref = fn(x_ref)
        out_ref.backward()

        # Compiled
        torch._dynamo.reset()
        x_c = x.detach().clone().requires_grad_(True)
        out_c = torch.compile(fn, backend="eager", fullgraph=True)(x_c)
        out_c.backward()

        self.assertEqual(x_ref.grad, x_c.grad)

    def test_non_nullified_side_effect_in_backward_fails(self):
        # A backward that mutates an outer-scope attribute without restoring
        # it should still fail, even with deferred side-effect checking.
        class State:
            def __init__(self):
                self.enabled = False

        state = State()

        class Bad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                state.enabled = True
                return grad.clone()

        def fn(x):
            return Bad.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        with self.assertRaises(torch._dynamo.exc.Unsupported):
            out = torch.compile(fn, backend="eager", fullgraph=True)(x)
            out.backward()

    def test_nullified_dict_attr_side_effect_in_backward(self):
        # Attribute that holds a dict is swapped and restored — nullified.
        class Config:
            def __init__(self):
                self.options = {"mode": "fast", "level": 3}

        cfg = Config()

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                old = cfg.options
                cfg.options = {"mode": "slow", "level": 1}
                cfg.options = old
                return grad.clone()

        def fn(x):
            return Foo.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out_ref = fn(x_ref)
        out_ref.backward()

        torch._dynamo.reset()
        x_c = x.detach().clone().requires_grad_(True)
        out_c = torch.compile(fn, backend="eager", fullgraph=True)(x_c)
        out_c.backward()
        self.assertEqual(x_ref.grad, x_c.grad)

    def test_non_nullified_dict_attr_side_effect_in_backward_fails(self):
        # Attribute that holds a dict is swapped but NOT restored.
        class Config:
            def __init__(self):
                self.options = {"mode": "fast", "level": 3}

        cfg = Config()

        class Bad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                cfg.options = {"mode": "slow", "level": 1}
                return grad.clone()

        def fn(x):
            return Bad.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        with self.assertRaises(torch._dynamo.exc.Unsupported):
            out = torch.compile(fn, backend="eager", fullgraph=True)(x)
            out.backward()

    def test_nullified_integer_counter_in_backward(self):
        # Integer attribute incremented then decremented — nullified.
        class Counter:
            def __init__(self):
                self.depth = 0

        counter = Counter()

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                counter.depth += 1
                result = grad.clone()
                counter.depth -= 1
                return result

        def fn(x):
            return Foo.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out_ref = fn(x_ref)
        out_ref.backward()

        torch._dynamo.reset()
        x_c = x.detach().clone().requires_grad_(True)
        out_c = torch.compile(fn, backend="eager", fullgraph=True)(x_c)
        out_c.backward()
        self.assertEqual(x_ref.grad, x_c.grad)

    def test_read_after_mutate_in_backward(self):
        # Code inside the backward reads the flipped value, confirming
        # the traced mutation is visible during tracing.
        import contextlib

        class State:
            def __init__(self):
                self.mode = "default"

        state = State()

        @contextlib.contextmanager
        def set_mode(mode):
            old = state.mode
            state.mode = mode
            try:
                yield
            finally:
                state.mode = old

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                with set_mode("special"):
                    if state.mode == "special":
                        return grad * 2.0
                    return grad

        def fn(x):
            return Foo.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out_ref = fn(x_ref)
        out_ref.backward()

        torch._dynamo.reset()
        x_c = x.detach().clone().requires_grad_(True)
        out_c = torch.compile(fn, backend="eager", fullgraph=True)(x_c)
        out_c.backward()
        self.assertEqual(x_ref.grad, x_c.grad)

    def test_property_with_side_effect_in_backward_fails(self):
        # A property setter that has a real side effect (incrementing a
        # counter) is NOT a nullified mutation even if the value is restored.
        # Dynamo traces through the setter and sees the non-nullified
        # set_count increment.
        import contextlib

        class State:
            def __init__(self):
                self._enabled = False
                self.set_count = 0

            @property
            def enabled(self):
                return self._enabled

            @enabled.setter
            def enabled(self, val):
                self.set_count += 1
                self._enabled = val

        state = State()

        @contextlib.contextmanager
        def toggle():
            old = state.enabled
            state.enabled = True
            try:
                yield
            finally:
                state.enabled = old

        class Foo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                with toggle():
                    return grad.clone()

        def fn(x):
            return Foo.apply(x).sum()

        x = torch.randn(8, requires_grad=True)
        with self.assertRaises(torch._dynamo.exc.Unsupported):
            out = torch.compile(fn, backend="eager", fullgraph=True)(x)
            out.backward()

    def test_apply_kwargs_old_style(self):
        class MySin(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input, factor=1):
                ctx.save_for_backward(input)
                ctx.factor = factor
                return factor * torch.sin(input)

            @staticmethod
            def backward(ctx, grad_output):
                (input,) = ctx.saved_tensors
                return grad_output * ctx.factor * torch.cos(input), None

        def fn(x):
            return MySin.apply(x, factor=6)

        x = torch.tensor([0.812], requires_grad=True)
        ref = fn(x)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(res, ref)

        ref.backward()
        grad_ref = x.grad.clone()
        x.grad = None
        res.backward()
        self.assertEqual(x.grad, grad_ref)

    def test_apply_kwargs_setup_context(self):
        class MyScale(torch.autograd.Function):
            @staticmethod
            def forward(x, factor=1):
                return factor * x

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, factor = inputs
                ctx.save_for_backward(x)
                ctx.factor = factor

            @staticmethod
            def backward(ctx, gO):
                return gO * ctx.factor, None

        def fn(x):
            return MyScale.apply(x, factor=3)

        x = torch.tensor([2.0], requires_grad=True)
        ref = fn(x)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(res, ref)

        ref.backward()
        grad_ref = x.grad.clone()
        x.grad = None
        res.backward()
        self.assertEqual(x.grad, grad_ref)

    def test_apply_kwargs_all_kwargs(self):
        class Add(torch.autograd.Function):
            @staticmethod
            def forward(x, y):
                return x + y

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, grad_output

        def fn(x, y):
            return Add.apply(y=y, x=x)

        x = torch.tensor([2.0], requires_grad=True)
        y = torch.tensor([3.0], requires_grad=True)
        ref = fn(x, y)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x, y)
        self.assertEqual(res, ref)

    def test_apply_kwargs_inference(self):
        class MySin(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input, factor=1):
                return factor * torch.sin(input)

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, None

        def fn(x):
            return MySin.apply(x, factor=6)

        x = torch.tensor([0.812])
        ref = fn(x)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(res, ref)

    def test_apply_kwargs_with_custom_signature(self):
        # __signature__ is ignored; resolution uses __code__ (matching C++ behavior)
        class MySin(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input, factor=1):
                ctx.save_for_backward(input)
                ctx.factor = factor
                return factor * torch.sin(input)

            @staticmethod
            def backward(ctx, grad_output):
                (input,) = ctx.saved_tensors
                return grad_output * ctx.factor * torch.cos(input), None

        # Set a __signature__ with different param names
        import inspect as _inspect

        MySin.forward.__signature__ = _inspect.Signature(
            [
                _inspect.Parameter("ctx", _inspect.Parameter.POSITIONAL_OR_KEYWORD),
                _inspect.Parameter("x", _inspect.Parameter.POSITIONAL_OR_KEYWORD),
                _inspect.Parameter(
                    "scale",
                    _inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=1,
                ),
            ]
        )

        def fn(x):
            # "factor" matches __code__, not __signature__
            return MySin.apply(x, factor=6)

        x = torch.tensor([0.812], requires_grad=True)
        ref = fn(x)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(res, ref)

    def test_apply_kwargs_with_wrapped(self):
        # __wrapped__ is ignored; resolution uses __code__ of the wrapper
        import functools

        def my_decorator(f):
            @functools.wraps(f)
            def wrapper(ctx, input, factor=1):
                return f(ctx, input, factor)

            return wrapper

        class MySin(torch.autograd.Function):
            @staticmethod
            @my_decorator
            def forward(ctx, input, multiplier=1):
                ctx.save_for_backward(input)
                ctx.factor = multiplier
                return multiplier * torch.sin(input)

            @staticmethod
            def backward(ctx, grad_output):
                (input,) = ctx.saved_tensors
                return grad_output * ctx.factor * torch.cos(input), None

        def fn(x):
            # "factor" matches the wrapper's __code__, not the wrapped fn
            return MySin.apply(x, factor=6)

        x = torch.tensor([0.812], requires_grad=True)
        ref = fn(x)
        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x)
        self.assertEqual(res, ref)


class AutogradFunctionFunctorchTests(torch._dynamo.test_case.TestCase):
    """Tests for autograd.Function compatibility with torch.func transforms.

    See https://github.com/pytorch/pytorch/issues/174067
    """

    def test_vmap_generate_rule_compiled(self):
        class Double(torch.autograd.Function):
            generate_vmap_rule = True

            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        def fn(x):
            return torch.vmap(Double.apply)(x)

        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        opt_fn = torch.compile(fn, backend=cnt, fullgraph=True)

        x1 = torch.randn(2, 3, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_(True)

        expected = fn(x1)
        expected.sum().backward()

        actual = opt_fn(x2)
        actual.sum().backward()

        self.assertEqual(actual, expected)
        self.assertEqual(x2.grad, x1.grad)
        self.assertEqual(cnt.frame_count, 1)

    def test_vmap_custom_rule_error_falls_back_to_eager(self):
        class BadVmap(torch.autograd.Function):
            @staticmethod
            def forward(x):
                return torch.zeros(x.shape, device=x.device)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def vmap(info, in_dims, x):
                return torch.zeros(x.shape[1:], device=x.device), (None,)

        def fn(x):
            return torch.vmap(BadVmap.apply)(x)

        opt_fn = torch.compile(fn, backend="eager")

        with self.assertRaisesRegex(RuntimeError, "returned an incompatible"):
            opt_fn(torch.randn(2, 3))

    def test_new_style_autograd_function_with_grad_no_compile(self):
        """Baseline: new-style autograd.Function works with torch.func.grad."""

        class NewStyleOp(torch.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                (x,) = inputs
                ctx.save_for_backward(x)

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def fn(x):
            return NewStyleOp.apply(x).sum()

        x = torch.tensor([1.0, 2.0], requires_grad=True)
        result = torch.func.grad(fn)(x)
        self.assertEqual(result, torch.tensor([2.0, 2.0]))

    def test_old_style_autograd_function_with_grad_no_compile(self):
        """Baseline: old-style autograd.Function fails with torch.func.grad."""

        class OldStyleOp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def fn(x):
            return OldStyleOp.apply(x).sum()

        x = torch.tensor([1.0, 2.0], requires_grad=True)
        with self.assertRaisesRegex(
            RuntimeError, "must override the setup_context staticmethod"
        ):
            torch.func.grad(fn)(x)

    def test_new_style_autograd_function_with_grad_compiled(self):
        """New-style autograd.Function compiled should work with torch.func.grad.

        This is the main bug from https://github.com/pytorch/pytorch/issues/174067.
        torch.compile wraps autograd.Function in ApplyTemplate which lacks
        setup_context, breaking torch.func compatibility.
        """

        class NewStyleOp(torch.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                (x,) = inputs
                ctx.save_for_backward(x)

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def fn(x):
            return NewStyleOp.apply(x)

        compiled_fn = torch.compile(fn, backend="eager")

        def loss_fn(x):
            return compiled_fn(x).sum()

        x = torch.tensor([1.0, 2.0], requires_grad=True)
        result = torch.func.grad(loss_fn)(x)
        self.assertEqual(result, torch.tensor([2.0, 2.0]))

    def test_old_style_autograd_function_with_grad_compiled(self):
        """Old-style autograd.Function compiled should work with torch.func.grad.

        Even though the original function is old-style, the compiled version
        (ApplyTemplate) can support torch.func transforms because it uses
        traced graphs.
        """

        class OldStyleOp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def fn(x):
            return OldStyleOp.apply(x)

        compiled_fn = torch.compile(fn, backend="eager")

        def loss_fn(x):
            return compiled_fn(x).sum()

        x = torch.tensor([1.0, 2.0], requires_grad=True)
        result = torch.func.grad(loss_fn)(x)
        self.assertEqual(result, torch.tensor([2.0, 2.0]))

    def test_vmap_uses_custom_rule_when_batched_input_requires_grad(self):
        class ForwardTimesThreeVmapTimesTwo(torch.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 3

            @staticmethod
            def vmap(info, in_dims, x):
                return x * 2, in_dims[0]

        def fn(x):
            return torch.vmap(lambda y: ForwardTimesThreeVmapTimesTwo.apply(y))(x)

        x = torch.randn(4, 3, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        x_test = x.detach().clone().requires_grad_(True)

        ref = fn(x_ref)
        ref.sum().backward()

        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x_test)
        res.sum().backward()

        self.assertEqual(res, ref)
        self.assertEqual(x_test.grad, x_ref.grad)

    def test_vmap_custom_rule_with_unbatched_requires_grad_input(self):
        class AddWeight(torch.autograd.Function):
            @staticmethod
            def forward(x, weight):
                return x + weight * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, grad_output * 3

            @staticmethod
            def vmap(info, in_dims, x, weight):
                return x + weight * 2, in_dims[0]

        def fn(x, weight):
            return torch.vmap(lambda y: AddWeight.apply(y, weight))(x)

        x = torch.randn(4, 3, requires_grad=True)
        weight = torch.randn(3, requires_grad=True)
        eager_inputs = [t.detach().clone().requires_grad_(True) for t in (x, weight)]
        compiled_inputs = [t.detach().clone().requires_grad_(True) for t in (x, weight)]

        ref = fn(*eager_inputs)
        ref.sum().backward()

        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(*compiled_inputs)
        res.sum().backward()

        self.assertEqual(res, ref)
        for compiled, eager in zip(compiled_inputs, eager_inputs):
            self.assertEqual(compiled.grad, eager.grad)

    def test_vmap_custom_rule_binds_default_args(self):
        class ScaleDefault(torch.autograd.Function):
            @staticmethod
            def forward(x, scale=2, bias=1):
                return x * (scale + 1) + bias

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 3, None, None

            @staticmethod
            def vmap(info, in_dims, x, scale, bias):
                return x * scale + bias, in_dims[0]

        def fn(x):
            return torch.vmap(lambda y: ScaleDefault.apply(y, bias=4))(x)

        x = torch.randn(4, 3, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        x_test = x.detach().clone().requires_grad_(True)

        ref = fn(x_ref)
        ref.sum().backward()

        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x_test)
        res.sum().backward()

        self.assertEqual(res, ref)
        self.assertEqual(x_test.grad, x_ref.grad)

    def test_vmap_custom_rule_with_keyword_only_arg(self):
        class KeywordOnly(torch.autograd.Function):
            @staticmethod
            def forward(x, *, scale=2):
                return x * (scale + 1)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output

            @staticmethod
            def vmap(info, in_dims, x, *, scale=2):
                return x * scale, in_dims[0]

        def default_fn(x):
            return torch.vmap(lambda y: KeywordOnly.apply(y))(x)

        def explicit_fn(x):
            return torch.vmap(lambda y: KeywordOnly.apply(y, scale=4))(x)

        x = torch.randn(4, 3)
        for fn in (default_fn, explicit_fn):
            with self.subTest(fn=fn.__name__):
                opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
                self.assertEqual(opt_fn(x), fn(x))

    def test_vmap_class_attribute_mutations_invalidate_cache(self):
        def make_function(generate_vmap_rule, manual_vmap):
            class Mutable(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad_output):
                    return grad_output * 3

            Mutable.generate_vmap_rule = generate_vmap_rule
            if manual_vmap:
                Mutable.vmap = staticmethod(
                    lambda info, in_dims, x: (x * 2, in_dims[0])
                )
            return Mutable

        def compile_case(function_cls, x):
            def fn(x):
                return torch.vmap(function_cls.apply)(x)

            opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
            self.assertEqual(opt_fn(x), fn(x))
            return opt_fn

        x = torch.randn(2, 3)

        function_cls = make_function(generate_vmap_rule=True, manual_vmap=False)
        opt_fn = compile_case(function_cls, x)
        function_cls.generate_vmap_rule = False
        with self.assertRaisesRegex(RuntimeError, "does not have vmap support"):
            opt_fn(x)

        def descriptor_sensitive_vmap(first, second, third, fourth=None):
            if fourth is None:
                return third * 2, second[0]
            return fourth * 5, third[0]

        function_cls = make_function(generate_vmap_rule=False, manual_vmap=False)
        function_cls.vmap = staticmethod(descriptor_sensitive_vmap)
        opt_fn = compile_case(function_cls, x)
        function_cls.vmap = classmethod(descriptor_sensitive_vmap)
        self.assertEqual(opt_fn(x), x * 5)

        base_vmap = torch.autograd.Function.vmap
        function_cls = make_function(generate_vmap_rule=True, manual_vmap=False)
        function_cls.vmap = staticmethod(base_vmap)
        opt_fn = compile_case(function_cls, x)
        same_code_vmap = types.FunctionType(
            base_vmap.__code__,
            base_vmap.__globals__,
            base_vmap.__name__,
            base_vmap.__defaults__,
            base_vmap.__closure__,
        )
        function_cls.vmap = staticmethod(same_code_vmap)
        with self.assertRaisesRegex(RuntimeError, "both generate_vmap_rule=True"):
            opt_fn(x)

        function_cls = make_function(generate_vmap_rule=False, manual_vmap=True)
        opt_fn = compile_case(function_cls, x)
        function_cls.setup_context = torch.autograd.Function.setup_context
        with self.assertRaisesRegex(RuntimeError, "must override the setup_context"):
            opt_fn(x)

        base_setup_context = torch.autograd.Function.setup_context

        class Legacy(torch.autograd.Function):
            setup_context = staticmethod(base_setup_context)

            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def legacy_fn(x):
            try:
                return Legacy.apply(x)
            except TypeError:
                return x + 20

        opt_legacy_fn = torch.compile(legacy_fn, backend="eager", fullgraph=True)
        self.assertEqual(opt_legacy_fn(x), legacy_fn(x))
        Legacy.setup_context = staticmethod(
            types.FunctionType(
                base_setup_context.__code__,
                base_setup_context.__globals__,
                base_setup_context.__name__,
                base_setup_context.__defaults__,
                base_setup_context.__closure__,
            )
        )
        self.assertEqual(opt_legacy_fn(x), legacy_fn(x))

        function_cls = make_function(generate_vmap_rule=False, manual_vmap=True)

        def catch_forward_bind_error(x):
            try:
                return torch.vmap(function_cls.apply)(x)
            except TypeError:
                return x + 10

        opt_fn = torch.compile(
            catch_forward_bind_error, backend="eager", fullgraph=True
        )
        self.assertEqual(opt_fn(x), catch_forward_bind_error(x))
        function_cls.forward = staticmethod(lambda x, y: x + y)
        self.assertEqual(opt_fn(x), catch_forward_bind_error(x))

    def test_vmap_custom_rule_tracks_wrapped_and_partial_defaults(self):
        def wrapped_forward(x, scale=2):
            return x * scale

        @functools.wraps(wrapped_forward)
        def forward_wrapper(*args, **kwargs):
            return wrapped_forward(*args, **kwargs)

        class Wrapped(torch.autograd.Function):
            forward = staticmethod(forward_wrapper)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2, None

            @staticmethod
            def vmap(info, in_dims, x, scale):
                return x * scale, in_dims[0]

        def wrapped_fn(x):
            return torch.vmap(Wrapped.apply)(x)

        x = torch.randn(2, 3)
        cnt = torch._dynamo.testing.CompileCounterWithBackend("eager")
        opt_wrapped_fn = torch.compile(wrapped_fn, backend=cnt, fullgraph=True)
        self.assertEqual(opt_wrapped_fn(x), wrapped_fn(x))
        self.assertEqual(cnt.frame_count, 1)
        wrapped_forward.__defaults__ = (7,)
        self.assertEqual(opt_wrapped_fn(x), wrapped_fn(x))
        self.assertEqual(cnt.frame_count, 2)
        wrapped_forward.__signature__ = inspect.Signature(
            [
                inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter(
                    "scale", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=5
                ),
            ]
        )
        self.assertEqual(opt_wrapped_fn(x), wrapped_fn(x))
        self.assertEqual(cnt.frame_count, 3)
        wrapped_forward.__signature__ = wrapped_forward.__signature__.replace(
            parameters=[
                *list(wrapped_forward.__signature__.parameters.values())[:-1],
                inspect.Parameter(
                    "scale", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=9
                ),
            ]
        )
        self.assertEqual(opt_wrapped_fn(x), wrapped_fn(x))
        self.assertEqual(cnt.frame_count, 4)

        def partial_forward(x, scale=3):
            return x * scale

        class FalseyPartial(functools.partial):
            def __bool__(self):
                return False

        partial = FalseyPartial(partial_forward)
        partial.custom_attr = True

        def partial_has_custom_attr():
            return hasattr(partial, "custom_attr")

        opt_has_custom_attr = torch.compile(
            partial_has_custom_attr, backend="eager", fullgraph=True
        )
        self.assertEqual(opt_has_custom_attr(), partial_has_custom_attr())

        class Partial(torch.autograd.Function):
            forward = staticmethod(partial)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 3, None

            @staticmethod
            def vmap(info, in_dims, x, scale):
                return x * scale, in_dims[0]

        def partial_fn(x):
            return torch.vmap(Partial.apply)(x)

        opt_partial_fn = torch.compile(partial_fn, backend="eager", fullgraph=True)
        self.assertEqual(opt_partial_fn(x), partial_fn(x))
        partial.__signature__ = inspect.Signature(
            [
                inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter(
                    "scale", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=5
                ),
            ]
        )
        self.assertEqual(opt_partial_fn(x), partial_fn(x))
        partial.__signature__ = partial.__signature__.replace(
            parameters=[
                *list(partial.__signature__.parameters.values())[:-1],
                inspect.Parameter(
                    "scale", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=8
                ),
            ]
        )
        self.assertEqual(opt_partial_fn(x), partial_fn(x))

    def test_setup_context_bind_errors_are_catchable(self):
        class NeedsTwo(torch.autograd.Function):
            @staticmethod
            def forward(x, y):
                return x + y

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, grad_output

        def missing_is_catchable(x):
            try:
                return NeedsTwo.apply(x)
            except TypeError:
                return x + 10

        def duplicate_is_catchable(x):
            try:
                return NeedsTwo.apply(x, x, y=x)
            except TypeError:
                return x + 20

        x = torch.randn(3)
        for fn in (missing_is_catchable, duplicate_is_catchable):
            with self.subTest(fn=fn.__name__):
                opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
                self.assertEqual(opt_fn(x), fn(x))

        class KeywordOnly(torch.autograd.Function):
            @staticmethod
            def forward(x, *, scale=2):
                return x * scale

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2

        def inner(x):
            try:
                return KeywordOnly.apply(x)
            except TypeError:
                return x * 3

        def kwonly_grad_error_is_catchable(x):
            return torch.func.grad(lambda y: inner(y).sum())(x)

        opt_fn = torch.compile(
            kwonly_grad_error_is_catchable, backend="eager", fullgraph=True
        )
        self.assertEqual(opt_fn(x), kwonly_grad_error_is_catchable(x))

        def nested_fn(x):
            return torch.vmap(kwonly_grad_error_is_catchable)(x)

        batched_x = torch.randn(2, 3)
        opt_nested_fn = torch.compile(nested_fn, backend="eager", fullgraph=True)
        self.assertEqual(opt_nested_fn(batched_x), nested_fn(batched_x))

    def test_setup_context_binds_default_args_without_functorch(self):
        class ScaleDefault(torch.autograd.Function):
            @staticmethod
            def forward(x, scale=2, bias=1):
                return x * scale + bias

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * 2, None, None

        def fn(x):
            return ScaleDefault.apply(x, bias=4)

        x = torch.randn(4, 3, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        x_test = x.detach().clone().requires_grad_(True)

        ref = fn(x_ref)
        ref.sum().backward()

        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(x_test)
        res.sum().backward()

        self.assertEqual(res, ref)
        self.assertEqual(x_test.grad, x_ref.grad)

    def test_setup_context_preserves_varargs(self):
        class VarArgs(torch.autograd.Function):
            @staticmethod
            def forward(x, *ys):
                return x + sum(ys)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return (grad_output,) * 3

        def fn(x, y, z):
            return VarArgs.apply(x, y, z)

        x = torch.randn(4, 3, requires_grad=True)
        y = torch.randn(4, 3, requires_grad=True)
        z = torch.randn(4, 3, requires_grad=True)
        eager_inputs = [t.detach().clone().requires_grad_(True) for t in (x, y, z)]
        compiled_inputs = [t.detach().clone().requires_grad_(True) for t in (x, y, z)]

        ref = fn(*eager_inputs)
        ref.sum().backward()

        opt_fn = torch.compile(fn, backend="eager", fullgraph=True)
        res = opt_fn(*compiled_inputs)
        res.sum().backward()

        self.assertEqual(res, ref)
        for compiled, eager in zip(compiled_inputs, eager_inputs):
            self.assertEqual(compiled.grad, eager.grad)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
