"""Saved-tensor hooks and activation checkpointing inside the compiled backward.

Consumes programs that use `saved_tensors_hooks`, `save_on_cpu`, `torch.utils.checkpoint`
(non-reentrant, selective, nested, reentrant) and Hugging Face gradient checkpointing; produces
eager vs compiled_bw comparisons (tests/differential.py) with `strict=True`, so nothing may
fall back: grads, and logs of every pack / unpack hook call (in order, with the
`_current_autograd_node()` an unpack hook sees) and of every run of a checkpointed function
(with the node whose unpack triggered the recomputation).  Eager semantics: a node unpacks its
saved tensors when it runs (each once per backward, that node current), non-reentrant
checkpoint recomputes its region once per backward, at the first unpack of any of its saved
tensors, with the forward's RNG state unless preserve_rng_state=False.  Runs on both backends
(`both_backends` marker, tests/conftest.py).
"""
import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads, selected_backend
from hf_models import gpt2_checkpointed

import compiled_bw

pytestmark = pytest.mark.both_backends


def _node_name():
    n = torch._C._current_autograd_node()
    return None if n is None else type(n).__name__


def _mlp():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Dropout(0.3),
                               torch.nn.Linear(8, 6))


def _build():
    return [_mlp(), torch.randn(5, 6), []]


def _logging_hooks(log, pack=lambda t: t, unpack=lambda t: t, tag=""):
    def p(t):
        log.append((tag + "pack", tuple(t.shape), t.dtype))
        return pack(t)

    def u(packed):
        t = unpack(packed)
        log.append((tag + "unpack", _node_name(), tuple(t.shape)))
        return t
    return torch.autograd.graph.saved_tensors_hooks(p, u)


def test_bf16_compression_pack_unpack():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _logging_hooks(log, lambda t: t.to(torch.bfloat16), lambda t: t.to(torch.float32)):
            y = m(x.requires_grad_())
        (y * y).sum().backward()
        return [*grads(m), x.grad, list(log)]
    # unpacked.py Note [Unpack calls]: the first capture runs the real nodes and records what
    # their unpacks return, the second traces their formulas on unpack calls
    differential(_build, step, strict=True, captures=2)
    assert "'unpack AddmmBackward0'" in compiled_bw.last_graph().code


def test_save_on_cpu():
    def step(st):
        m, x, _log = st
        m.zero_grad(set_to_none=True)
        with torch.autograd.graph.save_on_cpu():
            y = m(x)
        y.pow(2).sum().backward()
        return grads(m)
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


class _LoggingSaveOnCpu(torch.autograd.graph.save_on_cpu):
    """save_on_cpu's own pack/unpack hooks, each call logged (node, shape, device)."""

    def __init__(self, log):
        super().__init__()
        pack, unpack = self.pack_hook, self.unpack_hook

        def p(t):
            log.append(("pack", tuple(t.shape)))
            return pack(t)

        def u(packed):
            t = unpack(packed)
            log.append(("unpack", _node_name(), tuple(t.shape), t.device.type))
            return t
        self.pack_hook, self.unpack_hook = p, u


