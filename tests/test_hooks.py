"""Every kind of backward hook: same calls, same order, same effect as eager.

Each program logs every hook call (name + a value) and returns the log with the grads; the
differential helper compares both over 3 steps and checks the run compiled once.
"""
import warnings

import pytest
import torch
from differential import differential, grads
from functions import Double
from torch import nn

import compiled_bw


def _x():
    return [torch.randn(4, requires_grad=True), []]


def test_tensor_hooks_on_nonleaf_chain_in_order():
    def step(st):
        x, log = st
        x.grad = None
        y = x.exp()
        z = y * 3
        y.register_hook(lambda g: log.append(("y1", round(g.sum().item(), 4))))
        y.register_hook(lambda g: log.append(("y2", round(g.sum().item(), 4))) or g * 2)
        y.register_hook(lambda g: log.append(("y3", round(g.sum().item(), 4))))
        z.register_hook(lambda g: g + 1)
        z.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_leaf_hooks_and_post_accumulate_hooks():
    def step(st):
        x, log = st
        x.grad = None
        h1 = x.register_hook(lambda g: log.append(("x", round(g.sum().item(), 4))) or g * 0.5)
        h2 = x.register_post_accumulate_grad_hook(lambda p: log.append(("post", round(p.grad.sum().item(), 4))))
        (x.sin() * x).sum().backward()
        h1.remove()
        h2.remove()
        return [x.grad, list(log)]
    differential(_x, step)


def test_node_pre_and_post_hooks_on_cpp_node():
    def step(st):
        x, log = st
        x.grad = None
        y = x.tanh()
        y.grad_fn.register_prehook(lambda go: log.append("pre") or (go[0] * 2,))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", round(gi[0].sum().item(), 4),
                                                            round(go[0].sum().item(), 4))))
        y.register_hook(lambda g: log.append("tensor"))
        y.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_node_hooks_on_custom_function_node():
    def step(st):
        x, log = st
        x.grad = None
        y = Double.apply(x.sin())
        y.grad_fn.register_prehook(lambda go: log.append("pre"))
        y.grad_fn.register_hook(lambda gi, go: log.append("post") or (gi[0] + 1,))
        y.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_retain_grad_on_intermediates():
    def step(st):
        x, _log = st
        x.grad = None
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 10)   # retains_grad sees the hooked value
        z = y.sin()
        z.retain_grad()
        z.sum().backward()
        return [x.grad, y.grad, z.grad]
    differential(_x, step)


def test_module_full_backward_hooks():
    def build():
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        return [m, torch.randn(3, 4), []]

    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        hs = [m[0].register_full_backward_hook(
                  lambda mod, gi, go: log.append(("l0", [None if g is None else round(g.sum().item(), 4) for g in gi]))),
              m[2].register_full_backward_pre_hook(
                  lambda mod, go: log.append(("l2pre", round(go[0].sum().item(), 4))) or (go[0] * 2,))]
        m(x.requires_grad_()).pow(2).sum().backward()
        for h in hs:
            h.remove()
        return grads(m) + [x.grad, list(log)]
    differential(build, step)


@pytest.mark.both_backends
@pytest.mark.parametrize("kind", ["forward_pre", "forward", "backward", "full_backward",
                                  "full_backward_pre"])
def test_global_module_hooks_see_only_user_modules(kind, monkeypatch):
    # nn.modules.module.register_module_*_hook fire for every nn.Module call.  Eager autograd
    # calls no module during a backward, so a global hook sees the user's modules only (and a
    # backward through a plain function, no module, calls no hook at all).
    # (torch remembers whether the first global backward hook was a full one, after removal too)
    monkeypatch.setattr(nn.modules.module, "_global_is_full_backward_hook", None)
    reg = getattr(nn.modules.module, f"register_module_{kind}_hook")

    def build():
        return [nn.Linear(4, 3), torch.randn(2, 4, requires_grad=True), []]

    def hook(log):
        def h(mod, *args):
            log.append((kind, type(mod).__name__, len(args)))
        return h

    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        x.grad = None
        with reg(hook(log)):
            m(x).tanh().sum().backward()
            (x.exp() * 2).sum().backward()
        return grads(m) + [x.grad, list(log)]
    differential(build, step, captures=2)


