"""Non-reentrant checkpoint regions whose recomputation is traced into the backward graph.

Consumes programs that checkpoint nn.Modules with torch.utils.checkpoint(use_reentrant=False);
produces eager vs compiled_bw comparisons (tests/differential.py, strict=True) and checks of
which regions were traced (their recomputed ops are graph nodes, no opaque call) and which
were declined (their nodes stay hooked opaque calls, eager's grads and side effects):
checkpoint/recompute.py Note [Traced recomputation].  Runs on both backends.
"""
import contextlib
import functools
import itertools

import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads
from hf_models import gpt2_checkpointed
from torch import nn

import compiled_bw

pytestmark = [pytest.mark.both_backends, pytest.mark.needs_feature("traced checkpoint recomputation")]


def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 6))


def _bn_mlp():
    # its recomputation writes BatchNorm's running stats: traced with static sizes
    # (recompute.py Note [Symbolic recomputation] leaves it out)
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.BatchNorm1d(8), nn.Linear(8, 6))


def _build(region=_mlp):
    def build():
        return [region(), nn.Linear(6, 2), torch.randn(5, 6), []]
    return build


def _step(**kw):
    def step(st):
        m, head, x, log = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        log.clear()
        xr = x.detach().requires_grad_()
        h = cp.checkpoint(m, xr, use_reentrant=False, **kw)
        head(h).pow(2).sum().backward()
        return [*grads(m), *grads(head), xr.grad, list(log)]
    return step


def _opaque_nodes() -> str:
    line = [ln for ln in compiled_bw.explain().splitlines() if "opaque nodes" in ln]
    return line[0] if line else ""


def test_checkpointed_mlp_is_traced():
    differential(_build(), _step(), strict=True)
    gm = compiled_bw.last_graph()
    ops = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.addmm.default in ops and torch.ops.aten.gelu.default in ops, gm.code
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    phs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert "ckpt0_0_weight" in phs and "ckpt0_arg0" in phs, phs   # parameters are inputs


