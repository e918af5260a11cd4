"""Leaf grads are delivered where eager delivers them, on both backends.

Eager runs each leaf's AccumulateGrad (its tensor hooks, node pre-hooks, the accumulation,
post-accumulate-grad hooks, node post-hooks) as soon as every grad for it has arrived, in the
engine's ready-queue order, interleaved with the rest of the backward.  Code that watches the
backward while it runs (a hook reading another leaf's `.grad`, FSDP2's per-group post-backward,
DDP's reducer hooks, engine-state queries) must see that, not a delivery after the graph.
Each program logs what its hooks see; the differential helper compares logs and grads.
"""
import pytest
import torch
from differential import differential
from torch import nn

import compiled_bw

pytestmark = pytest.mark.both_backends


def _ab():
    return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), []]


def test_tensor_hook_reads_another_leafs_grad_mid_backward():
    """Leaf grads at eager's point: x2's hook runs after b's AccumulateGrad in eager (b's grad is final
    first: `x2` was created first, so its node runs last)."""
    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        x2 = a.sin()
        z = (b * 2).sum()
        y = (x2 * 3).sum() + z
        x2.register_hook(lambda g: log.append(("b.grad", None if b.grad is None
                                                else b.grad.clone())) or g)
        y.backward()
        return [a.grad, b.grad, list(log)]
    differential(_ab, step)


def test_leaves_are_delivered_in_eagers_order():
    """Post-accumulate-grad hooks of four leaves log the order of delivery and which other
    leaves already hold a grad (the branches' nodes interleave with the deliveries)."""
    def build():
        return [[torch.randn(3, requires_grad=True) for _ in range(4)], []]

    def step(st):
        leaves, log = st
        for p in leaves:
            p.grad = None
        hs = [p.register_post_accumulate_grad_hook(
            lambda p, k=k: log.append((k, [q.grad is not None for q in leaves])))
            for k, p in enumerate(leaves)]
        y = sum((leaves[i].sin() * (i + 1)).exp().sum() for i in (3, 2, 1, 0))
        y.backward()
        for h in hs:
            h.remove()
        res = [[p.grad for p in leaves], list(log)]
        log.clear()
        return res
    differential(build, step)


def _acc(p):
    return p.view_as(p).grad_fn.next_functions[0][0]


def _linear_hooks(lin, out, log):
    """Every kind of hook around an nn.Linear's backward, each logging its name."""
    hs = []
    addmm = out.grad_fn
    t_node = next(n for n, _ in addmm.next_functions if n is not None and "TBackward" in type(n).__name__)
    for name, node in (("addmm", addmm), ("t", t_node)):
        hs.append(node.register_prehook(lambda g, name=name: log.append(f"{name} pre")))
        hs.append(node.register_hook(lambda gi, go, name=name: log.append(f"{name} post")))
    for name, p in (("weight", lin.weight), ("bias", lin.bias)):
        acc = _acc(p)
        hs.append(p.register_hook(lambda g, name=name: log.append(f"{name} tensor hook")))
        hs.append(acc.register_prehook(lambda g, name=name: log.append(f"{name} acc pre")))
        hs.append(p.register_post_accumulate_grad_hook(
            lambda q, name=name: log.append(f"{name} post-accumulate")))
        hs.append(acc.register_hook(lambda gi, go, name=name: log.append(f"{name} acc post")))
    hs.append(out.register_hook(lambda g: log.append("out tensor hook")))
    return hs


@pytest.mark.parametrize("input_grad", [False, True])
def test_linear_hook_order_is_eagers(input_grad):
    """Leaf grads at eager's point: eager runs the bias's AccumulateGrad (ready first) before the
    weight's TBackward0 branch."""
    def build():
        return [nn.Linear(4, 3), torch.randn(2, 4, requires_grad=input_grad), []]

    def step(st):
        lin, x, log = st
        lin.zero_grad(set_to_none=True)
        x.grad = None
        out = lin(x)
        hs = _linear_hooks(lin, out, log)
        out.pow(2).sum().backward()
        for h in hs:
            h.remove()
        res = [lin.weight.grad, lin.bias.grad, x.grad, list(log)]
        log.clear()
        return res
    differential(build, step)


def _names(nodes):
    return [type(n).__name__ for n in nodes]


