"""Hooks: leaf hooks run in the real engine (delivery), interior hooks as opaque calls in the
graph; both exactly as eager, compiled."""
import torch
from differential import differential

import compiled_bw


def test_leaf_tensor_and_post_accumulate_hooks_compiled():
    def build():
        return [torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True), []]

    def step(st):
        x, b, log = st
        x.grad = b.grad = None
        h1 = x.register_hook(lambda g: log.append(("x", g.sum().item())) or g * 2)
        h2 = b.register_post_accumulate_grad_hook(lambda p: log.append(("b.post", p.grad.sum().item())))
        (x * b).tanh().sum().backward()
        h1.remove()
        h2.remove()
        return [x.grad, b.grad, list(log)]
    differential(build, step)


def test_interior_tensor_hook_compiled():
    def build():
        return [torch.randn(3, requires_grad=True), []]

    def step(st):
        x, log = st
        x.grad = None
        y = x.exp()
        y.register_hook(lambda g: log.append("y") or g * 3)
        y.sum().backward()
        return [x.grad, list(log)]
    differential(build, step)
    assert "compiled_bw.opaque" in compiled_bw.last_graph().code


def test_retain_grad_compiled():
    def build():
        return [torch.randn(3, requires_grad=True)]

    def step(st):
        (x,) = st
        x.grad = None
        y = x * 2
        y.retain_grad()
        y.sin().sum().backward()
        return [x.grad, y.grad]
    differential(build, step)


def test_node_hooks_compiled():
    def build():
        return [torch.randn(3, requires_grad=True), []]

    def step(st):
        x, log = st
        x.grad = None
        y = x.exp()
        y.grad_fn.register_prehook(lambda gs: log.append("pre") or (gs[0] * 2,))
        y.grad_fn.register_hook(lambda gi, go: log.append("post"))
        y.sum().backward()
        return [x.grad, list(log)]
    differential(build, step)


def test_hook_that_raises_leaves_grads_untouched():
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(st):
        a, b = st
        a.grad = torch.ones(3)
        b.grad = torch.ones(3)

        def boom(g):
            raise ValueError("boom from hook")
        h = b.register_hook(boom)
        try:
            (a * b).sum().backward()
        except ValueError as e:
            msg = str(e)
        h.remove()
        return [a.grad, b.grad, msg]
    differential(build, step)


class _Logged(torch.autograd.Function):
    """Logs its backward (traced when Dynamo finds it safe: the log is a ctx list, so not)."""

    @staticmethod
    def forward(ctx, x, log):
        ctx.log = log
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        ctx.log.append("apply")
        return g, None


class _Pure(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def test_start_node_not_needed_runs_only_its_tensor_hooks():
    # ENGINE.md 1.6: grad(y, unrelated, allow_unused=True) evaluates y's node -- its tensor
    # hooks run -- but does not run it: no node pre/post hook, no backward, and
    # _will_engine_execute_node(y.grad_fn) is False (the graph applied it: PyTorch's
    # test_grad_unreachable_discovery failed once custom Functions were traced)
    def step(_):
        out = []
        for make in ("logged", "pure", "builtin"):
            log = []
            x = torch.randn(3, requires_grad=True)
            unrelated = torch.randn(3, requires_grad=True)
            if make == "logged":
                y = _Logged.apply(x * 2, log)
            elif make == "pure":
                y = _Pure.apply(x * 2)
            else:
                y = (x * 3).sin()
            y.grad_fn.register_prehook(lambda go, log=log: log.append("node prehook"))
            y.grad_fn.register_hook(lambda gi, go, log=log: log.append("node posthook"))
            y.register_hook(lambda g, log=log, y=y: log.append(
                ("tensor hook", g.clone(), torch._C._will_engine_execute_node(y.grad_fn))))
            r = torch.autograd.grad(y, (unrelated,), torch.ones(3), allow_unused=True)
            out.append([r, log])
        return out
    differential(lambda: None, step, steps=2, captures=3)


def _hook_configs():
    """Nodes with hooks of every kind the walk reads, alone and together."""
    def tensor_hook(g):
        return g

    def pre(gs):
        return None

    def post(gi, go):
        return None

    x = torch.randn(4, requires_grad=True)
    out = []
    for tensor in (0, 1):               # a hook dict on slot 0 (two hooks in it)
        for retain in (False, True):
            for node_pre in (False, True):
                for node_post in (False, True):
                    y = x * 2
                    if tensor:
                        y.register_hook(tensor_hook)
                        y.register_hook(lambda g: g)
                    if retain:
                        y.retain_grad()
                    if node_pre:
                        y.grad_fn.register_prehook(pre)
                    if node_post:
                        y.grad_fn.register_hook(post)
                    out.append(((tensor, retain, node_pre, node_post), y))
    parts = (x * 3).unbind(0)           # hook dicts on two slots of one node
    parts[0].register_hook(tensor_hook)
    parts[2].register_hook(lambda g: g)
    parts[2].retain_grad()
    out.append((("two slots",), parts[0]))
    return out


def test_hooks_and_signature_agrees_with_node_hooks():
    """hooks.hooks_and_signature (the C++ walk's one-pass reader) is node_hooks +
    NodeHooks.signature(): the same hooks and the same signature for every configuration."""
    from compiled_bw.graph import native
    from compiled_bw.graph.hooks import hooks_and_signature, node_hooks, retained_by_node
    from compiled_bw.walk import fastwalk
    if not fastwalk.in_use():
        import pytest
        pytest.skip("the C++ walk is not built (hooks_and_signature takes its dict reader)")
    configs = _hook_configs()
    retained = retained_by_node()
    dicts = native.hook_dicts()
    for what, t in configs:
        node = t.grad_fn
        ref = node_hooks(node, retained, dicts)
        got = hooks_and_signature(node, retained, dicts)
        if ref is None:
            assert got is None, what
            continue
        assert got is not None, what
        h, sig = got
        assert sig == ref.signature(), what
        assert h.signature() == ref.signature(), what
        assert {s: [id(d) for d in ds] for s, ds in h.tensor.items()} == \
            {s: [id(d) for d in ds] for s, ds in ref.tensor.items()}, what
        assert {s: id(v) for s, v in h.retains.items()} == \
            {s: id(v) for s, v in ref.retains.items()}, what
        assert h.pre is ref.pre and h.post is ref.post, what


def test_reset_forgets_kept_function_keys():
    """compiled_bw.reset() forgets every cache of custom.py, the kept backward keys too (they
    hold the function and the values of its globals)."""
    from compiled_bw.graph import custom

    def make():
        class Local(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        return Local

    def step(st):
        x, cls = st
        x.grad = None
        cls.apply(x.sin()).sum().backward()
        return [x.grad]
    differential(lambda: [torch.randn(3, requires_grad=True), make()], step)
    assert custom._CONSTANT_KEYS
    compiled_bw.reset()
    assert not custom._CONSTANT_KEYS
