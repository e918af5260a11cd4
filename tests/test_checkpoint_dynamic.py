"""Checkpointed regions over varying sizes: one dynamic graph with the recomputation traced.

Each test runs a program with non-reentrant `torch.utils.checkpoint` over a sequence of sizes
(batch, sequence length) under eager autograd and under compiled_bw (tests/differential.py:
every grad, None-ness, dtype and strides, and what the program logs), and asserts how many
captures it took and how many were dynamic (checkpoint/recompute.py Note [Symbolic
recomputation]).  Eager semantics: the region recomputes once per backward, at the first
unpack of any of its saved tensors, from the arguments and parameters it was called with;
nothing of that is observable but its values, which the graph computes; with dropout in the
region, eager's recomputation draws the forward's numbers again (checkpoint restores the RNG
state the forward saved, then puts the global generator back), so its masks are the forward's
and the draws after the backward are what they would have been.  A region whose recomputation
writes a buffer (training BatchNorm's running stats) keeps the graph static: one capture per
size, never a graph reused for sizes it baked in.
"""
import functools

import pytest
import torch
import torch.utils.checkpoint as cp
from differential import differential, grads, selected_backend, sized

import compiled_bw

pytestmark = [pytest.mark.both_backends, pytest.mark.foreground_compile,
              pytest.mark.needs_feature("traced checkpoint recomputation")]


def _run(sizes, make, *, captures, dynamic_captures):
    build, step = sized(sizes, make)
    st = differential(build, step, steps=len(sizes), captures=captures, strict=True)
    assert st.dynamic_captures == dynamic_captures, st.recompile_reasons
    code = compiled_bw.last_graph().code
    assert "hooked " not in code, [ln for ln in code.splitlines() if "hooked " in ln][:3]
    return st


def _mlp(state, n):
    if state is None:
        return [torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 6)), torch.nn.Linear(6, 1)]
    body, head = state
    body.zero_grad(set_to_none=True)
    head.zero_grad(set_to_none=True)
    x = torch.randn(n, 6, requires_grad=True)
    h = cp.checkpoint(body, x, use_reentrant=False)
    head(h).pow(2).mean().backward()
    return [*grads(body), *grads(head), x.grad]


def test_checkpointed_mlp_over_batch_sizes_one_dynamic_graph():
    st = _run([8, 12, 20, 9, 33, 12], _mlp, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4, st.recompile_reasons


def _encoder(state, n):
    # a transformer layer: reshapes through (batch, heads, length, head dim) whose sizes the
    # recomputation computes from the symbolic length
    if state is None:
        layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        return [layer, torch.nn.Linear(16, 1)]
    layer, head = state
    layer.zero_grad(set_to_none=True)
    head.zero_grad(set_to_none=True)
    x = torch.randn(3, n, 16, requires_grad=True)
    h = cp.checkpoint(layer, x, use_reentrant=False)
    head(h).tanh().sum().backward()
    return [*grads(layer), *grads(head), x.grad]


def test_checkpointed_encoder_layer_over_lengths():
    """TransformerEncoderLayer holds its activation function as an attribute, so its region is
    judged by Dynamo (checkpoint/guarded.py): the first length's guards are static, the second
    length's Dynamo trace has symbolic sizes (a second static capture: its guards are another
    capture), and from the third length on one dynamic graph serves every length."""
    st = _run([10, 14, 23, 17, 31, 19], _encoder, captures=3, dynamic_captures=1)
    assert st.dynamic_hits == 3, st.recompile_reasons


def _two_blocks(state, n):
    # two regions of one module class (one region key) and a nested one: the inner region's
    # argument is the outer region's recomputed tensor
    if state is None:
        return [torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.SiLU())
                                    for _ in range(3))]
    blocks, = state
    blocks.zero_grad(set_to_none=True)
    x = torch.randn(n, 5, requires_grad=True)

    def outer(t):
        return cp.checkpoint(blocks[2], blocks[1](t), use_reentrant=False)
    h = cp.checkpoint(blocks[0], x, use_reentrant=False)
    h = cp.checkpoint(outer, h, use_reentrant=False)
    h.sum().backward()
    return [*grads(blocks), x.grad]