def test_save_on_cpu_pack_and_unpack_calls():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _LoggingSaveOnCpu(log):
            y = m(x.requires_grad_())
        y.pow(2).sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def test_nested_saved_tensors_hooks_innermost_wins():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _logging_hooks(log, tag="outer "):
            h = m[0](x)
            with _logging_hooks(log, lambda t: t * 1, tag="inner "):
                h = m[1](h)
            y = m[3](h).sin()
        y.sum().backward()
        return [*grads(m), list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def test_graph_module_hooks_plain():
    # fx GraphModules as plain (not traceable) hooks: unpacked by the node, as eager does
    pack = torch.fx.symbolic_trace(lambda t: t.to(torch.bfloat16))
    unpack = torch.fx.symbolic_trace(lambda t: t.to(torch.float32))

    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _logging_hooks(log, pack, unpack):
            y = m(x.requires_grad_())
        y.sin().sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def test_save_on_cpu_nested_in_logging_hooks():
    # save_on_cpu inside a logging context: its tensors are packed by save_on_cpu only
    # (innermost wins), the others by the logging hooks, each unpacked once by its node
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _logging_hooks(log):
            h = m[0](x.requires_grad_())
            with torch.autograd.graph.save_on_cpu():
                h = m[1](h)
            y = m[3](m[2](h)).tanh()
        y.pow(2).sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def test_checkpoint_inside_logging_hooks():
    # user hooks outside a non-reentrant checkpoint: the region's tensors are packed by
    # checkpoint (innermost), the rest by the user's hooks; the recomputation runs inside the
    # first unpack of a region tensor, and the log interleaves both as in eager
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def region(inp):
            log.append(("run", _node_name()))
            return m[2](m[1](m[0](inp)))
        with _logging_hooks(log):
            h = cp.checkpoint(region, x.requires_grad_(), use_reentrant=False)
            y = m[3](h).sin()
        y.sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def test_hooks_on_some_steps_only_never_share_a_graph():
    # a step with hooks must not reuse the graph of a step without, nor the other way round
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.append(0)
        if len(log) % 2:
            with _logging_hooks(log):
                y = m(x)
        else:
            y = m(x)
        y.sum().backward()
        return [*grads(m), list(log)]
    differential(_build, step, strict=True, steps=4, captures=3)


def test_retain_graph_frees_packed_objects_as_eager():
    import weakref

    class Packed:
        def __init__(self, t):
            self.t = t

    def step(st):
        m, x, _log = st
        m.zero_grad(set_to_none=True)
        refs = []

        def pack(t):
            p = Packed(t)
            refs.append(weakref.ref(p))
            return p
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda p: p.t):
            y = m[1](m[0](x)).sum()
        y.backward(retain_graph=True)
        alive_retained = sum(r() is not None for r in refs)
        seen = []
        y.grad_fn.register_hook(lambda *_: seen.append(sum(r() is not None for r in refs)))
        y.backward()     # retain_graph=False: each node frees its packed objects after it ran
        return [*grads(m), alive_retained, seen, sum(r() is not None for r in refs)]
    differential(_build, step, strict=True, captures=4)


def test_post_hook_of_a_hooked_node_still_sees_its_saved_tensors():
    # eager frees a node's saved variables after its post-hooks ran (retain_graph=False)
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        with _logging_hooks(log):
            y = (m[0](x) * 3).tanh()
        node = y.grad_fn

        def post(gi, go):
            log.append(("post", tuple(node._saved_result.shape)))   # unpacks again: logged
        node.register_hook(post)
        m[3](m[1](y)).sum().backward()
        try:
            log.append(("after", tuple(node._saved_result.shape)))
        except RuntimeError as e:
            log.append(("after", str(e)[:40]))
        return [*grads(m), list(log)]
    differential(_build, step, strict=True, captures=2)  # a run records unpacks (unpacked.py)


def _ckpt_step(use_dropout=True, **kw):
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        m.train(use_dropout)

        def region(inp):
            log.append(("run", _node_name(), torch.is_grad_enabled()))
            return m[2](m[1](m[0](inp)))
        h = cp.checkpoint(region, x.requires_grad_(), use_reentrant=False, **kw)
        loss = m[3](h).pow(2).sum()
        torch.rand(3)   # the backward's global RNG state is not the forward's
        loss.backward()
        # the global generator after the backward: restored by the recomputation (eager's
        # fork), or advanced by it when preserve_rng_state=False
        return [*grads(m), x.grad, list(log), torch.get_rng_state(), torch.rand(4)]
    return step


@pytest.mark.parametrize("dropout", [False, True])
def test_non_reentrant_checkpoint(dropout):
    differential(_build, _ckpt_step(dropout), strict=True)


def test_non_reentrant_checkpoint_preserve_rng_state_false():
    differential(_build, _ckpt_step(True, preserve_rng_state=False), strict=True)