@pytest.mark.foreground_compile
def test_global_module_hooks_not_called_by_the_inductor_compile(monkeypatch):
    # Inductor compiles the captured graph on the first backward here (foreground): the compile
    # calls no user-visible module either, so the global hooks' log is eager's, and a hook that
    # rejects unknown modules does not make the compile fail (a fallback to the eager backend).
    monkeypatch.setattr(nn.modules.module, "_global_is_full_backward_hook", None)

    def build():
        return [nn.Linear(4, 3), torch.randn(2, 4, requires_grad=True), []]

    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)

        def pre(mod, args):
            log.append(("pre", type(mod).__name__))
            assert isinstance(mod, nn.Linear), "a module the program never called"

        def full(mod, gi, go):
            log.append(("full", type(mod).__name__))
        with nn.modules.module.register_module_forward_pre_hook(pre), \
                nn.modules.module.register_module_full_backward_hook(full):
            m(x).tanh().sum().backward()
        return grads(m) + [list(log)]
    differential(build, step, backend="inductor")


def test_multi_grad_hook_all_and_any():
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), []]

    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        u, v = a * 2, b.exp()
        h1 = torch.autograd.graph.register_multi_grad_hook(
            (u, v), lambda gs: log.append(("all", [None if g is None else round(g.sum().item(), 4) for g in gs])))
        h2 = torch.autograd.graph.register_multi_grad_hook(
            (u, v), lambda g: log.append(("any", round(g.sum().item(), 4))), mode="any")
        (u * v).sum().backward()
        h1.remove()
        h2.remove()
        return [a.grad, b.grad, list(log)]
    differential(build, step)


def test_queue_callback_runs_after_the_backward():
    def step(st):
        x, log = st
        x.grad = None

        def cb():
            log.append(("callback", x.grad is not None, torch.is_grad_enabled()))

        def hook(g):
            log.append("hook")
            torch.autograd.Variable._execution_engine.queue_callback(cb)
        y = x * 3
        y.register_hook(hook)
        y.sum().backward()
        log.append("returned")
        return [x.grad, list(log)]
    differential(_x, step)


def test_changing_hooks_recapture():
    def step(st):
        x, log = st
        x.grad = None
        y = x.exp()
        if len(log) % 2 == 0:                 # steps alternate: hook / no hook
            y.register_hook(lambda g: g * 2)
        log.append(len(log))
        y.sum().backward()
        return [x.grad]
    differential(_x, step, steps=4, captures=2)


def test_hook_that_raises_writes_no_grad():
    def step(st):
        x, _log = st
        x.grad = torch.ones(4)
        y = x * 2

        def boom(g):
            raise RuntimeError("boom from a tensor hook")
        y.register_hook(boom)
        try:
            y.sum().backward()
        except RuntimeError as e:
            return [x.grad, str(e)]
        return [x.grad]
    differential(_x, step)


def test_hooks_after_inplace_stay_on_their_node():
    def step(st):
        x, log = st
        x.grad = None
        y = x * 2
        y.register_hook(lambda g: log.append("before inplace") or g * 3)
        y.add_(1)
        y.register_hook(lambda g: log.append("after inplace") or g + 1)
        y.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_grad_of_captured_leaf_and_intermediate_runs_their_tensor_hooks():
    def step(st):
        x, log = st
        h = x.register_hook(lambda g: log.append("leaf") or g * 2)
        y = x.sin()
        y.register_hook(lambda g: log.append("y") or g * 5)
        gx, gy = torch.autograd.grad((y * y).sum(), [x, y])
        h.remove()
        return [gx, gy, x.grad, list(log)]
    differential(_x, step)


def test_hook_return_checks_raise_eagers_errors():
    def step(st):
        x, _log = st
        y = x.exp()
        y.register_hook(lambda g: g[:2])       # changes the size
        y.sum().backward()
    differential(_x, step, allow_errors=True)


def test_graph_shows_hooks_as_opaque_calls():
    x = torch.randn(3, requires_grad=True)
    compiled_bw.reset()
    with compiled_bw.enable(strict=True):
        y = x.exp()
        y.register_hook(lambda g: g)
        y.sum().backward()
    assert compiled_bw.last_graph().code.count("compiled_bw.opaque") == 1