def test_two_checkpointed_regions_and_preserve_rng_state_false():
    def build():
        return [nn.Sequential(_mlp(), _mlp()), nn.Linear(6, 2), torch.randn(5, 6), []]

    def step(st):
        m, head, x, _ = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        h = cp.checkpoint(m[0], x, use_reentrant=False, preserve_rng_state=False)
        h = cp.checkpoint(m[1], h, use_reentrant=False)
        head(h).sum().backward()
        return [*grads(m), *grads(head)]
    differential(build, step, strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def test_new_weights_and_attributes_are_inputs_or_keys():
    """A changed parameter value is a graph input (never baked in); a changed attribute
    (GELU's approximate, the training flag) is a new graph."""
    def step(st):
        m, head, x, _ = st
        k = st[3].count(None)
        st[3].append(None)
        with torch.no_grad():
            m[0].weight.add_(0.5)
        m[1].approximate = "tanh" if k % 2 else "none"
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        h = cp.checkpoint(m, x, use_reentrant=False)
        head(h).pow(2).sum().backward()
        return [*grads(m), *grads(head)]
    differential(_build(), step, strict=True, steps=4, captures=2)


def test_forward_patched_on_the_class_between_steps_is_a_new_graph():
    """Eager's recomputation calls the class's forward as it is at backward time."""
    original = nn.GELU.forward
    steps = []

    def patched(self, x):
        return torch.sigmoid(x)

    def step(st):
        steps.append(None)
        nn.GELU.forward = patched if len(steps) % 2 else original
        try:
            return _step()(st)
        finally:
            nn.GELU.forward = original
    differential(_build(), step, strict=True, steps=4, captures=2)


class _Traceable(nn.Module):
    compiled_bw_traceable = True

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.scale = 2.0

    def forward(self, x):
        return torch.tanh(self.lin(x)) * self.scale


def test_opted_in_class_is_traced_and_keyed_by_its_attributes():
    def step(st):
        m, head, x, _ = st
        m.scale += 1.0
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        h = cp.checkpoint(m, x, use_reentrant=False)
        head(h).sum().backward()
        return [*grads(m), *grads(head)]
    differential(_build(_Traceable), step, strict=True, steps=3, captures=3)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


# ---- declined: the region's nodes stay hooked opaque calls, eager's grads and effects ----

class _Counting(nn.Module):
    """Not opted in: its forward has a Python side effect (eager counts the recomputation)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.calls = []

    def forward(self, x):
        self.calls.append(1)
        return torch.tanh(self.lin(x))


class _DataDependent(nn.Module):
    compiled_bw_traceable = True

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        y = self.lin(x)
        return torch.tanh(y) if y.sum() > 0 else torch.sigmoid(y)


def _with_dropout():
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Dropout(0.3), nn.Linear(8, 6))


def _with_hook():
    m = _mlp()
    m.seen = []
    m[1].register_forward_hook(lambda mod, i, o: m.seen.append(tuple(o.shape)))
    return m


def test_region_with_dropout_is_traced():
    """Its random ops draw from the forward's RNG state (graph/rng.py; more cases in
    test_recompute_rng.py)."""
    differential(_build(_with_dropout), _step(), strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


@pytest.mark.parametrize("region", [
    _with_hook, _Counting, _DataDependent,
    # a cumulative average: the factor is 1 / float(num_batches_tracked), a value the trace
    # cannot read
    lambda: nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6, momentum=None))])
def test_declined_regions_run_as_eager(region):
    def step(st):
        out = _step()(st)
        m = st[0]
        seen = list(getattr(m, "seen", [])) + [len(getattr(m, "calls", []))]
        if isinstance(m, nn.Sequential) and isinstance(m[-1], nn.BatchNorm1d):
            seen.append(m[-1].running_mean.clone())
        return [out, seen]
    differential(_build(region), step, strict=True)
    assert "carry hooks" in _opaque_nodes(), "the region should have been declined"


# ---- regions that write their buffers (training BatchNorm): graph/mutated.py Note [Buffer
# writes at the recomputation point].  Eager's recomputation updates the running stats a
# second time, mid-backward: values, version counters (BatchNorm's native kernel bumps none
# for running_mean/var, `num_batches_tracked.add_(1)` one) and what a hook running before or
# after the recomputation reads are compared.

def _conv_bn(bn=nn.BatchNorm2d):
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), bn(4), nn.ReLU(),
                         nn.Conv2d(4, 4, 3, padding=1), bn(4))


def _bn_build(region=_conv_bn, hooks=False, regions=1, shared=False):
    def build():
        ms = [region()] * regions if shared else [region() for _ in range(regions)]
        head = nn.Linear(4, 2)
        log = []
        if hooks:
            norm = ms[0][1]

            def seen(where):
                return lambda p: log.append((where, norm.running_mean.clone(),
                                             norm.running_var.clone(),
                                             norm.num_batches_tracked.item(),
                                             norm.running_mean._version))
            # the head's grad is delivered before the region recomputes, the first conv's
            # after (its grads come from the recomputed backward)
            head.weight.register_post_accumulate_grad_hook(seen("before"))
            ms[0][0].weight.register_post_accumulate_grad_hook(seen("after"))
        return [ms, head, torch.randn(2, 3, 6, 6), log]
    return build


def _bn_step(st):
    ms, head, x, log = st
    for p in (*head.parameters(), *(p for m in ms for p in m.parameters())):
        p.grad = None
    log.clear()
    xr = x.detach().requires_grad_()
    h = xr
    for m in ms:
        h = cp.checkpoint(m, h if h is xr else h[:, :3], use_reentrant=False)
    head(h.mean((2, 3))).pow(2).sum().backward()
    bufs = [b for m in ms for b in m.buffers()]
    return [*(g for m in ms for g in grads(m)), *grads(head), xr.grad,
            [b.clone() for b in bufs], [b._version for b in bufs], list(log)]


def _assigns() -> int:
    from compiled_bw.graph.mutated import assign
    return len(compiled_bw.last_graph().graph.find_nodes(op="call_function", target=assign))


@pytest.mark.parametrize("hooks,regions", [(False, 1), (True, 1), (False, 2)],
                         ids=["plain", "hooks_before_and_after", "two_regions"])
def test_training_batchnorm_region_is_traced(hooks, regions):
    differential(_bn_build(hooks=hooks, regions=regions), _bn_step, strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    # per region 2 x (mean, var, count)
    assert _assigns() == 6 * regions, compiled_bw.last_graph().code


def test_hook_sees_the_recomputations_update():
    """The test above can fail: eager's hook after the recomputation reads the second update."""
    st = _bn_build(hooks=True)()
    log = _bn_step(st)[-1]
    assert [e[0] for e in log] == ["before", "after"] and (log[0][3], log[1][3]) == (1, 2), log


def test_instance_norm_with_running_stats_is_traced():
    """InstanceNorm updates its stats with `copy_` (one version bump each)."""
    region = functools.partial(_conv_bn, functools.partial(nn.InstanceNorm2d,
                                                           track_running_stats=True))
    differential(_bn_build(region), _bn_step, strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def test_one_batchnorm_in_two_regions():
    """Each region's recomputation updates the same buffers: two writes into one tensor, which
    the graph would see as two inputs (runtime/run.py _mutated_versions): eager autograd runs."""
    st = differential(_bn_build(regions=2, shared=True), _bn_step, fallbacks=3)
    assert all("another region writes too" in r for r in st.fallback_reasons), st.fallback_reasons


def test_batchnorm_region_under_no_grad_eval_forward_then_train():
    """eval() between steps: the region's key changes (training is an attribute), the eval
    recomputation writes nothing."""
    def step(st):
        out = _bn_step(st)
        for m in st[0]:
            m.train(not m.training)
        return out
    differential(_bn_build(), step, strict=True, steps=4, captures=2)


def test_function_region_is_declined():
    """A closure with a side effect outside the call (a list it appends to) keeps the hooked
    path, and runs as often as eager's."""
    def step(st):
        m, head, x, log = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None

        def f(inp):
            log.append("run")
            return m(inp)
        head(cp.checkpoint(f, x, use_reentrant=False)).sum().backward()
        return [*grads(m), list(log)]
    differential(_build(), step, strict=True)
    assert "carry hooks" in _opaque_nodes()


def _checkpoint_seq(functions, x, every=1, flatten=False):
    """timm's checkpoint_seq (timm/models/_manipulate.py), non-reentrant as timm's default:
    each segment is a closure over `start`, `end` and the tuple of modules."""
    def run_function(start, end, functions):
        def forward(_x):
            for j in range(start, end + 1):
                _x = functions[j](_x)
            return _x
        return forward

    if isinstance(functions, nn.Sequential):
        functions = functions.children()
    if flatten:
        functions = itertools.chain.from_iterable(functions)
    if not isinstance(functions, (tuple, list)):
        functions = tuple(functions)
    for start in range(0, len(functions), every):
        end = min(start + every - 1, len(functions) - 1)
        x = cp.checkpoint(run_function(start, end, functions), x, use_reentrant=False)
    return x


class _TimmBlock(nn.Module):
    """Not opted in (a library's block): pre-norm MLP with dropout and a residual."""

    def __init__(self, d=6, drop=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x)))))