def test_non_reentrant_checkpoint_without_determinism_check():
    differential(_build, _ckpt_step(True, determinism_check="none"), strict=True)


def test_non_reentrant_checkpoint_debug():
    import logging

    # torch's debug=True trace logs a record pytest's log capture cannot format (eager too)
    logging.disable(logging.CRITICAL)
    try:
        differential(_build, _ckpt_step(True, debug=True), strict=True, captures=2)
    finally:
        logging.disable(logging.NOTSET)


def test_non_reentrant_checkpoint_without_early_stop():
    def step(st):
        with cp.set_checkpoint_early_stop(False):
            return _ckpt_step(True)(st)
    differential(_build, step, strict=True)


def test_non_reentrant_checkpoint_runs_as_often_as_eager():
    # the region runs once in the forward and once per backward (the issue saw 61 vs 2 once)
    def build():
        return [torch.nn.Linear(4, 4), torch.randn(3, 4), [0]]

    def step(st):
        m, x, calls = st
        m.zero_grad(set_to_none=True)

        def f(inp):
            calls[0] += 1
            return torch.tanh(m(inp)) * inp
        cp.checkpoint(f, x.requires_grad_(), use_reentrant=False).sum().backward()
        return [*grads(m), x.grad, calls[0]]
    differential(build, step, strict=True, steps=4)


def test_checkpoint_frees_recomputed_region_with_the_graph():
    import weakref

    def step(st):
        m, x, _log = st
        refs = []

        def region(inp):
            out = m[1](m[0](inp))
            refs.append(weakref.ref(out))
            return out
        h = cp.checkpoint(region, x, use_reentrant=False)
        m[3](h).sum().backward()
        del h
        return [*grads(m), [r() is None for r in refs]]
    differential(_build, step, strict=True)


def test_selective_activation_checkpointing():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def region(inp):
            log.append(("run", _node_name()))
            return m[2](m[1](m[0](inp)))
        h = cp.checkpoint(region, x, use_reentrant=False,
                          context_fn=lambda: create_selective_checkpoint_contexts(policy))
        m[3](h).pow(2).sum().backward()
        return [*grads(m), list(log)]
    differential(_build, step, strict=True)


def test_nested_checkpoints():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def inner(h):
            log.append(("inner", _node_name()))
            return m[2](m[1](h))

        def outer(inp):
            log.append(("outer", _node_name()))
            h = m[0](inp)
            return m[3](cp.checkpoint(inner, h, use_reentrant=False)).sin()
        cp.checkpoint(outer, x.requires_grad_(), use_reentrant=False).sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True)


@pytest.mark.parametrize("dropout", [False, True])
def test_checkpoint_around_a_compiled_region(dropout):
    # dropout: the compiled region draws its mask from the global generator, which checkpoint
    # restores for the recomputation (eager's grads need the forward's mask)
    def build():
        m = _mlp()
        m.train(dropout)
        return [m, torch.randn(5, 6), [0], torch.compile(m[:3], backend="aot_eager")]

    def step(st):
        m, x, calls, compiled = st
        m.zero_grad(set_to_none=True)

        def region(inp):
            calls[0] += 1
            return compiled(inp)
        h = cp.checkpoint(region, x, use_reentrant=False)
        m[3](h).pow(2).sum().backward()
        return [*grads(m), calls[0]]
    differential(build, step, strict=True)


@pytest.mark.parametrize("region", ["module", "function"])
def test_autocast_state_inside_the_region(region):
    # eager: checkpoint records the forward's autocast state and recomputes under it, whatever
    # the backward's state is (here none): the recomputed matmuls are bf16, as the forward's
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()
        inner = m[:2]

        def fn(inp):
            log.append(("run", torch.is_autocast_enabled("cpu")))
            return inner(inp)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = cp.checkpoint(inner if region == "module" else fn, x.requires_grad_(),
                              use_reentrant=False)
            y = m[3](h.float())
        y.float().pow(2).sum().backward()
        gs = [*grads(m), x.grad]
        if selected_backend() == "inductor":
            # Inductor's kernels round bf16 intermediates otherwise than eager's ops, with or
            # without checkpoint: compare its grads at bf16's precision (the log still says
            # which autocast state each run of the region saw)
            gs = [g.to(torch.bfloat16) for g in gs]
        return [*gs, h.dtype, list(log)]
    differential(_build, step, strict=True)