def test_several_and_nested_regions_over_batch_sizes():
    """The enclosing region's function is a closure, judged by Dynamo (checkpoint/guarded.py
    Note [Checkpointed closures]): static guards at the first size, symbolic ones from its
    second trace on, then one dynamic graph for every size; the inner region's argument
    (the enclosing region's recomputed tensor) is symbolic in it."""
    st = _run([4, 7, 11, 19, 30], _two_blocks, captures=3, dynamic_captures=1)
    assert st.dynamic_hits == 2, st.recompile_reasons


def _region(make, width: int, buffers=lambda m: []):
    """make(state, n) of one checkpointed module in training mode over a batch of n: its
    grads, the input's, numbers drawn after the backward, and `buffers(module)`."""
    def run(state, n):
        if state is None:
            return [make().train()]
        m, = state
        m.zero_grad(set_to_none=True)
        x = torch.randn(n, width, requires_grad=True)
        cp.checkpoint(m, x, use_reentrant=False).sin().sum().backward()
        return [*grads(m), x.grad, torch.rand(2), *buffers(m)]
    return run


_dropout_mlp = _region(lambda: torch.nn.Sequential(
    torch.nn.Linear(6, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 6)), 6)


def test_a_region_with_dropout_over_batch_sizes_one_dynamic_graph():
    """Its recomputation draws the forward's numbers (graph/rng.py Note [Functional RNG in a
    symbolic recomputation]): one dynamic graph over the sizes, each step's grads eager's
    (the forward's mask), and the inputs drawn after each backward eager's (the global
    generator untouched by the graph)."""
    st = _run([8, 12, 20, 9, 33, 12], _dropout_mlp, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4, st.recompile_reasons
    assert "compiled_bw.rng_draw.default(" in compiled_bw.last_graph().code


class _Noisy(torch.nn.Module):
    """Three draws in one region, in an order the graph must keep: two dropouts of different
    p and a multiplicative noise (`rand_like`)."""
    compiled_bw_traceable = True

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(5, 12), torch.nn.Linear(12, 5)

    def forward(self, x):
        h = torch.nn.functional.dropout(self.a(x).relu(), 0.3, self.training)
        h = h * torch.rand_like(h)
        return torch.nn.functional.dropout(self.b(h), 0.6, self.training)


_noisy = _region(_Noisy, 5)


def test_a_region_drawing_three_times_over_batch_sizes():
    """Each draw takes the state the one before it left, as eager's recomputation draws in
    order from the forward's state: each step's grads eager's, and the numbers drawn after
    the backward (returned) eager's."""
    st = _run([7, 10, 16, 5, 22], _noisy, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3, st.recompile_reasons
    assert compiled_bw.last_graph().code.count("compiled_bw.rng_draw.default(") == 3


_bn_mlp = _region(lambda: torch.nn.Sequential(
    torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 6)), 6,
    lambda m: [m[1].running_mean.clone(), m[1].num_batches_tracked.clone()])


def test_a_region_writing_a_buffer_stays_static():
    """Training BatchNorm writes its running stats in the recomputation too (graph/mutated.py
    Note [Buffer writes at the recomputation point]): not traced symbolically, so one static
    graph per size, each size's grads and buffers eager's."""
    build, step = sized([8, 12, 8], _bn_mlp)
    st = differential(build, step, steps=3, captures=2, strict=True)
    assert st.dynamic_captures == 0
    assert any("traced with static sizes" in r for r in st.recompile_reasons), \
        st.recompile_reasons


class _Gather(torch.nn.Module):
    """Advanced indexing inside the region (Falcon's, Mixtral's): IndexBackward0 saves its
    index tensors, a list the recomputation gives; one index permutes every column, so a
    grad scattered without it would still have the right shape."""
    compiled_bw_traceable = True

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x)
        perm = torch.tensor([3, 0, 5, 1, 4, 2])
        return h[:, perm].tanh() * h[:, torch.tensor([1, 1, 0])].sum(-1, keepdim=True)


def test_a_region_indexing_with_saved_index_tensors_over_batch_sizes():
    """The dynamic graph's IndexBackward0 reads its saved index list from the region's
    recomputation (it read none there, so its index_put had no index: an internal assert of
    the CPU kernel, or a grad not permuted back): each step's grads eager's."""
    st = _run([5, 8, 13, 7, 21], _region(_Gather, 6), captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3, st.recompile_reasons


def _sizes_of_one(state, n):
    if state is None:
        return [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())]
    body, = state
    body.zero_grad(set_to_none=True)
    x = torch.randn(n, 4, requires_grad=True)
    cp.checkpoint(body, x, use_reentrant=False).sum().backward()
    return [*grads(body), x.grad]