def test_hooks_on_the_accumulate_grad_node_itself():
    # Leaf grads are delivered without the engine only when no AccumulateGrad has a hook of
    # any kind (runtime/run.py Note [Direct delivery]): node pre- and post-hooks registered on
    # the accumulator must still run, in eager's order, with eager's effect.
    def build():
        x, y = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        log = []
        acc = torch.autograd.graph.get_gradient_edge(x).node
        acc.register_prehook(lambda gs: log.append(("pre", round(gs[0].sum().item(), 4)))
                             or (gs[0] * 2,))
        acc.register_hook(lambda gi, go: log.append(("post", round(go[0].sum().item(), 4))))
        return [x, y, log, acc]

    def step(st):
        x, y, log, _acc = st
        x.grad = y.grad = None
        ((x * 3).sin() * y).sum().backward()
        return [x.grad, y.grad, list(log)]
    differential(build, step)


class _PassThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", ["default_device", "function_mode"])
def test_hooks_registered_under_a_torch_function_mode(mode):
    # torch's Tensor.register_hook re-enters Tensor.register_hook through the mode; the hook
    # must still run once (it ran twice here: grads 3x eager's)
    def step(st):
        x, log = st
        x.grad = None
        ctx = torch.device("cpu") if mode == "default_device" else _PassThrough()
        with ctx:
            y = x.exp()
            z = y * 3
            y.register_hook(lambda g: log.append(("y", round(g.sum().item(), 4))) or g * 2)
            z.register_hook(lambda g: g + 1)
            z.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class _Sentinel:
    pass


@pytest.mark.parametrize("enabled", [False, True], ids=["imported", "enabled"])
@pytest.mark.parametrize("use_tensor_hook", [True, False])
@pytest.mark.parametrize("use_custom_function", [True, False])
def test_hook_closure_cycle_is_collected(use_custom_function, use_tensor_hook, enabled):
    """PyTorch's test_hook_closure_cycle (pytorch#102174): hook -> closure -> grad_fn -> hook is
    a cycle the GC collects once the rest of the graph is gone, and not before.  Importing
    compiled_bw (its Tensor.register_hook wrapper) or running under enable() must not keep it."""
    import gc
    import weakref
    from contextlib import nullcontext
    count = [0]

    def scope():
        a = torch.tensor(1.0, requires_grad=True)
        b = _Identity.apply(a) if use_custom_function else a.clone()
        grad_fn_b = b.grad_fn
        obj = _Sentinel()

        def hook(*args):
            grad_fn_b, obj     # noqa: B018 -- the closure holds both
            count[0] += 1

        if use_tensor_hook:
            b.register_hook(hook)
        else:
            b.grad_fn.register_hook(hook)
        return b.clone(), weakref.ref(obj)

    ctx = compiled_bw.enable(backend="eager") if enabled else nullcontext()
    gc.disable()
    try:
        out, ref = scope()
        with ctx:
            out.backward(retain_graph=True)
        gc.collect()
        with ctx:
            out.backward(retain_graph=True)     # the hook survived the GC and still fires
        assert count[0] == 2
        assert ref() is not None                 # the graph still holds the C++ grad_fn
        del out
        gc.collect()
        assert ref() is None, "the hook's closure is still alive after the graph was deleted"
    finally:
        gc.enable()


def test_no_reference_to_the_graph_after_backward():
    """After a compiled backward (capture, then a cache hit) nothing of compiled_bw's -- caches,
    last_graph(), thread-locals -- keeps a custom Function's ctx, a hook or its closure alive."""
    import gc
    import weakref
    refs = []

    def step():
        x = torch.randn(3, requires_grad=True)
        obj = _Sentinel()
        y = Double.apply(x.sin())
        y.register_hook(lambda g, obj=obj: g)
        y.grad_fn.register_prehook(lambda go, obj=obj: None)
        refs.extend([weakref.ref(obj), weakref.ref(y.grad_fn)])
        with compiled_bw.enable(backend="eager"):
            y.sum().backward()

    compiled_bw.reset()
    for _ in range(2):
        step()
    assert compiled_bw.stats().cache_hits == 1
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


# ---- hooks registered while the backward runs (graph/hooks.py Note [Hooks registered
# during the backward]) ----