@pytest.mark.parametrize(("every", "flatten"), [(1, False), (3, False), (1, True)])
def test_timm_checkpoint_seq_closures_are_traced(every, flatten):
    """Note [Checkpointed closures]: 10 blocks (more than one key's captures), segments of
    `every` blocks, or two stages flattened as timm's ResNet does: every segment traced, one
    graph over the steps, eager's grads with dropout."""
    def build():
        blocks = nn.Sequential(*[_TimmBlock() for _ in range(10)])
        if flatten:
            blocks = nn.Sequential(nn.Sequential(*blocks[:4]), nn.Sequential(*blocks[4:]))
        return [blocks.train(), torch.randn(5, 6)]

    def step(st):
        blocks, x = st
        blocks.zero_grad(set_to_none=True)
        xr = x.detach().requires_grad_()
        _checkpoint_seq(blocks, xr, every=every, flatten=flatten).pow(2).sum().backward()
        return [*grads(blocks), xr.grad]

    st = differential(build, step, strict=True)
    assert st.recompute_refused == 0, st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _BasicBlock(nn.Module):
    """Not opted in: a ResNet basic block (conv, training BatchNorm, ReLU, residual)."""

    def __init__(self, c=4):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


@pytest.mark.parametrize("hook", [False, True], ids=["plain", "hook_between_regions"])
def test_timm_checkpoint_seq_of_batchnorm_blocks_is_traced(hook):
    """timm's ResNet with set_grad_checkpointing: every segment's closure holds all the
    blocks (each region's inputs include the other segments' buffers, which another region
    writes: unread, so neither a fallback nor a version check's error -- a tensor hook between
    two regions is a call that checks the next region's inputs); the running stats and their
    versions are eager's."""
    def build():    # float64: three BatchNorm backwards amplify float32 rounding (eager's
        # own error against float64 is 6e-5 there, as large as Inductor's difference)
        return [nn.Sequential(*[_BasicBlock() for _ in range(3)]).double().train(),
                torch.randn(2, 4, 5, 5, dtype=torch.float64)]

    def step(st):
        blocks, x = st
        blocks.zero_grad(set_to_none=True)
        xr = x.detach().requires_grad_()
        h = _checkpoint_seq(blocks[:2], xr)
        if hook:
            h.register_hook(lambda g: g * 2)
        _checkpoint_seq(blocks[2:], h).pow(2).sum().backward()
        return [*grads(blocks), xr.grad, [b.clone() for b in blocks.buffers()],
                [b._version for b in blocks.buffers()]]

    st = differential(build, step, strict=True)
    assert st.recompute_refused == 0, st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert _assigns() == 18, compiled_bw.last_graph().code   # 3 blocks x 2 norms x 3 buffers