def test_a_batch_of_one_between_dynamic_hits():
    """A size of 1 between sizes the dynamic graph serves: the eager backend's graph serves
    it too; on Inductor 1 is specialized (trace/dynamic.py Note [Sizes of one]): a dynamic
    capture of its own, as without checkpointing.  Every step eager's grads."""
    sizes = [6, 9, 1, 13, 1, 9]
    build, step = sized(sizes, _sizes_of_one)
    one = selected_backend() == "inductor"
    st = differential(build, step, steps=len(sizes), captures=3 if one else 2, strict=True)
    assert st.dynamic_captures == (2 if one else 1), st.recompile_reasons
    assert st.dynamic_hits == len(sizes) - st.captures, st.recompile_reasons


class _Cut(torch.nn.Module):
    """Saves a slice of `n` columns of its input (SinBackward0 saves it): what it saves
    depends on `n` at the time it runs."""
    compiled_bw_traceable = True

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.n = 3

    def forward(self, x):
        return self.lin(x)[:, :self.n].sin()


def test_a_recomputation_that_saves_other_sizes_raises_eagers_error():
    """Step 5 changes `n` between its forward and its backward: eager's recomputation saves
    2 columns where the forward saved 3 and checkpoint raises; the graph the earlier steps'
    sizes made (dynamic over the batch) must not serve that step."""
    sizes = [5, 8, 11, 7, 13, 9]
    raised = []

    def make(state, b):
        if state is None:
            return [_Cut()]
        cut, = state
        cut.zero_grad(set_to_none=True)
        x = torch.randn(b, 4, requires_grad=True)
        y = cp.checkpoint(cut, x, use_reentrant=False)
        if b == 13:
            cut.n = 2
        try:
            y.sum().backward()
        except Exception as e:
            raised.append(type(e).__name__)
            raise
        finally:
            cut.n = 3
        return [*grads(cut), x.grad]
    build, step = sized(sizes, make)
    st = differential(build, step, steps=len(sizes), captures=None, fallbacks=None,
                      allow_errors=True)
    assert st.dynamic_captures == 1, st.recompile_reasons
    assert raised == ["CheckpointError"] * 2, raised     # eager's, then ours (compared equal)


class _Scaled(torch.nn.Module):
    """Not opted in (judged by Dynamo): its forward reads a Python number it is called with."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, scale=1.0, cols=4):
        return self.lin(x)[:, :cols].tanh() * scale


def _call(module, x, scale, cols):
    return module(x, scale=scale, cols=cols)


def test_python_numbers_of_a_guarded_region_stay_values_over_varying_sizes():
    """With symbolic sizes Dynamo keeps Python numbers specialized (a value guard each): the
    partial's `scale` and `cols`, changed at later steps while the batch keeps changing, are
    never read from a graph traced with other values (Hugging Face passes its block's
    keywords through functools.partial the same way)."""
    sizes = [5, 8, 11, 7, 13, 9, 6, 10]
    scales = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0]
    cols = [4, 4, 4, 4, 4, 4, 3, 3]

    def make(state, b):
        if state is None:
            return [_Scaled(), [0]]
        m, k = state
        m.zero_grad(set_to_none=True)
        x = torch.randn(b, 4, requires_grad=True)
        fn = functools.partial(_call, m, scale=scales[k[0]], cols=cols[k[0]])
        k[0] += 1
        cp.checkpoint(fn, x, use_reentrant=False).pow(2).sum().backward()
        return [*grads(m), x.grad]
    build, step = sized(sizes, make)
    st = differential(build, step, steps=len(sizes), captures=7, strict=True)
    # 5 and 8 static (Dynamo's second trace, symbolic, is another capture number), 11 dynamic,
    # 7 its hit; the new scale at 13 and the new cols at 6 are new Dynamo captures (value
    # guards), each a static graph, then a dynamic one at the next size (9, 10)
    assert st.dynamic_captures == 3 and st.dynamic_hits == 1, st.recompile_reasons
    assert st.recompute_captures == 4, st