def _register_midway(kind):
    """A hook on `c` registers, on a node that has not run yet, what `kind` says."""
    def step(x):
        log = []
        a = x * 2
        b = a.exp()
        c = b * 3

        def on_c(g):
            log.append("c")
            if kind == "tensor_hook":
                a.register_hook(lambda ga: (log.append("a"), ga * 10)[1])
            elif kind == "retain_grad":
                a.retain_grad()
            elif kind == "node_post_hook":
                b.grad_fn.register_hook(lambda gi, go: log.append(("post", round(gi[0].sum().item(), 4))))
            elif kind == "node_pre_hook":
                b.grad_fn.register_prehook(lambda go: (go[0] * 0,))
        c.register_hook(on_c)
        c.sum().backward()
        g, x.grad = x.grad, None
        return [g, a.grad if kind == "retain_grad" else None, log]
    return step


@pytest.mark.parametrize("kind", ["tensor_hook", "retain_grad", "node_post_hook", "node_pre_hook"])
def test_hook_registered_on_a_node_still_to_run_raises_then_runs_eager(kind):
    # Eager calls it; the compiled graph, traced without it, cannot: it must not give eager's
    # grads without the hook's effect.  The first backward raises naming the node; the later
    # ones run eager autograd (a fallback with its reason) and give eager's results.
    from differential import _run, compare_runs

    def build():
        return torch.randn(4, requires_grad=True)
    eager = _run(build, _register_midway(kind), 3, 0)
    compiled_bw.reset()
    with compiled_bw.enable(backend="eager"):
        ours = _run(build, _register_midway(kind), 3, 0)
    assert ours[0][0] == "raised" and "has not run yet" in ours[0][1][1], ours[0]
    compare_runs(eager[1:], ours[1:])
    assert compiled_bw.stats().fallbacks == 2, compiled_bw.stats().fallback_reasons


def test_hooks_registered_where_eager_would_not_call_them_change_nothing():
    # on a node that already ran, on another graph's tensor, and one more hook in a dict the
    # graph already calls (read when its node runs, as eager reads it)
    def build():
        return [torch.randn(4, requires_grad=True), []]

    def step(st):
        x, log = st
        log.clear()
        a = x * 2
        a.register_hook(lambda g: log.append("a0"))
        b = a.exp()
        c = b * 3
        other = torch.ones(2, requires_grad=True) * 2

        def on_c(g):
            c.register_hook(lambda gc: log.append("late"))            # c's node ran
            other.register_hook(lambda go: log.append("other"))       # not in this graph
            a.register_hook(lambda ga: (log.append("a1"), ga * 2)[1])  # dict already called
        c.register_hook(on_c)
        c.sum().backward()
        g, x.grad = x.grad, None
        return [g, list(log)]
    differential(build, step)


def _no_autograd_kernel_op(lib):
    """An op with backend kernels only (no autograd kernel), made of autograd-recorded ops
    (PyTorch's test/autograd/test_fallback.py test_composite_registered_to_cpu): in the autograd
    fallback's default "warn" mode its output gets a tensor hook registered from C++ that warns
    when the backward reaches it."""
    lib.define("sin_sum(Tensor self) -> Tensor")
    for key in ("CPU", "CUDA"):     # CUDA: the suite also runs with tensors on a GPU
        lib.impl("sin_sum", lambda x: x.sin().sum(), key)
    return torch.ops.cbw_cpp_hook.sin_sum.default


def test_cpp_tensor_hook_of_the_autograd_fallback_still_warns():
    """Note [C++ hooks on interior nodes]: eager runs the fallback's warning hook on every
    backward through the op; a graph would drop it (nothing listed it), so the step falls back."""
    lib = torch.library.Library("cbw_cpp_hook", "FRAGMENT")
    try:
        op = _no_autograd_kernel_op(lib)
        prev = torch._C._get_autograd_fallback_mode()
        torch._C._set_autograd_fallback_mode("warn")

        def step(st):
            x, _ = st
            x.grad = None
            y = op(x * 2)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                y.backward()
            return [x.grad, [str(m.message).split(":")[0] for m in w
                             if "autograd kernel was not registered" in str(m.message)]]
        try:
            st = differential(_x, step, captures=0, fallbacks=3)
        finally:
            torch._C._set_autograd_fallback_mode(prev)
        assert all("C++ tensor hook on SumBackward0" in r for r in st.fallback_reasons), \
            st.fallback_reasons
    finally:
        lib._destroy()