def test_torch_checkpoint_sequential_is_traced():
    """torch.utils.checkpoint.checkpoint_sequential (non-reentrant) checkpoints closures of
    the same shape as timm's (Note [Checkpointed closures]): every segment traced."""
    def build():
        return [nn.Sequential(*[_TimmBlock() for _ in range(6)]).train(), torch.randn(5, 6)]

    def step(st):
        blocks, x = st
        blocks.zero_grad(set_to_none=True)
        xr = x.detach().requires_grad_()
        cp.checkpoint_sequential(blocks, 3, xr, use_reentrant=False).pow(2).sum().backward()
        return [*grads(blocks), xr.grad]

    st = differential(build, step, strict=True)
    assert st.recompute_refused == 0 and st.recompute_captures >= 2, st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def test_checkpointed_gru_is_traced():
    """nn.GRU (two layers, dropout between them): Dynamo judges it with RNNs allowed (its
    graph never runs), and the CPU GRU cell's in-place ops on tensors it made (sigmoid_,
    tanh_, add_) are functionalized, not declined."""
    def build():
        return [nn.GRU(6, 8, num_layers=2, dropout=0.1, batch_first=True).train(),
                torch.randn(3, 4, 6)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        xr = x.detach().requires_grad_()
        out, h = cp.checkpoint(m, xr, use_reentrant=False)
        (out.pow(2).sum() + h.sum()).backward()
        return [*grads(m), xr.grad]

    st = differential(build, step, strict=True)
    assert st.recompute_refused == 0, st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def test_closure_reading_a_tensor_from_a_cell_is_declined():
    """A closure whose cell holds a tensor (not a module's parameter): the trace would make it
    a constant, so the region keeps the hooked path; the tensor gets eager's grad."""
    def build():
        return [_mlp(), torch.randn(6, requires_grad=True), torch.randn(5, 6)]

    def step(st):
        m, w, x = st
        m.zero_grad(set_to_none=True)
        w.grad = None

        def f(inp):
            return m(inp) * w
        cp.checkpoint(f, x.requires_grad_(), use_reentrant=False).pow(2).sum().backward()
        return [*grads(m), w.grad, x.grad]
    differential(build, step, strict=True)
    assert "carry hooks" in _opaque_nodes(), _opaque_nodes()


def test_retain_graph_then_second_backward_raises_as_eager():
    def step(st):
        m, head, x, _ = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        loss = head(cp.checkpoint(m, x, use_reentrant=False)).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        g = grads(m)
        try:
            loss.backward()
        except RuntimeError as e:
            return [*g, str(e)[:40]]
        return [*g, None]
    # the third backward raises eager's error from the walk (counted as a fallback each step)
    differential(_build(), step, strict=True, captures=None, fallbacks=3)


def test_changing_sizes_recapture_static_graphs():
    """A traced region whose recomputation writes a buffer (BatchNorm's running stats) has
    static sizes: a new batch size is a new graph (dynamic shapes decline it with a reason),
    never a graph traced for other sizes.  (Other regions' are symbolic:
    tests/test_checkpoint_dynamic.py.)"""
    def step(st):
        m, head, _, log = st
        log.append(None)
        x = torch.randn(3 + 2 * len(log), 6, requires_grad=True)
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        head(cp.checkpoint(m, x, use_reentrant=False)).pow(2).sum().backward()
        return [*grads(m), *grads(head), x.grad]
    st = differential(_build(_bn_mlp), step, strict=True, steps=3, captures=3)
    assert any("traced with static sizes" in r for r in st.recompile_reasons), \
        st.recompile_reasons


def test_new_sizes_every_step_back_off_to_eager_autograd():
    """runtime/cache.py Note [Recapture storms]: a new batch size at every step, which the
    region's static recomputation (it writes a buffer) cannot serve from one graph: after the
    first graph and two that are never reused, the next backwards run eager autograd without a walk (fallbacks
    with the reason), one is looked up again (a new size: captured, a longer backoff); a size
    seen before is a hit and ends the storm.  Eager's grads at every step."""
    sizes = [5, 7, 9, *range(11, 18, 2), 19, *range(21, 36, 2), 9, 7]

    def step(st):
        m, head, _, log = st
        x = torch.randn(sizes[len(log)], 6, requires_grad=True)
        log.append(None)
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        head(cp.checkpoint(m, x, use_reentrant=False)).pow(2).sum().backward()
        return [*grads(m), *grads(head), x.grad]
    # captures: 5, 7, 9 (storm: 11-17 eager), 19 (storm again, twice as long: 21-35 eager),
    # then 9 and 7 are hits
    st = differential(_build(_bn_mlp), step, strict=False, steps=len(sizes), captures=4,
                      fallbacks=12)
    assert all("Note [Recapture storms]" in r for r in st.fallback_reasons), st.fallback_reasons
    assert st.cache_hits == 2, st
    assert sum("the next" in n for n in st.notes) == 2, st.notes


# ---- not opted in: traced under Dynamo's guards (Note [Guarded recomputation]) ----------

class _User(nn.Module):
    """Not opted in: reads a config object's attribute and a global."""

    def __init__(self, cfg=None):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.cfg = cfg

    def forward(self, x):
        y = self.lin(x)
        y = torch.tanh(y) if self.cfg is None or self.cfg.act == "tanh" else torch.sigmoid(y)
        return y * _SCALE[0]


_SCALE = [2.0]


class _Cfg:
    act = "tanh"


def test_unopted_module_is_traced_under_guards():
    differential(_build(_User), _step(), strict=True)
    st = compiled_bw.stats()
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert (st.recompute_captures, st.recompute_refused) == (1, 0)
    ops = {n.target for n in compiled_bw.last_graph().graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.tanh.default in ops and torch.ops.aten.addmm.default in ops


@pytest.mark.parametrize("where", ["before_forward", "between_forward_and_backward"])
def test_config_and_global_read_by_the_forward_are_guarded(where):
    """A config attribute and a global the forward reads change between steps: eager's
    recomputation reads them at backward time; the guards are checked then, a failure is a
    new Dynamo trace (or an earlier one whose guards hold again), never a stale graph."""
    settings = [("tanh", 2.0), ("sigmoid", 2.0), ("tanh", 3.0), ("tanh", 2.0)]

    def build():
        return [_User(_Cfg()), nn.Linear(6, 2), torch.randn(5, 6), []]

    def step(st):
        m, head, x, log = st
        act, scale = settings[len(log)]
        log.append(None)
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        if where == "before_forward":
            m.cfg.act, _SCALE[0] = act, scale
        h = cp.checkpoint(m, x.requires_grad_(), use_reentrant=False)
        if where != "before_forward":
            m.cfg.act, _SCALE[0] = act, scale
        head(h).pow(2).sum().backward()
        return [*grads(m), *grads(head), x.grad]
    try:
        st = differential(build, step, strict=True, steps=4, captures=3)
    finally:
        _SCALE[0] = 2.0
    assert (st.recompute_captures, st.recompute_refused) == (3, 0), st
    assert st.recompute_guard_failures == 2, st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _MakesATensor(nn.Module):
    """Not opted in: makes a tensor from Python values in its forward (DeBERTa's
    `torch.tensor(size)` scale): a constant of the traced region, reached through
    lift_fresh_copy only."""

    def __init__(self, cfg):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.cfg = cfg

    def forward(self, x):
        y = self.lin(x)
        return y * torch.sqrt(torch.tensor(y.size(-1) * self.cfg.scale, dtype=torch.float))


def test_a_tensor_made_from_python_values_in_the_region_is_guarded():
    """The values the region's `torch.tensor(...)` reads change between steps (a config
    attribute): the guards see it, so each value is its own capture, never a stale constant."""
    scales = [2.0, 3.0, 2.0]

    def build():
        cfg = _Cfg()
        cfg.scale = 2.0
        return [_MakesATensor(cfg), torch.randn(5, 6), []]

    def step(st):
        m, x, log = st
        m.cfg.scale = scales[len(log)]
        log.append(None)
        m.zero_grad(set_to_none=True)
        h = cp.checkpoint(m, x.requires_grad_(), use_reentrant=False)
        h.tanh().pow(2).sum().backward()
        return [*grads(m), x.grad]

    st = differential(build, step, strict=True, captures=2)
    assert (st.recompute_captures, st.recompute_refused) == (2, 0), st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _MarksALeaf(nn.Module):
    """Not opted in: makes a tensor and sets its `requires_grad` from an attribute (T5's
    first decoder block does this to a zeros position bias when checkpointing), and returns
    it: the forward's leaf, whose `.grad` the user reads."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.mark = True

    def forward(self, x):
        b = torch.full((6,), 0.5)
        b.requires_grad = self.mark
        return torch.tanh(self.lin(x)) * b, b


def test_requires_grad_set_on_a_tensor_the_region_makes_is_traced():
    """Note [requires_grad set on a tensor the region makes]: the region is traced (Dynamo
    alone refuses the setattr), the flag is guarded (it decides what MulBackward0 saves: one
    tensor or two), and the forward's own leaf gets eager's `.grad`."""
    marks = [True, False, True]

    def build():
        return [_MarksALeaf(), torch.randn(5, 6), []]

    def step(st):
        m, x, log = st
        m.mark = marks[len(log)]
        log.append(None)
        m.zero_grad(set_to_none=True)
        h, b = cp.checkpoint(m, x.requires_grad_(), use_reentrant=False)
        loss = h.pow(2).sum() + (b * 3.0).sum() if b.requires_grad else h.pow(2).sum()
        loss.backward()
        return [*grads(m), x.grad, b.grad, b.requires_grad]

    st = differential(build, step, strict=True, captures=2)
    assert (st.recompute_captures, st.recompute_refused) == (2, 0), st
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _GlobalCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        global _COUNT
        _COUNT = _COUNT + 1
        return torch.tanh(self.lin(x))


_COUNT = 0


@pytest.mark.parametrize("region", [_Counting, _GlobalCounter])
def test_side_effect_declines_and_runs_as_often_as_eager(region):
    def build():
        global _COUNT
        _COUNT = 0      # eager's and our run each count from 0
        return _build(region)()

    def step(st):
        out = _step()(st)
        return [out, len(getattr(st[0], "calls", [])), _COUNT]
    differential(build, step, strict=True)
    assert "carry hooks" in _opaque_nodes(), "the region should have been declined"
    assert compiled_bw.stats().recompute_refused == 1


def test_hf_gpt2_gradient_checkpointing_is_traced():
    differential(*gpt2_checkpointed(0.0), strict=True, steps=2)
    st = compiled_bw.stats()
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert st.recompute_captures >= 1 and st.recompute_refused == 0, st
    assert f"checkpoint regions: dynamo_traces={st.recompute_captures} " in compiled_bw.explain()


@pytest.mark.needs_feature("traced selective checkpointing")
def test_hf_gpt2_selective_checkpointing_is_traced():
    """Hugging Face's gradient checkpointing with a SAC context_fn (gradient_checkpointing_kwargs)."""
    import functools
    context = functools.partial(cp.create_selective_checkpoint_contexts, _save_mm)
    differential(*gpt2_checkpointed(0.0, context_fn=context), strict=True, steps=2)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert _sac_placeholders(), "the saved matmuls should be graph inputs"


def test_hf_gpt2_with_dropout_is_traced():
    """Dropout's masks are drawn from the forward's RNG state (graph/rng.py)."""
    differential(*gpt2_checkpointed(0.1), strict=True, steps=2)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


class _Unopted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def test_unopted_forward_patched_on_the_class_between_steps_is_a_new_graph():
    """Dynamo's guards do not cover a class's forward: it is in the region key."""
    original = _Unopted.forward
    steps = []

    def patched(self, x):
        return torch.sigmoid(self.lin(x))

    def step(st):
        steps.append(None)
        _Unopted.forward = patched if len(steps) % 2 else original
        try:
            return _step()(st)
        finally:
            _Unopted.forward = original
    differential(_build(_Unopted), step, strict=True, steps=4, captures=2)


class _Branchy(nn.Module):
    """Not opted in; `branchy` instances branch on a tensor's value (Dynamo refuses them)."""

    def __init__(self, branchy=False):
        super().__init__()
        self.branchy = branchy
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        return h * 2 if self.branchy and torch.isfinite(h).all() else h


def test_refused_instance_does_not_change_the_verdict_on_its_siblings():
    """Instances of one class, the first in the forward refused by Dynamo (walked last): the
    others stay traced on every step (guarded.py Note [A refusal stops new traces only]),
    so one graph serves all steps."""
    def build():
        return [nn.ModuleList([_Branchy(True), _Branchy(), _Branchy()]), nn.Linear(6, 2),
                torch.randn(5, 6)]

    def step(st):
        ms, head, x = st
        for p in (*ms.parameters(), *head.parameters()):
            p.grad = None
        h = xr = x.detach().requires_grad_()
        for m in ms:
            h = cp.checkpoint(m, h, use_reentrant=False)
        head(h).pow(2).sum().backward()
        return [*grads(ms), *grads(head), xr.grad]
    st = differential(build, step, strict=True, steps=3)
    assert st.recompute_refused == 1, st
    ops = [n.target for n in compiled_bw.last_graph().graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.aten.addmm.default) >= 2, "two regions should be traced"


# ---- selective activation checkpointing: recompute.py Note [Selective recomputation] ----

Policy = cp.CheckpointPolicy
MM = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)


def _deep():
    """Three addmm per forward (an odd count: a counter's parity alternates between steps)."""
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 6))