def test_checkpoint_under_grad_and_retain_graph():
    def step(st):
        m, x, log = st
        log.clear()
        xr = x.clone().requires_grad_()
        h = cp.checkpoint(lambda t: log.append(_node_name()) or m[1](m[0](t)), xr,
                          use_reentrant=False)
        y = m[3](h).sum()
        # weights too: their grad() result is TBackward's t() of a checkpointed node's output
        g1 = torch.autograd.grad(y, [xr, m[0].bias, m[0].weight], retain_graph=True)
        g2 = torch.autograd.grad(y, [m[3].bias, m[3].weight])
        return [*g1, *g2, list(log)]
    differential(_build, step, strict=True, captures=2)


@pytest.mark.parametrize("reentrant", [False, True])
def test_hf_gradient_checkpointing_gpt2(reentrant):
    build, step = gpt2_checkpointed(0.1, reentrant)
    differential(build, step, strict=True, steps=2, captures=2 if reentrant else 1)


def test_reentrant_checkpoint_inner_backward_is_its_own_capture():
    # CheckpointFunction is one opaque call of the outer graph; the backward it runs inside
    # is captured on its own (2 captures, then cache hits), nothing runs eager autograd
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def region(inp):
            log.append(("run", _node_name(), torch.is_grad_enabled()))
            return m[2](m[1](m[0](inp)))
        h = cp.checkpoint(region, x.requires_grad_(), use_reentrant=True)
        m[3](h).pow(2).sum().backward()
        return [*grads(m), x.grad, list(log)]
    st = differential(_build, step, strict=True, captures=2)
    assert st.cache_hits == 4


def test_grad_called_inside_a_hook_is_its_own_capture():
    # the same mechanism for any backward user code runs inside a compiled graph
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True), []]

    def step(st):
        a, b, log = st
        a.grad = b.grad = None
        log.clear()

        def hook(g):
            with torch.enable_grad():
                z = (b * 3).sin().sum()
            gb, = torch.autograd.grad(z, b)
            log.append(_node_name())
            return g + gb
        y = a.exp()
        y.register_hook(hook)
        (y * a).sum().backward()
        return [a.grad, b.grad, list(log)]
    differential(build, step, strict=True, captures=2)


def test_reentrant_inside_non_reentrant_checkpoint():
    def step(st):
        m, x, log = st
        m.zero_grad(set_to_none=True)
        log.clear()

        def inner(h):
            log.append(("inner", _node_name()))
            return m[2](m[1](h))

        def outer(inp):
            log.append(("outer", _node_name()))
            return m[3](cp.checkpoint(inner, m[0](inp), use_reentrant=True))
        cp.checkpoint(outer, x.requires_grad_(), use_reentrant=False).sum().backward()
        return [*grads(m), x.grad, list(log)]
    differential(_build, step, strict=True, captures=2)


# ---- bad input ------------------------------------------------------------------------------

def _bad_unpack_step(unpack):
    """The error and every .grad after the failing backward (eager has delivered m[3]'s grads
    before the node whose unpack fails ran; m[0]'s keep their earlier value)."""
    def step(st):
        m, x, _log = st
        m.zero_grad(set_to_none=True)
        m[0].weight.grad = torch.ones_like(m[0].weight)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = m[1](m[0](x))
        try:
            m[3](y).sum().backward()
        except Exception as e:  # noqa: BLE001 -- compared with eager's
            return [type(e).__name__, str(e), *grads(m)]
        return ["no error", *grads(m)]
    return step