@pytest.mark.both_backends
def test_full_backward_hook_zeros_for_an_argument_without_grad_follow_this_step():
    """A module full backward hook's grad_input for a tensor argument that needs no grad: eager
    passes zeros of that argument as this step's forward had it (BackwardHookFunction marks it
    non-differentiable; PyNode materializes its grad from the forward's output), here an
    attention-style mask whose length and dtype change while the rest of the graph does not."""
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, mask):
            return self.lin(x) * mask.float().mean()

    masks = [torch.ones(5, dtype=torch.bool), torch.ones(5, dtype=torch.bool),
             torch.full((7,), 0.5), torch.full((7,), 0.5), torch.ones(3, dtype=torch.float64)]

    def build():
        m = Masked()
        log = []
        m.register_full_backward_hook(lambda mod, gi, go: log.append(
            [None if g is None else (tuple(g.shape), g.dtype, g.sum().item()) for g in gi]))
        return [m, torch.randn(3, 4, requires_grad=True), log, [0]]

    def step(st):
        m, x, log, k = st
        m.zero_grad(set_to_none=True)
        x.grad = None
        m(x, masks[k[0]]).pow(2).sum().backward()
        k[0] += 1
        return grads(m) + [x.grad, list(log)]
    differential(build, step, steps=len(masks), captures=None)


_CREATION_HOOK = pytest.mark.skipif(
    not hasattr(torch.autograd.graph, "node_creation_hook"),
    reason="torch.autograd.graph.node_creation_hook is new in torch 2.14")


@_CREATION_HOOK
@pytest.mark.parametrize("kind", ["plain", "checkpoint", "create_graph", "forward_only"])
def test_node_creation_hook_sees_the_nodes_eager_creates(kind):
    """graph/hooks.py Note [Node creation hooks]: a node_creation_hook active during the
    backward is called for every node eager's backward creates (checkpoint recomputation,
    create_graph=True's history; none in a plain backward), in order.  Under compiled_bw that
    backward runs eager autograd, with the reason (before: a capture called it on 8 probe nodes
    of its own, a traced recomputation on none).  Entered around the forward only, the
    backward compiles."""
    from torch.utils.checkpoint import checkpoint

    def step(m):
        log = []
        m.zero_grad(set_to_none=True)
        x = torch.randn(3, 4)
        with torch.autograd.graph.node_creation_hook(lambda n: log.append(type(n).__name__)):
            y = (checkpoint(m, x, use_reentrant=False) if kind == "checkpoint" else m(x))
            y = y.pow(2).sum()
        log.append("backward")
        if kind == "forward_only":
            y.backward()
        else:
            with torch.autograd.graph.node_creation_hook(lambda n: log.append(type(n).__name__)):
                if kind == "create_graph":
                    gs = torch.autograd.grad(y, list(m.parameters()), create_graph=True)
                    y = sum(g.pow(2).sum() for g in gs)
                y.backward()
        return [grads(m), log]

    def build():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    if kind == "forward_only":
        differential(build, step)
        return
    st = differential(build, step, captures=0,
                      fallbacks=3 * (2 if kind == "create_graph" else 1))
    assert all("node_creation_hook is active" in r for r in st.fallback_reasons), st


@pytest.mark.both_backends
def test_optimizer_step_in_post_accumulate_grad_hooks():
    """PyTorch's tutorial "fusing the optimizer step into the backward pass": a per-parameter
    Adam steps from each parameter's post-accumulate-grad hook and clears its grad, so every
    parameter changes in place during the backward.  One Linear is used twice (its grad is
    final only after both uses); the updated weights, the optimizer states and the cleared
    grads are eager's."""
    def build():
        torch.manual_seed(0)
        shared = nn.Linear(8, 8)
        m = nn.ModuleList([nn.Linear(4, 8), shared, nn.LayerNorm(8), nn.Linear(8, 2)])
        opts = {p: torch.optim.Adam([p], lr=1e-2, foreach=False) for p in m.parameters()}
        order = []

        def hook(p):
            order.append(tuple(p.shape))
            opts[p].step()
            opts[p].zero_grad()
        for p in m.parameters():
            p.register_post_accumulate_grad_hook(hook)
        return m, opts, order

    def step(st):
        m, opts, order = st
        order.clear()
        h = m[1](torch.tanh(m[1](m[0](torch.randn(5, 4)))))
        m[3](m[2](h)).pow(2).mean().backward()
        return ([p.detach().clone() for p in m.parameters()], [p.grad for p in m.parameters()],
                [opts[p].state[p]["exp_avg_sq"].clone() for p in m.parameters()], list(order))
    differential(build, step, steps=3)