def _save_mm(ctx, op, *args, **kwargs):
    return Policy.MUST_SAVE if op in MM else Policy.PREFER_RECOMPUTE


def _save_nothing(ctx, op, *args, **kwargs):
    return Policy.PREFER_RECOMPUTE


def _save_all(ctx, op, *args, **kwargs):
    return Policy.PREFER_SAVE


def _recompute_mm_save_activations(ctx, op, *args, **kwargs):
    return Policy.MUST_RECOMPUTE if op in MM else Policy.MUST_SAVE


def _sac_step(context_fn, backwards=1):
    """A SAC-checkpointed region whose weights are scaled in place between forward and
    backward: a saved op's output (old weights) and a recomputed one (new weights) differ, so
    the grads show which ops eager's recomputation took from the storage."""
    def step(st):
        m, head, x, log = st[:4]
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        log.clear()
        xr = x.detach().requires_grad_()
        h = cp.checkpoint(m, xr, use_reentrant=False, context_fn=lambda: context_fn(st))
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(1.25)
        loss = head(h).pow(2).sum()
        out = []
        for k in range(backwards):
            try:
                loss.backward(retain_graph=k + 1 < backwards)
                out.append(None)
            except RuntimeError as e:
                out.append(str(e))
            out += [*grads(m), *grads(head), *grads([xr])]
        return out
    return step


