"""Saved-tensor hooks are user code run by the node that unpacks: the walk must never unpack a
saved tensor that carries hooks ("Saved tensors are read by the node, once").

Differential: each program logs every unpack-hook call with `_current_autograd_node()` (eager:
the node unpacking, never None) and counts non-reentrant checkpoint recomputations; the log
under compiled_bw equals eager's, with nothing falling back (a node whose saved tensors carry
hooks runs as one opaque call of the real node: nodes.py Note [Hooked saved tensors]).
"""
import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads
from functions import Double


def _node_name():
    n = torch._C._current_autograd_node()
    return None if n is None else type(n).__name__


def _x():
    return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True), []]


@pytest.fixture(params=["cpp", "python", "python-no-extension"])
def walk(request, monkeypatch):
    """Each program below under the C++ walk, the Python walk, and the Python walk while the C++
    extension is not loaded (COMPILED_BW_FASTWALK=0's first steps, or no compiler): its check for
    foreign hooks is then the Python one (saved.py foreign_saved_hooks)."""
    from compiled_bw.walk import fastwalk
    from compiled_bw.walk import walk as walk_module
    monkeypatch.setattr(fastwalk._S, "enabled", request.param == "cpp")
    if request.param == "python-no-extension":
        monkeypatch.setattr(walk_module, "saved_hooks_in", None)
    return request.param


def test_unpack_hooks_run_once_by_their_node(walk):
    def step(st):
        a, b, log = st
        a.grad = b.grad = None

        def pack(t):
            log.append(("pack", tuple(t.shape)))
            return t

        def unpack(t):
            log.append(("unpack", _node_name()))
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (a * b).sin()
        z = Double.apply(y) * a
        z.sum().backward()
        return [a.grad, b.grad, list(log)]
    differential(_x, step, strict=True, captures=2)  # unpacked.py records, then traces


def test_custom_function_saved_tensors_with_hooks(walk):
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x

    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: t, lambda t: log.append(("unpack", _node_name())) or t):
            y = Mul.apply(a, b)
        (y.exp() * 2).sum().backward()
        return [a.grad, b.grad, list(log)]
    differential(_x, step, strict=True)


def test_non_reentrant_checkpoint_recomputes_once_per_backward(walk):
    def build():
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
        return [m, torch.randn(3, 4), [0]]

    def step(st):
        m, x, calls = st
        m.zero_grad(set_to_none=True)

        def f(inp):
            calls[0] += 1
            return m(inp)
        y = cp.checkpoint(f, x.requires_grad_(), use_reentrant=False)
        y.pow(2).sum().backward()
        return [*grads(m), x.grad, calls[0]]
    differential(build, step, strict=True)



def _halving_post_hook_registrar(log):
    """Registers, on the node that is running, a post hook that halves its grad_inputs and
    logs the grad_outputs it got (eager: none, the node had no post hook before it ran, so
    apply took its inputs)."""
    def register():
        node = torch._C._current_autograd_node()

        def hook(outputs, inputs):
            log.append((type(node).__name__, [i is None for i in inputs]))
            return tuple(None if o is None else o / 2.0 for o in outputs)
        node.register_hook(hook)
    return register


def test_post_hook_registered_during_an_unpack_hook_runs(walk):
    # PyTorch's test_node_post_hook_registered_during_unpack_hook: the post hook a saved-tensor
    # unpack hook registers on the running node runs after that node (engine.cpp call_function
    # reads the node's post hooks after apply), with an empty grad_outputs
    def build():
        return [torch.rand(3, 3, requires_grad=True), []]

    def step(s):
        a, log = s
        register = _halving_post_hook_registrar(log)

        def unpack(t):
            register()
            return t
        a.grad = None
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            var, mean = torch.var_mean(a, dim=0)
        (var + mean).sum().backward()
        return [a.grad, list(log)]
    differential(build, step, strict=True)


def test_post_hook_registered_by_a_custom_backward_on_its_own_node_runs():
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            F.register()
            return g * 3

    def build():
        return [torch.rand(4, requires_grad=True), []]

    def step(s):
        x, log = s
        F.register = _halving_post_hook_registrar(log)
        x.grad = None
        (F.apply(x.sin()) * 2).sum().backward()
        return [x.grad, list(log)]
    differential(build, step, strict=True)