@pytest.mark.both_backends
def test_post_accumulate_grad_hook_updating_a_tensor_a_later_node_saved():
    """The hook updates `w` in place after its grad is final; a later node saved `w.detach()`
    (same version counter) for another input's grad: eager raises its "modified by an inplace
    operation" error when that node runs, and so must the compiled graph."""
    def build():
        return [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]

    def step(ps):
        w, x = ps
        w.grad = x.grad = None
        def halve(p):
            p.detach().mul_(0.5)
        handle = w.register_post_accumulate_grad_hook(halve)
        try:
            z = (torch.exp(x) * w.detach()).sum()   # saves w.detach(): unpacked after the hook
            y = (w * 2).sum()                       # w's only grad producer: runs first
            (z + y).backward()
        finally:
            handle.remove()
        return [w.detach().clone(), x.grad]
    st = differential(build, step, steps=2, allow_errors=True, fallbacks=None, captures=None)
    assert st.captures == 1, st     # the compiled graph raised it, not an eager fallback


_BEFORE_IMPORT = r"""
import json, sys
import torch

def program(kind, log):
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    y = w * 2
    if kind == "tensor":
        y.register_hook(lambda g: (log.append("tensor"), g + 1)[1])
    elif kind == "node_pre":
        y.grad_fn.register_prehook(lambda go: (log.append("pre"), (go[0] * 5,))[1])
    elif kind == "node_post":
        y.grad_fn.register_hook(lambda gi, go: (log.append("post"), (gi[0] * 7, None))[1])
    else:
        y.retain_grad()
    return w, y, (y * y).sum()

kinds = ("tensor", "node_pre", "node_post", "retain")
eager, ours = {}, {}
for kind in kinds:
    log = []
    w, y, loss = program(kind, log)
    loss.backward()
    eager[kind] = [w.grad.tolist(), log + [y.grad.tolist() if y.grad is not None else None]]
built = {}
for kind in kinds:
    log = []
    built[kind] = (program(kind, log), log)
import compiled_bw          # after the hooks were registered
for kind in kinds:
    (w, y, loss), log = built[kind]
    before = compiled_bw.stats().fallbacks
    with compiled_bw.enable(backend="eager"):
        loss.backward()
    ours[kind] = [w.grad.tolist(), log + [y.grad.tolist() if y.grad is not None else None],
                  compiled_bw.stats().fallbacks - before]
print(json.dumps({"eager": eager, "ours": ours,
                  "reasons": compiled_bw.stats().fallback_reasons}))
"""


@pytest.mark.parametrize("walk", ["cpp", "python"])
def test_hooks_registered_before_compiled_bw_was_imported(walk):
    """Hooks registered on interior nodes before compiled_bw was imported (Note [Hooks
    registered before compiled_bw], _fastwalk.h): node pre- and post-hooks are read from the
    node and called as eager calls them; a tensor hook or a retain_grad(), which compiled_bw
    sees only through its own Tensor.register_hook / retain_grad, makes that backward run eager
    autograd with the reason (the Python walk: the tensor hook).  All used to be dropped (a
    wrong grad, a None .grad).  In a fresh process (this one has compiled_bw imported)."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, COMPILED_BW_FASTWALK="1" if walk == "cpp" else "0",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _BEFORE_IMPORT], check=False, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for kind, (grad, log) in res["eager"].items():
        got_grad, got_log, fallbacks = res["ours"][kind]
        torch.testing.assert_close(torch.tensor(got_grad), torch.tensor(grad))
        assert got_log == log, (kind, got_log, log)
        assert fallbacks == (1 if kind in ("tensor", "retain") else 0), \
            (kind, fallbacks, res["reasons"])
    assert any("a tensor hook on MulBackward0 registered before compiled_bw was imported" in r
               for r in res["reasons"]), res["reasons"]