def test_unpack_hook_that_raises_leaves_eagers_grads():
    def unpack(t):
        raise ValueError("unpack failed")
    differential(_build, _bad_unpack_step(unpack), strict=True)


@pytest.mark.parametrize("bad", ["shape", "dtype", "not a tensor"])
def test_unpack_hook_returning_the_wrong_thing(bad):
    def unpack(t):
        if bad == "shape":
            return t[..., :1]
        if bad == "dtype":
            return t.double()
        return 3
    differential(_build, _bad_unpack_step(unpack), strict=True)


def test_unpack_hook_not_callable():
    class Unpack:       # callable when registered (torch checks), not when the backward calls it
        def __call__(self, t):
            return t

    def step(st):
        m, x, _log = st
        m.zero_grad(set_to_none=True)
        Unpack.__call__ = lambda self, t: t
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, Unpack()):
            y = m[3](m[1](m[0](x)))
        del Unpack.__call__
        try:
            y.sum().backward()
        except Exception as e:  # noqa: BLE001 -- compared with eager's
            return [type(e).__name__, str(e), *grads(m)]
        return ["no error", *grads(m)]
    differential(_build, step, strict=True)


def test_unpack_hook_modifying_another_nodes_saved_tensor():
    # eager: MulBackward0 finds its saved `b` modified when it unpacks it, after ExpBackward0's
    # unpack hook did so, and raises; compiled_bw checked the version before the graph ran
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4)]

    def step(st):
        a, b = st
        a.grad = None
        bb = b.clone()
        z = a * bb

        def unpack(t):
            bb.mul_(2)
            return t
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = z.exp()
        try:
            y.sum().backward()
        except RuntimeError as e:
            return [str(e)[:60], a.grad]
        return ["no error", a.grad]
    differential(build, step, strict=True, captures=2)


def test_no_fallback_reason_mentions_saved_tensor_hooks():
    m, x, log = _build()
    with compiled_bw.enable(backend="eager", strict=True):
        compiled_bw.reset()
        _ckpt_step(True)([m, x, log])
    assert compiled_bw.stats().fallbacks == 0


class _DeepReentrant(torch.autograd.Function):
    """PyTorch's test_deep_reentrant: each backward runs a backward of its own, `x` levels deep."""
    @staticmethod
    def forward(ctx, x):
        with torch.enable_grad():
            ctx.x = x.detach().requires_grad_() - 1
        return ctx.x.detach()

    @staticmethod
    def backward(ctx, g):
        if ctx.x < 0:
            return g
        with torch.enable_grad():
            _DeepReentrant.apply(ctx.x).sum().backward()
        return g


def test_deep_reentrant_backward():
    # eager's engine runs levels past its MAX_DEPTH on other threads; compiled_bw nests compiled
    # runs up to run.MAX_NESTED_RUNS, then lets eager autograd run the deeper levels
    def build():
        return torch.tensor([200.0], requires_grad=True)

    def step(v):
        v.grad = None
        _DeepReentrant.apply(v).sum().backward()
        return [v.grad]
    differential(build, step, steps=2, captures=None, fallbacks=None, strict=False)


def test_bidirectional_gru_under_checkpoint():
    # #36 item 7: Dynamo refuses to trace an RNN, so the region's nodes run opaque (their saved
    # tensors carry the checkpoint's hooks), each grad of its unbind over time steps one bit of
    # user code: past 6 of them the capture fell back every step (graph/defined.py Note
    # [Nodes defined where any grad is])
    def build():
        torch.manual_seed(0)
        return [torch.nn.GRU(3, 4, bidirectional=True, batch_first=True),
                torch.randn(2, 8, 3, requires_grad=True)]

    def step(st):
        gru, x = st
        gru.zero_grad(set_to_none=True)
        x.grad = None
        out, h = cp.checkpoint(gru, x, use_reentrant=False)
        (out.pow(2).sum() + h.sum()).backward()
        return grads(gru) + [x.grad]
    differential(build, step, steps=2)