def _policy(p):
    return lambda st: cp.create_selective_checkpoint_contexts(p)


def _sac_placeholders() -> list:
    gm = compiled_bw.last_graph()
    return [n.name for n in gm.graph.find_nodes(op="placeholder") if "_sac" in n.name]


@pytest.mark.parametrize("policy", [_save_mm, _save_nothing, _save_all,
                                    _recompute_mm_save_activations, MM[1:]])
@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_region_is_traced_with_eagers_saved_outputs(policy):
    p = list(policy) if isinstance(policy, tuple) else policy
    differential(_build(_deep), _sac_step(_policy(p)), strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    ops = {n.target for n in compiled_bw.last_graph().graph.nodes if n.op == "call_function"}
    saves_mm = policy in (_save_mm, _save_all, MM[1:])
    assert (torch.ops.aten.addmm.default not in ops) == saves_mm, compiled_bw.last_graph().code
    assert bool(_sac_placeholders()) == (policy is not _save_nothing), _sac_placeholders()


def _counting_build():
    st = _build(_deep)()
    return [*st, [0]]


def _every_other_mm(st):
    """A stateful policy (a counter across steps, in the state): it saves the 1st, 3rd, ...
    addmm it ever sees, so with three per step its verdicts alternate between steps."""
    count = st[4]

    def policy(ctx, op, *args, **kwargs):
        if op in MM:
            count[0] += 1
            return Policy.MUST_SAVE if count[0] % 2 else Policy.PREFER_RECOMPUTE
        return Policy.PREFER_RECOMPUTE
    return cp.create_selective_checkpoint_contexts(policy)


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_stateful_counter_policy_gets_each_steps_verdicts():
    st = differential(_counting_build, _sac_step(_every_other_mm), strict=True, steps=4,
                      captures=2)
    assert st.cache_hits >= 2 and "carry hooks" not in _opaque_nodes()


def _torchtitan_style(st):
    """torchtitan's per-region policy: a fresh counter per context_fn call, saving mm but
    every second one (in the forward, where SAC calls the policy)."""
    meta = {"mm": 0}

    def policy(ctx, op, *args, **kwargs):
        if op in MM:
            meta["mm"] += 1
            if meta["mm"] % 2 == 0:
                return Policy.PREFER_RECOMPUTE
            return Policy.MUST_SAVE
        return Policy.PREFER_RECOMPUTE
    return cp.create_selective_checkpoint_contexts(policy)


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_torchtitan_style_policy():
    differential(_build(_deep), _sac_step(_torchtitan_style), strict=True, steps=3)
    assert len(_sac_placeholders()) == 2, _sac_placeholders()


_SAVE_MM_NOW = [True]


def _global_flag(ctx, op, *args, **kwargs):
    """Saves the two 8-wide addmm outputs, or (flag off) the two activations after them:
    as many saved tensors, same shapes -- only the verdicts differ."""
    if _SAVE_MM_NOW[0]:
        save = op in MM and ctx.op_output.shape[-1] == 8
    else:
        save = op in (torch.ops.aten.gelu.default, torch.ops.aten.tanh.default)
    return Policy.MUST_SAVE if save else Policy.PREFER_RECOMPUTE


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_policy_reading_a_global_flag_flipped_between_steps():
    def build():
        _SAVE_MM_NOW[0] = True
        return _build(_deep)()

    def step(st):
        out = _sac_step(_policy(_global_flag))(st)
        _SAVE_MM_NOW[0] = not _SAVE_MM_NOW[0]
        return out
    differential(build, step, strict=True, steps=4, captures=2)


@pytest.mark.parametrize("policy", [_save_mm, _save_nothing])
@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_retain_graph_then_second_backward_as_eager(policy):
    """Eager's second recomputation of a region whose storage was consumed raises ("backward an
    extra time"); one that saved nothing recomputes again.  Ours: the first is traced and
    consumes the entries, the second declines (the storage is consumed) and runs hooked."""
    st = differential(_build(_deep), _sac_step(_policy(policy), backwards=2), strict=True,
                      captures=None, allow_errors=True)
    assert st.captures >= 1


class _Outer(nn.Module):
    """Plain checkpoint outside, SAC inside (the inner region is checkpointed again in the
    outer's recomputation)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _mlp()
        self.out = nn.Linear(6, 6)

    def forward(self, x):
        h = cp.checkpoint(self.inner, x, use_reentrant=False,
                          context_fn=lambda: cp.create_selective_checkpoint_contexts(_save_mm))
        return self.out(torch.tanh(h))


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_nested_inside_plain_checkpoint():
    differential(_build(_Outer), _sac_step(lambda st: (contextlib.nullcontext(),
                                                       contextlib.nullcontext())),
                 strict=True, captures=None)


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_region_with_dropout_is_traced():
    differential(_build(_with_dropout), _sac_step(_policy(_save_mm)), strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def _respects_hooks() -> dict:
    """checkpoint(respect_saved_tensors_hooks=True) where this torch has it (2.15+): SAC's
    saved outputs then go through the user's pack hook, and its lookup unpacks them."""
    import inspect
    return ({"respect_saved_tensors_hooks": True}
            if "respect_saved_tensors_hooks" in inspect.signature(cp.checkpoint).parameters else {})


@pytest.mark.needs_feature("traced selective checkpointing")
def test_sac_region_under_users_saved_tensors_hooks():
    """The pack hook halves what it stores and the unpack hook doubles it back, each call
    logged: a trace that read a packed value instead of eager's unpacked one (the region's
    saved inputs; on 2.15 with respect_saved_tensors_hooks, also SAC's stored outputs:
    torchapi.checkpoint.hooked_entry) would get grads off by a factor of two."""
    def step(st):
        m, head, x, log = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        log.clear()

        def pack(t):
            log.append(("pack", tuple(t.shape)))
            return t * 0.5

        def unpack(p):
            log.append(("unpack", tuple(p.shape)))
            return p * 2

        xr = x.detach().requires_grad_()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            h = cp.checkpoint(m, xr, use_reentrant=False, **_respects_hooks(),
                              context_fn=lambda: cp.create_selective_checkpoint_contexts(_save_mm))
            loss = head(h).pow(2).sum()
        loss.backward()
        return [*grads(m), *grads(head), xr.grad, list(log)]
    differential(_build(_deep), step, captures=None)


class _Keyworded(nn.Module):
    """A block taking keyword arguments as timm's BEiT/EVA blocks do (`rope=`, a bias that
    may be None, a plain scale), its forward not opted in (traced under Dynamo's guards)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, rope=None, bias=None, scale=1.0):
        h = self.lin(x) * scale
        if rope is not None:
            h = h * rope[0] + h.roll(1, -1) * rope[1]
        if bias is not None:
            h = h + bias
        return torch.tanh(h)


def _kw_step(kwargs_of):
    def step(st):
        m, head, x, count = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        k = len(count)          # this run's step
        count.append(k)
        xr = x.detach().requires_grad_()
        kw = kwargs_of(k)
        h = cp.checkpoint(m, xr, use_reentrant=False, **kw)
        tensors = [t for t in torch.utils._pytree.tree_leaves(kw) if isinstance(t, torch.Tensor)]
        for t in tensors:
            if t.requires_grad:
                t.retain_grad()
        head(h).pow(2).sum().backward()
        return [*grads(m), *grads(head), xr.grad, [t.grad for t in tensors]]
    return step


def test_checkpoint_keyword_arguments_are_graph_inputs():
    """Note [Checkpoint keyword arguments]: tensors passed by keyword (a rope pair, a bias that
    requires grad) are inputs of the traced recomputation, plain keywords are keyed (a scale
    that changes is a new graph), None stays None; no opaque call."""
    def kwargs_of(k):
        cos, sin = torch.rand(6), torch.rand(6)
        bias = torch.randn(6, requires_grad=True)
        return {"rope": (cos, sin), "bias": bias if k != 1 else None, "scale": 2.0 if k < 3 else 0.5}
    st = differential(_build(_Keyworded), _kw_step(kwargs_of), steps=4, strict=True, captures=3)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
    assert st.recompute_captures >= 1, st


def test_checkpoint_keyword_tensor_changed_in_place_before_the_backward():
    """Eager's recomputation reads a keyword's tensor as it is at backward time (checkpoint
    keeps the object, unchecked); so does the graph, whose input it is."""
    def step(st):
        m, head, x, _ = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        bias = torch.randn(6)
        xr = x.detach().requires_grad_()
        h = cp.checkpoint(m, xr, use_reentrant=False, bias=bias)
        bias.mul_(3)            # after the forward, before the recomputation
        head(h).pow(2).sum().backward()
        return [*grads(m), xr.grad]
    differential(_build(_Keyworded), step, strict=True)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()


def test_checkpoint_keyword_argument_of_another_kind_is_declined():
    """A keyword holding a module (any value that is neither a tensor nor plain) declines:
    the region's nodes run hooked, as eager's recomputation."""
    class _Takes(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, x, act=None):
            return act(self.lin(x))
    differential(_build(_Takes), _kw_step(lambda k: {"act": nn.Tanh()}), strict=True)
    assert "carry hooks" in _opaque_nodes(), "the region should have been declined"


# ---- nested checkpoints (recompute.py Note [Nested regions]) ------------------------------

class _NestBlock(nn.Module):
    """A residual block, not torch.nn's own class (Dynamo judges and guards it)."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(6, 6)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return x + self.drop(self.fc(nn.functional.gelu(self.norm(x))))


class _NestStage(nn.Module):
    """Checkpoints each of its blocks inside its own (outer) checkpointed forward, as timm's
    poolformer stages do; `edges`: ops of its own around the blocks (else the stage saves
    nothing but its blocks' arguments); `hooks`: the blocks run under a user's
    saved_tensors_hooks (their arguments are then packed by those, not by the stage)."""

    def __init__(self, blocks, edges: bool = True, hooks: list | None = None) -> None:
        super().__init__()
        self.down = nn.Linear(6, 6) if edges else nn.Identity()
        self.blocks = nn.ModuleList(blocks)
        self.edges = edges
        self.hooks = hooks

    def forward(self, x):
        x = self.down(x)
        log = self.hooks
        for b in self.blocks:
            if log is None:
                x = cp.checkpoint(b, x, use_reentrant=False)
                continue
            with torch.autograd.graph.saved_tensors_hooks(
                    lambda t: (log.append("pack"), t)[1], lambda t: (log.append("unpack"), t)[1]):
                x = cp.checkpoint(b, x, use_reentrant=False)
        return x.tanh() if self.edges else x


def _nested(kind: str):
    if kind == "three_levels":
        return _NestStage([_NestStage([_NestBlock(), _NestBlock()]), _NestBlock()])
    if kind == "torch_blocks":      # inner regions of torch.nn's own modules (no Dynamo)
        return _NestStage([nn.Sequential(nn.Linear(6, 6), nn.GELU()) for _ in range(2)])
    if kind == "user_hooks":
        return _NestStage([_NestBlock(), _NestBlock()], hooks=[])
    p = 0.3 if kind == "dropout" else 0.0
    return _NestStage([_NestBlock(p) for _ in range(3)], edges=kind != "blocks_only")


@pytest.mark.parametrize(("kind", "early_stop"), [
    ("plain", True), ("plain", False), ("blocks_only", True), ("blocks_only", False),
    ("dropout", True), ("three_levels", True), ("torch_blocks", True), ("user_hooks", True)])
def test_nested_checkpoints_of_modules_are_traced(kind, early_stop):
    """Eager recomputes a nested region from arguments its enclosing region recomputes
    (torch's Note [Nestable Checkpoint]); so does the graph: no node of either runs hooked
    (but where a user's hooks packed the inner arguments: those regions are declined)."""
    def step(st):
        m, head, x, _ = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        if m.hooks is not None:
            m.hooks.clear()
        xr = x.detach().requires_grad_()
        with cp.set_checkpoint_early_stop(early_stop):
            h = cp.checkpoint(m, xr, use_reentrant=False)
            head(h).pow(2).sum().backward()
        return [*grads(m), *grads(head), xr.grad, list(m.hooks or ())]
    differential(_build(functools.partial(_nested, kind)), step, strict=True)
    hooked = "carry hooks" in _opaque_nodes()
    assert hooked == (kind == "user_hooks"), _opaque_nodes()


def test_nested_checkpoints_retain_graph_and_a_second_backward():
    """A second backward recomputes both levels again in eager (a new graph task); the
    graph computes them again from its inputs."""
    def step(st):
        m, head, x, _ = st
        for p in (*m.parameters(), *head.parameters()):
            p.grad = None
        xr = x.detach().requires_grad_()
        loss = head(cp.checkpoint(m, xr, use_reentrant=False)).pow(2).sum()
        loss.backward(retain_graph=True)
        g = [*grads(m), xr.grad]
        loss.backward()
        return [*g, *grads(m), xr.grad]
    # two graphs: retain_graph=True and False
    differential(_build(functools.partial(_nested, "plain")), step, strict=True, captures=2)
    assert "carry hooks" not in _opaque_nodes(), _opaque_nodes()