def test_engine_state_queries_from_hooks_answer_as_eager():
    """_current_graph_task_execution_order (from a hook on the root, before any node ran: later
    eager's own implementation trips an internal assert), _current_autograd_node and
    _will_engine_execute_node from a non-leaf tensor hook, a node hook and leaf hooks."""
    def build():
        return [nn.Linear(4, 3), torch.randn(2, 4), torch.randn(5, requires_grad=True), []]

    def step(st):
        lin, x, unused, log = st
        lin.zero_grad(set_to_none=True)
        out = lin(x)
        loss = out.tanh().sum()
        other = (unused * 2).sum()     # a graph that this backward does not run
        acc_w = _acc(lin.weight)

        def query(where):
            log.append((where, type(torch._C._current_autograd_node()).__name__,
                        torch._C._will_engine_execute_node(acc_w),
                        torch._C._will_engine_execute_node(other.grad_fn)))
        hs = [loss.register_hook(lambda g: log.append(
                  _names(torch._C._current_graph_task_execution_order())) or query("loss")),
              out.register_hook(lambda g: query("out")),
              out.grad_fn.register_hook(lambda gi, go: query("addmm post")),
              lin.weight.register_hook(lambda g: query("weight")),
              lin.bias.register_post_accumulate_grad_hook(lambda p: query("bias post-acc")),
              _acc(lin.bias).register_hook(lambda gi, go: query("bias acc post"))]
        with torch.autograd.set_multithreading_enabled(False):
            loss.backward()
        for h in hs:
            h.remove()
        res = [lin.weight.grad, lin.bias.grad, list(log)]
        log.clear()
        return res
    differential(build, step)


@pytest.mark.parametrize("how", ["inputs", "two roots"])
def test_execution_order_with_pruning_and_several_roots(how):
    """backward(inputs=...) lists only the nodes that run; several roots start from each."""
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), []]

    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        m = a * b
        y = (m.exp() + b).sum()
        z = (m * a).sum()
        hooked = [y] if how == "inputs" else [z]     # the node that runs first
        hs = [t.register_hook(lambda g: log.append(
            _names(torch._C._current_graph_task_execution_order()))) for t in hooked]
        with torch.autograd.set_multithreading_enabled(False):
            if how == "inputs":
                y.backward(inputs=[a])
            else:
                torch.autograd.backward([y, z])
        for h in hs:
            h.remove()
        res = [a.grad, b.grad, list(log)]
        log.clear()
        return res
    differential(build, step)


def test_failing_hook_leaves_eagers_grads():
    """An error half-way: eager has already written the grads of the leaves delivered before
    the failing node (ENGINE.md 1.8); so does compiled_bw, and no others."""
    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        x2 = a.sin()
        y = (x2 * 3).sum() + (b * 2).sum()

        def boom(g):
            raise ValueError("hook failed")
        x2.register_hook(boom)
        try:
            y.backward()
        except ValueError as e:
            log.append(str(e))
        return [a.grad, b.grad, list(log)]
    differential(_ab, step)


def test_no_hooks_keeps_the_direct_path():
    """Nothing observes the order: the graph runs without the engine (no delivery calls)."""
    def build():
        return [nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1)), torch.randn(3, 4)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        m(x).sum().backward()
        return [p.grad for p in m.parameters()]
    differential(build, step)
    g = compiled_bw.last_graph()
    assert "deliver" not in g.code, g.code


def test_hook_that_frees_a_parameter_runs_after_its_last_reader():
    """Like FSDP's post-backward (which frees a layer's unsharded parameters), a
    post-accumulate-grad hook overwrites its parameter in place: eager has already run every
    node reading it (its matmuls' saved weights); so must the compiled graph (backends/inductor.py
    Note [Inductor: call order]), or the input grads would be computed from the overwritten weights."""
    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 1))
        ref = [p.detach().clone() for p in model.parameters()]
        def free(q) -> None:
            q.detach().fill_(float("nan"))
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(free)
        return [model, ref, torch.randn(4, 6, requires_grad=True)]

    def step(st):
        model, ref, x = st
        with torch.no_grad():
            for p, r in zip(model.parameters(), ref, strict=True):
                p.copy_(r)
        model.zero_grad(set_to_none=True)
        x.grad = None
        model(x).pow(2).sum().backward()
        return [x.grad] + [p.grad for p in model.parameters()]
    differential(build, step)


def test_delivered_grad_is_taken_as_eager_takes_it():
    """runtime/run.py Note [Stealing at delivery points]: eager's AccumulateGrad takes the
    formula's result itself as `.grad` when it obeys the layout contract, which ignores size-1
    dims: `w.t() * x`'s grad reaches w (5, 1) as the transpose of a (1, 5) sum, strides
    (1, 5), and `w.grad` keeps them.  A copy (what AccumulateGrad does when the graph still
    holds the grad) has w's (1, 1).  A hook inside the graph makes every leaf a delivery
    point; grads are compared with their strides.  A post-accumulate-grad hook then changes
    the taken `.grad` in place: nothing in the graph reads it later."""
    def build():
        w, x = torch.randn(5, 1, requires_grad=True), torch.randn(3, 5, requires_grad=True)
        def triple(p):
            p.grad.mul_(3)
        for p in (w, x):
            p.register_post_accumulate_grad_hook(triple)
        return [w, x]

    def step(st):
        w, x = st
        w.grad = x.grad = None
        h = w.t() * x
        h.register_hook(lambda g: g * 2)    # user code inside the graph
        h.sin().sum().backward()
        assert w.grad.stride() == (1, 5)    # eager's, as the docstring says
        return [w.grad, x.grad]
    differential(build, step)
