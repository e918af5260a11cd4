"""Dynamic shapes: one capture with symbolic sizes serves a sequence of sizes.

Each test runs a program over a sequence of sizes under eager autograd and under compiled_bw
(differential: every grad, its dtype and strides) and asserts how many captures it took, and
how many of them were dynamic (trace/dynamic.py Note [Dynamic shapes]).  A graph whose
sizes reach a formula we cannot make symbolic stays static: one capture per shape, never a
graph reused for sizes it baked in.
"""
import pytest
import torch
import torch.nn.functional as F
from differential import differential, grads, selected_backend, sized
from functions import Double

import compiled_bw
from compiled_bw.trace.dynamic import TWO_VALUES

pytestmark = [pytest.mark.both_backends, pytest.mark.foreground_compile]


def run(sizes, make, *, captures, dynamic_captures, options=None):
    build, step = sized(sizes, make)
    st = differential(build, step, steps=len(sizes), captures=captures, options=options)
    assert st.dynamic_captures == dynamic_captures, st.recompile_reasons
    # every capture, static or dynamic, is one Inductor compile on that backend
    assert st.inductor_compiles == (captures if selected_backend() == "inductor" else 0)
    return st


def mlp(state, n):
    if state is None:
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    state.zero_grad()
    state(torch.randn(n, 4)).pow(2).mean().backward()
    return grads(state)


def test_batch_sizes_one_dynamic_capture():
    st = run([8, 16, 24, 32, 40, 48], mlp, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4
    reason = st.recompile_reasons[1]
    assert "dynamic graph" in reason and "MeanBackward0" in reason and "16" in reason, reason


def test_a_dynamic_graph_captured_where_two_nodes_saved_one_tensor():
    """The dynamic capture (second size) is a step where two nodes saved one tensor (c2 is
    c1); its hits alternate distinct and shared: each placeholder must be read where its own
    input is (trace/trace.py Note [One placeholder per input]), not the shared one's."""
    def make(state, n):
        if state is None:
            return [torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)]
        w1, w2 = state
        w1.grad = w2.grad = None
        c1 = torch.randn(n, 5)
        c2 = c1 if n % 2 else torch.randn(n, 5)
        (w1 * c1 + (w2 * c2).tanh() * c1).sum().backward()
        return grads(state)
    st = run([4, 5, 6, 7, 8, 9], make, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4


def test_dynamic_true_from_the_first_capture():
    st = run([5, 9, 13], mlp, captures=1, dynamic_captures=1, options={"dynamic": True})
    assert st.dynamic_hits == 2


def test_dynamic_false_one_capture_per_shape():
    run([5, 9, 13], mlp, captures=3, dynamic_captures=0, options={"dynamic": False})


def one_specialized():   # trace/dynamic.py Note [Sizes of one]
    return selected_backend() == "inductor"


def test_a_dimension_going_to_one_and_back():
    # the eager backend's dynamic graph serves a batch of 1 too; on Inductor 1 is specialized:
    # a capture of its own, and the next larger size reuses the first dynamic graph
    if one_specialized():
        st = run([8, 16, 1, 24, 1, 32], mlp, captures=3, dynamic_captures=2)
        assert any("outside the traced range" in r and "self_sym_sizes[0] = 1" in r
                   for r in st.recompile_reasons), st.recompile_reasons
    else:
        st = run([8, 16, 1, 24, 1, 32], mlp, captures=2, dynamic_captures=1)
        assert st.dynamic_hits == 4


def test_a_size_of_zero_is_specialized():
    st = run([8, 16, 0, 24, 0], mlp, captures=3, dynamic_captures=1)
    assert st.dynamic_hits == 1


def ones_broadcast(state, n):
    # a dim that is 1 at some steps and n at others, against parameters whose dim is 1 (they
    # broadcast: their grads are summed to size 1) and against tensors of the same size n (at
    # n == 1 neither side broadcasts): sum to a size-1 dim, mean over the dim, addmm with a
    # batch of n (a forward of the same structure for every n)
    if state is None:
        return [torch.randn(1, 4, requires_grad=True), torch.randn(4, 3, requires_grad=True)]
    a, w = state
    for p in state:
        p.grad = None
    x = torch.randn(n, 4, requires_grad=True)
    y = torch.randn(n, 1, requires_grad=True)
    h = x * a + y                       # [n, 4]: a and y broadcast, x does not
    e = a * h                           # a's grad: summed back to [1, 4] (at n == 1: not)
    s = e.sum(0, keepdim=True) * e.mean(0, keepdim=True)
    b = torch.addmm(w[0], h, w)        # a batch of n (mm is in bmm_batch: it still guards)
    loss = s.pow(2).sum() + b.tanh().mean() + b.mean(0).sum()
    return list(torch.autograd.grad(loss, [a, w, x, y]))   # the grads' own strides


def test_size_one_and_back_broadcasting():
    # n -> 1 -> n -> 1: every grad and its strides as eager's at 1 (a graph that took size 1
    # for "not broadcasting" wrongly would differ here)
    # (y's grad is summed to [n, 1]: sum_to_size asks whether n is 1, a guard `Ne(n, 1)` on
    # both backends, so 1 is a capture of its own here; the point is the values at 1: Inductor
    # compiled without that specialization gave wrong ones)
    run([5, 7, 1, 3, 1, 2], ones_broadcast, captures=3, dynamic_captures=2)


def bmm_batch(state, n):
    # bmm with a batch of n against a [1, 3, 2] parameter: its grad [n, 3, 2] is summed to
    # [1, 3, 2] where n > 1 and not at n == 1 (validate_outputs compares the shapes: a guard
    # `Ne(n, 1)`, another capture at 1); an expand to a size of 1 keeps the dim's stride (at
    # n > 1: 0), so a saved tensor's strides differ there too; mm's backward of an [n, 3]
    # self asks whether its transpose is contiguous (n == 1?): a guard too
    if state is None:
        return [torch.randn(1, 3, 2, requires_grad=True)]
    (m,) = state
    m.grad = None
    x = torch.randn(n, 1, 3, requires_grad=True)
    b = torch.bmm(x, torch.randn(n, 3, 2) * m) + torch.bmm(x, m.expand(n, 3, 2))
    b = b + torch.matmul(x, m[0])       # folded to mm of [n, 3]: mm's trace guards n != 1
    return list(torch.autograd.grad(b.tanh().sum(), [m, x]))


def test_bmm_with_a_batch_going_to_one():
    st = run([5, 7, 1, 3, 1, 2], bmm_batch, captures=3, dynamic_captures=2)
    assert st.dynamic_hits == 3


def sum_to_size_one(state, n):
    # sum_to_size(1, 4) of [n, 4] is a SumToSize node for n > 1 and none at n == 1 (another
    # forward structure: another graph); Tensor.expand of [1, 4] to [n, 4] always is one
    if state is None:
        return [torch.randn(1, 4, requires_grad=True)]
    (a,) = state
    a.grad = None
    x = torch.randn(n, 4, requires_grad=True)
    z = (a.expand(n, 4) * x).sum_to_size(1, 4).sin()
    return list(torch.autograd.grad(z.sum(), [a, x]))


def test_sum_to_size_with_a_dim_going_to_one():
    st = run([3, 5, 1, 7, 1, 4], sum_to_size_one, captures=3, dynamic_captures=1)
    assert st.dynamic_hits == 2


def ones_against_n(state, k):
    # two dims vary independently, one of them between 1 and larger sizes: at (1, n) the
    # first broadcasts against the second; the graph traced at (3, 5) took "equal or not
    # broadcasting": its guards must send (1, n) elsewhere when that is wrong
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    n, m = [(2, 3), (3, 5), (1, 6), (4, 4), (1, 1), (6, 1), (5, 7)][k]
    x = torch.randn(n, 1, 4) * w
    y = torch.randn(1, m, 4) * w
    z = torch.randn(n, m, 4)
    ((x + y) * z).sum(0).pow(2).mean().backward()
    return grads(state)


def test_independent_dims_one_broadcasting_against_the_other():
    # (sum's backward expands by a saved size: a guard `Ne(s, 1)` where that size is 1, so
    # some of these steps recapture; the point is that no step reuses a graph wrongly)
    build, step = sized(list(range(7)), ones_against_n)
    st = differential(build, step, steps=7, captures=None)
    assert st.dynamic_hits >= 1 and st.captures < 7, st.recompile_reasons


def squeeze_ones(state, n):
    # SqueezeBackward0 re-inserts exactly the dims that were 1: at n == 1 one more
    if state is None:
        return [torch.randn(1, 3, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = (torch.randn(n, 1, 3) * w).squeeze()
    x.sin().sum().backward()
    return grads(state)


def test_squeeze_of_a_dim_going_to_one():
    # squeeze() of [1, 1, 3] drops two dims, of [n, 1, 3] one: another structure, static
    run([2, 4, 1, 6, 1, 8], squeeze_ones, captures=3, dynamic_captures=1)


def seq_model(state, t):
    # sequence length varies: Linear on [B, T, D] (view -> mm -> unsafe view), a sum over T
    if state is None:
        return [torch.randn(6, 5, requires_grad=True), torch.randn(5, requires_grad=True)]
    w, b = state
    for p in state:
        p.grad = None
    x = torch.randn(2, t, 6)
    h = torch.nn.functional.linear(x, w.t(), b).tanh()
    h.sum(1).mean().backward()
    return grads(state)


def test_sequence_length():
    run([5, 9, 13, 17], seq_model, captures=2, dynamic_captures=1)


def broadcast(state, n):
    if state is None:
        return [torch.randn(1, 4, requires_grad=True), torch.randn(4, requires_grad=True)]
    a, b = state
    for p in state:
        p.grad = None
    x = torch.randn(n, 4, requires_grad=True)
    y = torch.randn(n, 1)
    ((x * a + b) * y).sum().backward()
    return grads([a, b, x])


def test_broadcasting_leaf_grads_sum_to_their_shape():
    run([3, 6, 9, 12], broadcast, captures=2, dynamic_captures=1)


def mean_divisor(state, n):
    # MeanBackward0 divides by numel, MeanBackward1 by the reduced dims' sizes: a baked divisor
    # would give a wrong grad for every later size
    if state is None:
        return [torch.randn(3, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 3)
    ((x * w).mean() + (x * w).mean(0).sum() + (x * w).mean(dim=(0, 1), keepdim=True).sum()
     ).backward()
    return grads(state)


def test_mean_divisor_is_a_symbolic_size():
    run([2, 4, 6, 8], mean_divisor, captures=2, dynamic_captures=1)


def views(state, n):
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 4) * w
    y = x.view(n * 4).reshape(2, n * 2)[:, 1:].unsqueeze(0).squeeze(0)
    z = x.expand(3, n, 4).sum(0)[1]
    (y.pow(2).sum() + z.sum()).backward()
    return grads(state)


def test_view_reshape_expand_slice_select_sizes():
    run([4, 6, 8, 10], views, captures=2, dynamic_captures=1)


def column_major(state, n):
    # mm_mat1_backward returns a column-major grad for a column-major mat1: the check on its
    # saved strides must see this step's strides
    if state is None:
        return [torch.randn(4, 3, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(4, n).t().requires_grad_()
    (x @ w).sin().sum().backward()
    return [w.grad, x.grad]


def test_column_major_mm_input():
    run([5, 7, 9], column_major, captures=2, dynamic_captures=1)


def split_sizes(state, n):
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    a, b = (torch.randn(n, 4) * w).split(n // 2)
    (a.sum() * 2 + b.pow(2).sum()).backward()
    return grads(state)


def test_split_sizes_are_symbolic():
    # SplitBackward0 saves self's sizes and split_size (n // 2): both become SymInt inputs
    st = run([4, 6, 8, 10, 12], split_sizes, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def split_with_sizes(state, n):
    # SplitWithSizesBackward0: sizes [2, n - 3, 1]; the last output is unused (its grad is
    # undefined: zeros of a symbolic size), the middle one is split again
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    a, b, _ = (torch.randn(n, 4) * w).split([2, n - 3, 1])
    c, d = b.split(1, dim=1)[:2]
    (a.sum() * 2 + b.pow(2).mean() + c.sum() * d.sum()).backward()
    return grads(state)


def test_split_with_sizes_and_an_unused_output():
    st = run([5, 7, 9, 11], split_with_sizes, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 2


def cat_sizes(state, n):
    # CatBackward0's input sizes are hidden in C++: read from the input metadata of the nodes
    # it feeds, so each input's grad is narrowed at a symbolic offset
    if state is None:
        return [torch.randn(4, requires_grad=True), torch.randn(3, 4, requires_grad=True)]
    w, c = state
    for p in state:
        p.grad = None
    x = torch.randn(n, 4) * w
    y = torch.randn(2 * n + 1, 4) * w
    z = torch.cat([x, c, y]).pow(2)
    (z.sum() + torch.cat([x, 2 * x], dim=-1).mean()).backward()
    return grads(state)


def test_cat_offsets_are_symbolic():
    st = run([3, 5, 7, 9], cat_sizes, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 2


def cat_no_grad_in_the_middle(state, n):
    # the middle input needs no grad: its length (which shifts the last input's offset) is in
    # no metadata, but it is what the other two leave of the grad's length (nodes.py Note
    # [Hidden saved state]): symbolic like the rest
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    torch.cat([torch.randn(2, 4) * w, torch.randn(n, 4), torch.randn(3, 4) * w]).pow(
        2).sum().backward()
    return grads(state)


def test_cat_with_an_input_without_grad_in_the_middle():
    run([1, 4, 6, 8], cat_no_grad_in_the_middle, captures=2, dynamic_captures=1)


def cat_no_grad_on_both_sides(state, n):
    # the same total length every step, split differently between the two inputs that need
    # no grad: the middle input's offset is in no metadata and the signature is the same, so
    # CatBackward0 runs as the real node (one capture), never with another step's offset
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    g = torch.linspace(-1, 1, 9 * 4).view(9, 4)
    (torch.cat([torch.randn(n, 4), torch.randn(2, 4) * w, torch.randn(7 - n, 4)]) * g).sum(
        ).backward()
    return grads(state)


def test_cat_with_inputs_without_grad_on_both_sides_is_never_reused_wrongly():
    st = run([1, 4, 2, 6], cat_no_grad_on_both_sides, captures=1, dynamic_captures=0)
    assert st.cache_hits == 3


def cat_no_grad_first_split(state, n):
    # two inputs without grad before the one with: however the hidden length is split between
    # them, the last input's offset is the same, so a graph of one split is right for another
    # (the C++ walk's key holds the hidden sizes torch's compiled_args reports: a capture per
    # split; the Python walk's signature does not: one capture)
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    g = torch.linspace(-1, 1, 9 * 4).view(9, 4)
    (torch.cat([torch.randn(n, 4), torch.randn(7 - n, 4), torch.randn(2, 4) * w]) * g).sum(
        ).backward()
    return grads(state)


def test_cat_with_inputs_without_grad_before_the_one_with():
    build, step = sized([1, 4, 2, 6, 4], cat_no_grad_first_split)
    st = differential(build, step, steps=5, captures=None)
    assert st.captures <= 4 and st.cache_hits >= 1, st.recompile_reasons


def kv_cache(state, t):
    # Hugging Face's DynamicCache in training: each layer concatenates its new keys/values
    # onto an empty cache that needs no grad (torch.cat([cache, new], dim=-2))
    if state is None:
        return torch.nn.ModuleList([torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)])
    qkv, out = state
    state.zero_grad()
    x = torch.randn(2, t, 8)
    q, k, v = (z.view(2, t, 2, 4).transpose(1, 2) for z in qkv(x).split(8, -1))
    k = torch.cat([torch.zeros(2, 2, 0, 4), k], dim=-2)
    v = torch.cat([torch.zeros(2, 2, 0, 4), v], dim=-2)
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out(a.transpose(1, 2).reshape(2, t, 8)).pow(2).mean().backward()
    return grads(state)


def test_kv_cache_cat_over_sequence_lengths():
    run([5, 9, 12, 7, 16], kv_cache, captures=2, dynamic_captures=1)


def transformer(state, t):
    # one attention block over sequence lengths: embedding, layer_norm, split of a fused qkv,
    # view/transpose/permute, bmm, softmax, gelu, reshape (the common transformer nodes)
    if state is None:
        return torch.nn.ModuleList([torch.nn.Embedding(11, 8), torch.nn.LayerNorm(8),
                                    torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)])
    emb, ln, qkv, out = state
    state.zero_grad()
    ids = torch.randint(0, 11, (2, t))
    h = ln(emb(ids))
    q, k, v = qkv(h).split(8, -1)
    q = q.view(2, t, 2, 4).transpose(1, 2)
    k = k.view(2, t, 2, 4).permute(0, 2, 3, 1)
    v = v.reshape(2, t, 2, 4).transpose(1, 2)
    a = torch.softmax(q @ k / 2, -1)
    o = out((a @ v).transpose(1, 2).reshape(2, t, 8))
    torch.nn.functional.gelu(o + h).mean().backward()
    return grads(state)


def test_transformer_sequence_lengths():
    st = run([5, 9, 13, 17, 6], transformer, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def aot_forward(dynamic, view: bool):
    """A torch.compile'd forward (aot_eager): with dynamic=True its AOT backward takes the batch
    size as a SymInt (ctx.symints) and its saved tensors have symbolic sizes; view=True
    reshapes by it, so the spliced module's view sizes come from the symint."""
    w = torch.randn(4, 3, requires_grad=True)

    @torch.compile(backend="aot_eager", dynamic=dynamic)
    def f(x, w):
        y = (x @ w).sin()
        if view:
            y = y.reshape(2, -1).cos().reshape(-1, 3)
        return y

    def aot(state, n):
        if state is None:   # each run (eager, ours) from a fresh Dynamo: the same compiles
            torch._dynamo.reset()
            return [w]
        w.grad = None
        x = torch.randn(2 * n, 4, requires_grad=True)
        f(x, w).pow(2).mean().backward()
        return [w.grad.clone(), x.grad.clone()]
    return aot


def aot_splice_off() -> str | None:
    """Why AOT backward splicing is off on this torch (torch 2.11: torchapi/dynamo.py Note [AOT
    backward splicing per release]), else None."""
    from compiled_bw import torchapi
    return torchapi.features_off().get("AOT backward splicing")


def assert_aot_opaque_on_this_release(st):
    """Where splicing is off: every capture ran the AOT backward as one opaque call, with a
    note naming the release and the feature (and the grads were eager's: differential)."""
    why = aot_splice_off()
    notes = [n for n in st.notes if "CompiledFunctionBackward" in n]
    assert len(notes) == st.captures and all(why in n for n in notes), (why, st.notes)
    assert "AOT backward splicing is off" in compiled_bw.explain()


@pytest.mark.parametrize("view", [False, True])
def test_aot_backward_with_symints_is_spliced_symbolic(view):
    # the AOT backward of a dynamic forward is one class for every size: its symints become
    # SymInt graph inputs and its saved tensors symbolic, one dynamic capture for all sizes
    if aot_splice_off():        # torch 2.11: one opaque call, a static capture per size
        assert_aot_opaque_on_this_release(run([3, 5, 7, 9, 6], aot_forward(True, view),
                                              captures=5, dynamic_captures=0))
        return
    st = run([3, 5, 7, 9, 6], aot_forward(True, view), captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3
    # the AOT backward's symints are what changed (graph inputs, not baked constants)
    assert any("CompiledFunctionBackward: AOT backward symint" in r
               for r in st.recompile_reasons), st.recompile_reasons


def test_aot_backward_of_a_recompiled_forward():
    # dynamic=None: Dynamo compiles the forward static for the first size, then dynamic: the
    # AOT backward's class changes once (a static capture each), then one dynamic capture
    if aot_splice_off():        # torch 2.11: one opaque call, a static capture per size
        assert_aot_opaque_on_this_release(run([3, 5, 7, 9, 11], aot_forward(None, False),
                                              captures=5, dynamic_captures=0))
        return
    run([3, 5, 7, 9, 11], aot_forward(None, False), captures=3, dynamic_captures=1)


def bias_width(state, n):
    # the bias grad is [2n, 8] summed to (8,); at the dynamic capture 2n == 8 by chance: a
    # shape comparison there must not become a guard (every later size would recapture)
    if state is None:
        return torch.nn.Linear(4, 8)
    state.zero_grad()
    state(torch.randn(n, 2, 4)).tanh().sum().backward()
    return grads(state)


def test_a_size_equal_to_a_width_by_chance_is_not_guarded():
    st = run([3, 4, 5, 6, 7], bias_width, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def test_image_height_and_width():
    def conv(state, hw):
        if state is None:
            return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                                       torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                       torch.nn.Linear(4, 2))
        state.zero_grad()
        state(torch.randn(2, 3, *hw)).square().mean().backward()
        return grads(state)
    run([(8, 8), (12, 10), (16, 16), (9, 7)], conv, captures=2, dynamic_captures=1)


def test_recompile_log_names_node_and_dim(caplog, monkeypatch):
    from compiled_bw import config
    monkeypatch.setattr(config, "enabled", {"recompiles"})   # COMPILED_BW_LOG=recompiles
    compiled_bw.reset()
    net = mlp(None, None)
    with caplog.at_level("INFO", logger="compiled_bw"):
        with compiled_bw.enable(backend=selected_backend()):
            for n in (8, 16, 0):
                mlp(net, n)
    text = caplog.text
    assert "node 0 MeanBackward0: saved value self_sym_sizes[0]: 8 -> 16" in text, text
    assert "node 0 MeanBackward0: saved value self_sym_numel = 0 outside the traced range" \
        in text, text


def mm_layouts(state, n):
    # the same sizes and key positions, but mm_mat1_backward's column-major test
    # (strides[1] == sizes[0]) answers differently: a shape guard of the dynamic graph decides
    # (unchecked, the column-major graph would return row-major steps' grads with the wrong
    # strides)
    if state is None:
        return [torch.randn(4, 3, requires_grad=True)]
    (w,) = state
    w.grad = None
    if n % 4 == 1:
        x = torch.randn(4, n).t()               # column-major: strides (1, n)
    else:
        x = torch.randn(4, n + 2).t()[:n]       # strides (1, n + 2): not column-major
    x.requires_grad_()
    return list(torch.autograd.grad((x @ w).sin().sum(), [x, w]))   # the grads' own strides


def test_shape_guard_decides_a_formula_branch():
    st = run([5, 9, 11, 13, 7], mm_layouts, captures=3, dynamic_captures=2)
    assert any("shape guard" in r and "failed" in r for r in st.recompile_reasons), \
        st.recompile_reasons


def strides_only(state, k):
    # the same sizes, the saved mat1 alternately row- and column-major: only strides change
    if state is None:
        return [torch.randn(4, 3, requires_grad=True)]
    (w,) = state
    n = 6 if k < 3 else 10
    x = torch.randn(n, 4) if k % 2 == 0 else torch.randn(4, n).t()
    x.requires_grad_()
    return list(torch.autograd.grad((x @ w).sin().sum(), [x, w]))


def test_strides_that_change_are_checked():
    # the dynamic capture fixes the changed stride (4), so the later layouts capture static
    # graphs (runtime/dynamic.py Note [Dynamic graphs that pin a size]; 3 dynamic before)
    run([0, 1, 2, 3, 4, 5], strides_only, captures=4, dynamic_captures=1)


def grad_retain(state, n):
    # grad() with inputs, retain_graph=True and a second call on the same graph
    if state is None:
        return mlp(None, None)
    x = torch.randn(n, 4, requires_grad=True)
    loss = state(x).tanh().sum()
    ps = [x, *state.parameters()]
    first = torch.autograd.grad(loss, ps, retain_graph=True)
    second = torch.autograd.grad(loss, ps[:2])
    return [*first, *second]


def test_grad_inputs_and_retain_graph():
    # two graphs per size (all inputs; x and one weight), each static once then dynamic
    run([3, 5, 7, 9], grad_retain, captures=4, dynamic_captures=2)


def test_another_graph_of_the_same_length_after_a_dynamic_one():
    # a dynamic graph's key masks positions inside PowBackward0's entry; a later backward
    # through other nodes (as many, same options) has no such position there: it must simply
    # miss (it raised IndexError out of the user's backward)
    def build():
        return [torch.randn(n, requires_grad=True) for n in (3, 4, 5, 6)]

    def step(xs):
        out = []
        for x in xs[:3]:
            x.grad = None
            x.pow(2).sum().backward()
            out.append(x.grad)
        xs[3].grad = None
        xs[3].neg().sum().backward()
        return out + [xs[3].grad]
    differential(build, step, steps=1, captures=None)


_UNPACKED: list = []    # shapes the user's unpack hook saw, in order


def _kept(t):
    return t


def _logged_unpack(t):
    _UNPACKED.append(tuple(t.shape))
    return t


def user_code(kind):
    def make(state, n):
        if state is None:
            return [torch.randn(4, requires_grad=True)]
        (w,) = state
        w.grad = None
        h = torch.randn(n, 4) * w
        k0 = len(_UNPACKED)
        if kind == "custom":
            h = Double.apply(h)
        elif kind == "unpack":      # its nodes unpack through a user's hook (calls/unpacked.py)
            with torch.autograd.graph.saved_tensors_hooks(_kept, _logged_unpack):
                h = h.sin()
        else:
            h.register_hook(lambda g: g * 3)
        h.sin().sum().backward()
        return [*grads(state), _UNPACKED[k0:]]
    return make


@pytest.mark.parametrize("kind", ["custom", "hook"])
def test_user_code_inside_stays_static_and_says_why(kind):
    # an opaque call's output shapes are fixed in its capture: one static capture per size,
    # each right, and the recompile log says which node keeps it static
    st = run([3, 5, 7], user_code(kind), captures=3, dynamic_captures=0)
    assert any("stays static" in r and ("custom Function" in r or "has hooks" in r)
               for r in st.recompile_reasons), st.recompile_reasons


@pytest.mark.parametrize("kind", ["custom", "hook"])
def test_user_code_inside_over_new_sizes_every_step_backs_off(kind):
    """runtime/cache.py Note [Recapture storms]: a graph that cannot be dynamic (an opaque
    call, a hooked tensor) over a new size at every step is a static graph per step, never
    reused (a `torch.compile`d model with dropout in checkpointed layers over varying
    lengths): after the first graph and two more, the next backwards run eager autograd
    without a walk, one is looked up again (a new size: captured, a longer backoff), and a
    size seen before is a hit that ends it.  Eager's grads and hook calls at every step."""
    sizes = [3, 5, 7, *range(9, 16, 2), 17, *range(19, 34, 2), 7, 5]
    build, step = sized(sizes, user_code(kind))
    # captures: 3, 5, 7 (storm: 9-15 eager), 17 (storm again, twice as long: 19-33 eager),
    # then 7 and 5 are hits
    st = differential(build, step, steps=len(sizes), captures=4, fallbacks=12)
    assert all("Note [Recapture storms]" in r for r in st.fallback_reasons), st.fallback_reasons
    assert st.cache_hits == 2, st


def test_nodes_unpacking_through_user_hooks_over_new_sizes_every_step_back_off():
    """The same where a node unpacks its saved tensors through a user's hook (a call of the
    real node: calls/unpacked.py): three graphs never reused, then eager autograd, the
    unpack hook called as eager calls it at every step."""
    build, step = sized([3, 5, 7, 9, 11, 13, 15], user_code("unpack"))
    st = differential(build, step, steps=7, captures=3, fallbacks=4)
    assert all("Note [Recapture storms]" in r for r in st.fallback_reasons), st.fallback_reasons


# ---- steps served again by their walk key (runtime/dynamic.py Note [Dynamic hits by walk key])
# The sizes repeat, so that most steps are served by the key a dynamic graph served before;
# every grad is compared with eager's at every step, and the counts say which graph ran.

def test_sizes_changing_every_step_served_by_their_key():
    # 5: static; 8: the dynamic capture; then every step another size than the last, each
    # size seen before (a graph bound to another step's sizes would give grads of the wrong
    # shape)
    sizes = [5, 8, 16, 24, 8, 16, 24, 16, 8, 24]
    st = run(sizes, mlp, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == len(sizes) - 2


def test_a_dimension_going_to_one_and_back_by_key():
    sizes = [5, 8, 1, 8, 1, 16, 1, 16, 8]
    if one_specialized():   # 1: a dynamic capture of its own (Note [Sizes of one])
        st = run(sizes, mlp, captures=3, dynamic_captures=2)
        assert st.dynamic_hits == len(sizes) - 3
    else:
        st = run(sizes, mlp, captures=2, dynamic_captures=1)
        assert st.dynamic_hits == len(sizes) - 2


def test_two_dynamic_graphs_of_one_structure_by_key():
    # mm_layouts: column-major steps (n % 4 == 1) and the others take two dynamic graphs of
    # the same key positions; each size comes back and must get its own graph's strides
    sizes = [5, 9, 11, 13, 7, 9, 11, 13, 7, 11, 9]
    st = run(sizes, mm_layouts, captures=3, dynamic_captures=2)
    assert st.dynamic_hits == len(sizes) - 3


def test_a_static_key_is_found_before_the_dynamic_graph():
    # 8's static graph exists: 8 runs it every time (a static hit), the other sizes the
    # dynamic graph captured at 16
    sizes = [8, 16, 8, 16, 8, 24, 16, 8, 24]
    st = run(sizes, mlp, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4


def offset_views(state, k):
    # the saved mat1 of mm is a view into a larger buffer: at some steps it starts at offset 0,
    # at others further in, with the same sizes and strides (the walk key is the same: it
    # holds no storage offsets); the dynamic graph was traced at offset 0
    if state is None:
        return [torch.randn(4, 3, requires_grad=True)]
    (w,) = state
    w.grad = None
    n, off = k
    x = torch.randn(n + off, 4)[off:]
    return list(torch.autograd.grad((x @ w).sin().sum(), [w]))


def test_a_guard_failing_after_several_hits_of_the_same_key():
    # (10, 0) is served by the dynamic graph (captured at (8, 0)) twice, then (10, 3) -- the
    # same walk key -- fails its storage-offset guard: a second dynamic graph, which serves it
    # from then on; (10, 0) again gets the first graph
    sizes = [(6, 0), (8, 0), (10, 0), (10, 0), (10, 3), (10, 3), (12, 0), (12, 0), (10, 0)]
    st = run(sizes, offset_views, captures=3, dynamic_captures=2)
    assert st.dynamic_hits == 6
    assert any("saved tensor" in r and "is not the traced" in r
               for r in st.recompile_reasons), st.recompile_reasons


def value_selecting(state, n):
    # max/min/kthvalue/median/mode over a dim save the input's sizes (self_sym_sizes): symbolic
    # in our copy of value_selecting_reduction_backward (one capture per size before)
    if state is None:
        return [torch.randn(6, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 6) * w
    y = torch.randn(3, n, 6) * w
    loss = x.max(0).values.sum() + x.min(1, keepdim=True).values.pow(2).sum() \
        + y.kthvalue(2, dim=-1).values.sum() + y.median(1).values.exp().sum() \
        + y.amax(0).sum() + x.nanmedian(-2, keepdim=True).values.sum()
    loss.backward()
    return grads(state)


def test_value_selecting_reductions_are_symbolic():
    st = run([5, 8, 3, 12, 6], value_selecting, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def repeats(state, n):
    # repeat/tile save the input's sizes and the repeats (RepeatBackward0): both symbolic in
    # our copy of repeat_backward; the repeats of z follow n, and a repeat of 1 (x's second
    # dim) is summed over by no reshape
    if state is None:
        return [torch.randn(4, requires_grad=True), torch.randn(2, 3, requires_grad=True)]
    w, z = state
    w.grad = z.grad = None
    x = torch.randn(n, 4) * w
    loss = x.repeat(2, 1, 3).sin().sum() + x.tile(3).pow(2).mean() \
        + x.repeat(1, 1).exp().sum() + z.repeat(n, 2).cos().sum()
    loss.backward()
    return grads(state)


def test_repeat_sizes_and_repeats_are_symbolic():
    st = run([5, 8, 3, 12, 6], repeats, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def indexing(state, n):
    # advanced indexing saves the input's sizes and the index tensors (IndexBackward0): the
    # sizes symbolic in our copy of index_backward, the indices' lengths symbolic dims of
    # saved tensors; repeated indices accumulate
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 4) * w
    g = torch.Generator().manual_seed(n)
    rows = torch.randint(0, n, (n + 3,), generator=g)
    cols = torch.tensor([0, 2, 2, 3])
    loss = x[rows].sin().sum() + x[:, cols].pow(2).sum() \
        + x[rows[:2].unsqueeze(1), cols].exp().sum() + x[[0, n - 1]].sum()
    loss.backward()
    return grads(state)


def test_index_sizes_and_index_lengths_are_symbolic():
    st = run([5, 8, 3, 12, 6], indexing, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def selecting(state, n):
    # index_select saves the input's sizes and the index (IndexSelectBackward0): the sizes
    # symbolic in our copy of index_select_backward, the index's length a symbolic dim of a
    # saved tensor (an embedding-like gather over both dims; repeated indices accumulate)
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 4) * w
    g = torch.Generator().manual_seed(n)
    rows = torch.randint(0, n, (n + 2,), generator=g)
    loss = x.index_select(0, rows).sin().sum() \
        + x.index_select(1, torch.tensor([3, 0, 0])).pow(2).sum()
    loss.backward()
    return grads(state)


def test_index_select_sizes_and_index_lengths_are_symbolic():
    st = run([5, 8, 3, 12, 6], selecting, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def windows(state, n):
    # nodes that save their input's sizes, each read by our copy of its formula with the sizes
    # symbolic: sliding windows (Tensor.unfold: UnfoldBackward0), diagonal, trace, and an
    # in-place squeeze_ (SqueezeBackward3, 4, 5: the in-place variants of squeeze)
    if state is None:
        return [torch.randn(3, requires_grad=True), torch.randn(2, 1, 1, requires_grad=True)]
    w, k = state
    w.grad = k.grad = None
    x = torch.randn(2, n + 2) * w[:1]
    img = torch.randn(1, 2, n, n + 1) * k
    sq = (torch.randn(n, 1, 3) * w).squeeze_(1)
    sq2 = (torch.randn(1, n, 1) * w[0]).squeeze_()
    sq3 = (torch.randn(n, 1, 1) * w[1]).squeeze_((1, 2))
    loss = (x.unfold(1, 3, 1) * w).sin().sum() + x.unfold(1, 2, 2).sum() \
        + img[0].diagonal(0, 1, 2).sin().sum() + img[0, 0].diagonal(1).pow(2).sum() \
        + (img[0, 1] * 2).trace() + (img[0, 0, :, :2] * 3).trace() + sq.tanh().sum() + sq2.pow(2).sum() + sq3.sin().sum()
    loss.backward()
    return grads(state)


def test_window_diagonal_trace_and_squeeze_sizes_are_symbolic():
    st = run([5, 8, 3, 12, 6], windows, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def upsampling(state, n):
    # F.interpolate in every mode (Upsample*Backward0 save the input's sizes and the output
    # size): by a scale factor (the output size varies with the input's) and to a fixed size
    if state is None:
        return torch.nn.Conv2d(2, 2, 3, padding=1)
    conv = state
    conv.zero_grad()
    x = conv(torch.randn(2, 2, n, n + 2))
    v = x[:, :, 0]                          # (2, 2, n + 2)
    vol = x.unsqueeze(2).expand(2, 2, 2, n, n + 2)
    loss = F.interpolate(x, scale_factor=2, mode="bilinear").sin().sum() \
        + F.interpolate(x, scale_factor=(2, 3), mode="nearest").pow(2).sum() \
        + F.interpolate(x, size=(7, 5), mode="bicubic", align_corners=True).sin().sum() \
        + F.interpolate(x, scale_factor=1.5, mode="nearest-exact").pow(2).mean() \
        + F.interpolate(x, size=(6, 9), mode="bilinear", antialias=True).sin().sum() \
        + F.interpolate(x, scale_factor=0.7, mode="bicubic", antialias=True).pow(2).sum() \
        + F.interpolate(v, scale_factor=2, mode="linear").sin().sum() \
        + F.interpolate(v, scale_factor=2, mode="nearest").pow(2).sum() \
        + F.interpolate(v, size=11, mode="nearest-exact").sin().sum() \
        + F.interpolate(vol, scale_factor=2, mode="trilinear").sin().sum() \
        + F.interpolate(vol, scale_factor=(1, 2, 2), mode="nearest").pow(2).sum() \
        + F.interpolate(vol, size=(3, 4, 5), mode="nearest-exact").sin().sum()
    loss.backward()
    return grads(state)


def test_upsampling_sizes_are_symbolic():
    # a U-Net-like decoder over image sizes: one dynamic graph serves them
    st = run([5, 8, 3, 12, 6], upsampling, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def test_upsampling_sizes_are_symbolic_channels_last():
    def make(state, n):
        if state is None:
            return upsampling(None, None).to(memory_format=torch.channels_last)
        return upsampling(state, n)
    st = run([5, 8, 3, 12, 6], make, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def _grad_layouts(shape):
    g = torch.randn(shape)
    yield g
    yield g.transpose(0, 1).contiguous().transpose(0, 1)
    yield g[:, :1]
    yield torch.randn(shape[:2] + (1,) * (len(shape) - 2)).expand(shape)
    if len(shape) in (4, 5):
        cl = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        yield g.contiguous(memory_format=cl)
        yield g[:1].contiguous(memory_format=cl)
        yield g[:, :1].contiguous(memory_format=cl)


def test_upsample_backward_op_lays_out_as_eagers_kernels():
    # compiled_bw::upsample_backward's fake kernel promises the layout the aten kernel gives
    # (trace/upsample.py Note [Upsampling backward with symbolic sizes]): checked against the
    # aten kernels of the installed torch for every op and grad layout
    from compiled_bw.trace import upsample
    checked = 0
    for aten, dims, align, _ in upsample.OPS.values():
        if not hasattr(torch.ops.aten, aten + "_backward"):
            continue
        in_size = [2, 3] + [4] * dims
        out_size = [7, 5, 6][:dims]
        for g in _grad_layouts(tuple([2, 3] + out_size)):
            in_size[:2] = g.shape[:2]
            args = (g, out_size, in_size, aten, False if align else None, None, None, None)
            real = torch.ops.compiled_bw.upsample_backward(*args)
            eager = getattr(torch.ops.aten, aten + "_backward").default(
                g, out_size, in_size, *([False] if align else []))
            promised = upsample.fake(*args)
            assert real.stride() == eager.stride() == promised.stride(), \
                (aten, g.stride(), eager.stride(), promised.stride())
            torch.testing.assert_close(real, eager, rtol=0, atol=0)
            checked += 1
    assert checked >= 60


def squeezed(state, n):
    # an unbatched conv1d (its input unsqueezed to a batch of 1, the output squeezed back) and
    # vstack of vectors (atleast_2d: unsqueeze): UnsqueezeBackward0's `grad.squeeze(dim)` of a
    # dim of 1 that dynamic=True makes a symbol (torchapi/dynamo.py Note [Squeezes in a
    # symbolic trace]: the traced squeeze kept the dim, the replayed one dropped it)
    if state is None:
        return [torch.randn(3, 3, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
    w, b = state
    w.grad = b.grad = None
    x = torch.randn(3, n)
    v = torch.randn(n) * b[0]
    loss = F.conv1d(x, w, b, padding=1).sin().sum() + torch.vstack([v, v * 2]).pow(2).sum()
    loss.backward()
    return grads(state)


def test_a_squeeze_of_a_symbolic_size_of_one():
    st = run([5, 8, 3], squeezed, captures=1, dynamic_captures=1, options={"dynamic": True})
    assert st.dynamic_hits == 2


def conv_net(state, n):
    # two convs, so the second one's input needs a grad (backends/inductor.py Note [Inductor:
    # conv input grads of symbolic sizes]: torch 2.13+'s lowering fixed the length there), 1-D
    # over lengths with a stride, 2-D over image sizes, a transposed 1-D
    if state is None:
        return torch.nn.ModuleList([
            torch.nn.Conv1d(2, 3, 3, padding=1), torch.nn.Conv1d(3, 3, 3, stride=2, padding=2),
            torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Conv2d(3, 2, 3, stride=2),
            torch.nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1)])
    c1, c2, d1, d2, t = state
    state.zero_grad()
    h = c2(c1(torch.randn(2, 2, n)).relu())
    img = d2(d1(torch.randn(2, 2, n + 20, n + 31)).tanh())
    loss = h.sin().sum() + t(h).pow(2).mean() + img.sin().sum()
    loss.backward()
    return grads(state)


def test_conv_lengths_with_an_input_grad():
    st = run([8, 12, 19, 15, 22], conv_net, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def encoder(state, size):
    if state is None:
        return torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True), 1)
    b, t = size
    state.zero_grad()
    state(torch.randn(b, t, 8)).pow(2).mean().backward()
    return grads(state)


def test_dynamic_true_transformer_encoder_on_the_eager_backend():
    # dynamic=True: every size its own symbol, d_model's too; the eager backend's size-oblivious
    # trace cannot tell that two of them are equal and fails a broadcasting check: traced again
    # with 0 and 1 specialized (runtime/dynamic.py Note [Size-oblivious trace that fails]).
    # The batch of 1 is another autograd graph (batch_first attention): its own capture.
    if selected_backend() != "eager":
        pytest.skip("the eager backend's size-oblivious trace")
    st = run([(3, 5), (4, 7), (1, 6), (2, 9), (5, 4)], encoder, captures=2,
             dynamic_captures=2, options={"dynamic": True})
    assert st.dynamic_hits == 3
    assert any("traced again with sizes of 0 and 1 specialized" in r
               for r in st.recompile_reasons), st.recompile_reasons


def batch_first_linear(state, size):
    # what nn.MultiheadAttention does with batch_first inputs: a linear of the transposed
    # (length, batch, d) input.  At batch 1 that input is contiguous and ATen's linear takes
    # its addmm path (a view, AddmmBackward0, a view) instead of matmul + add: another autograd
    # graph, never served by the dynamic graph of the other one
    if state is None:
        return torch.nn.Linear(6, 5)
    b, t = size
    state.zero_grad()
    x = torch.randn(b, t, 6, requires_grad=True)
    torch.nn.functional.linear(x.transpose(0, 1), state.weight, state.bias).sin().sum() \
        .backward()
    return grads(state) + [x.grad]


def test_a_batch_of_one_that_builds_another_graph():
    # (4, 7): static; (6, 5): dynamic; (1, 7): a static capture of the other graph; (8, 9):
    # the first dynamic graph; (1, 9): the other graph's own dynamic capture; (1, 3): its
    # hit.  The log names where the graphs part.
    sizes = [(4, 7), (6, 5), (1, 7), (8, 9), (1, 9), (1, 3)]
    st = run(sizes, batch_first_linear, captures=4, dynamic_captures=2)
    assert st.dynamic_hits == 2
    assert any("graph size changed" in r and "AddBackward0 -> " in r
               for r in st.recompile_reasons), st.recompile_reasons


def two_structures(state, k):
    # the same root (mean of pow) over two graphs: tanh at even steps, sigmoid at odd ones,
    # and a batch size that changes every step
    if state is None:
        return torch.nn.Linear(4, 3)
    state.zero_grad()
    h = state(torch.randn(3 + k, 4))
    (h.tanh() if k % 2 == 0 else h.sigmoid().sin()).pow(2).mean().backward()
    return grads(state)


def test_dynamic_true_with_another_graph_of_the_same_root():
    # dynamic=True: the second graph's capture describes its sizes without comparing them
    # with the last miss's signature, another structure (it raised out of backward())
    st = run([0, 1, 2, 3], two_structures, captures=2, dynamic_captures=2,
             options={"dynamic": True})
    assert st.dynamic_hits == 2


# ---- more sizes reaching formulas, image models, dynamic=True at a batch of one

def sizes_as_python_numbers(state, n):
    # a size read in the forward and used as a Python number: a loss divided by the batch
    # size (DivBackward1 saves the divisor), a scalar multiple, a product with another width
    if state is None:
        return torch.nn.Linear(4, 3)
    state.zero_grad()
    x = torch.randn(n, 4)
    (state(x).pow(2).sum() / x.shape[0] + state(x).sum() * (1.0 / n)
     + state(x).tanh().sum() / (n * 3)).backward()
    return grads(state)


def test_a_size_used_as_a_python_number_in_the_loss():
    st = run([4, 6, 8, 10, 12], sizes_as_python_numbers, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def size_formulas(state, n):
    # formulas that divide by or count a size: var/std (n - correction), the losses' mean
    # reduction, cross_entropy's mean over the batch, layer_norm's and normalize's counts,
    # log_softmax/logsumexp over the varying dim, cumsum, prod
    if state is None:
        return [torch.randn(5, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 5) * w
    t = torch.randn(n, 5)
    loss = x.var() + x.std(0).sum() + x.var(1, correction=0).sum() + F.mse_loss(x, t) \
        + F.smooth_l1_loss(x, t) + F.cross_entropy(x, torch.arange(n) % 5) \
        + F.layer_norm(x, (5,)).pow(2).mean() + F.normalize(x, dim=0).sum() + x.norm() \
        + F.log_softmax(x, 0).mean() + x.logsumexp(0).sum() \
        + F.binary_cross_entropy_with_logits(x, t.sigmoid()) + x.nansum() / n \
        + torch.cumsum(x, 0).mean() + x.prod(0).sum()
    loss.backward()
    return grads(state)


def test_sizes_in_reduction_and_loss_formulas():
    st = run([4, 6, 8, 10, 12], size_formulas, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3




def resnet_stem(state, size):
    # strided conv, batch norm, max pool, a residual block, ceil-mode avg pool, then the
    # feature map flattened (x.flatten(2): a view whose saved sizes split the grad's H*W dim)
    # and pooled; batch, height and width all vary.  At the dynamic capture (3, 20, 28) the
    # final map is 3 x 4: its height equals the batch by chance, which must not become a
    # guard (every later step with other sizes would recapture)
    if state is None:
        return torch.nn.ModuleList([
            torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.BatchNorm2d(4),
            torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(4, 4, 3, padding=1),
            torch.nn.BatchNorm2d(4), torch.nn.AvgPool2d(2, ceil_mode=True),
            torch.nn.Linear(4, 2)])
    c1, b1, mp, c2, b2, ap, fc = state
    state.zero_grad()
    b, h, w = size
    x = mp(b1(c1(torch.randn(b, 3, h, w))).relu())
    x = ap((x + b2(c2(x))).relu())
    y = fc(x.flatten(2).transpose(1, 2)).mean(1) + fc(x.mean((2, 3)))
    F.cross_entropy(y, torch.arange(b) % 2).backward()
    return grads(state)


def test_image_batch_height_and_width_through_a_conv_stem():
    # (batches 6 -> 7: no feature-map size makes that change too, so none shares the batch's
    # symbol -- runtime/dynamic.py Note [One symbol for sizes that changed together]; a batch
    # of 2 -> 3 beside the last feature map's 2 -> 3 would: test_slice_ends_that_follow_the_size)
    sizes = [(6, 16, 16), (7, 20, 28), (3, 13, 17), (2, 32, 24), (4, 9, 11), (5, 18, 14)]
    # (on Inductor too: backends/inductor.py Note [Inductor: conv input grads of symbolic
    # sizes]; torch 2.13-2.14 fixed H and W there before, 6 captures)
    st = run(sizes, resnet_stem, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 4


def test_image_batch_through_a_conv_stem():
    sizes = [(2, 20, 28), (3, 20, 28), (5, 20, 28), (4, 20, 28), (7, 20, 28)]
    st = run(sizes, resnet_stem, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def unfolded(state, hw):
    # F.unfold (im2col) saves the input's last two sizes, read by its formula as constants (no
    # symbolic copy: col2im's shape check would tie the block count to them): every size its
    # own static capture, each right
    if state is None:
        return torch.nn.Conv2d(3, 2, 3, padding=1)
    state.zero_grad()
    F.unfold(state(torch.randn(2, 3, *hw)), 2).pow(2).mean().backward()
    return grads(state)


def test_a_node_without_a_symbolic_formula_stays_static_and_says_why():
    st = run([(8, 8), (12, 10), (9, 7)], unfolded, captures=3, dynamic_captures=0)
    assert any("stays static" in r and "Im2ColBackward0" in r
               for r in st.recompile_reasons), st.recompile_reasons


def test_dynamic_true_first_capture_at_a_batch_of_one():
    # dynamic=True from a batch of 1: on the eager backend the one dynamic graph serves every
    # later batch; on Inductor 1 is specialized (Note [Sizes of one]), so the next batch fails
    # that graph's check -- the log names the node and dimension -- and gets a dynamic graph
    # of its own, which serves the rest (the batches of 1 the first one)
    sizes = [1, 5, 1, 9, 13]
    if one_specialized():
        st = run(sizes, mlp, captures=2, dynamic_captures=2, options={"dynamic": True})
        assert st.dynamic_hits == 3
        assert any("MeanBackward0: saved value self_sym_sizes[0] = 5, traced as the constant 1"
                   in r for r in st.recompile_reasons), st.recompile_reasons
    else:
        st = run(sizes, mlp, captures=1, dynamic_captures=1, options={"dynamic": True})
        assert st.dynamic_hits == 4


def data_dependent(state, n):
    # sizes that depend on the data, not only on n: masked_select's and a boolean index's
    # output lengths (the counts of the mask), alongside the batch size n
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 4) * w
    (x.masked_select(x > 0).pow(2).sum() + x[x.sum(1) > 0].exp().mean()).backward()
    return grads(state)


def test_data_dependent_sizes_are_never_reused_wrongly():
    # (the trace specializes the batch here, so each new size is a capture of its own: the
    # point is that no step gets another step's graph).  The one dynamic capture fixes the
    # batch, so later sizes capture static graphs, not a symbolic trace per step
    # (runtime/dynamic.py Note [Dynamic graphs that pin a size])
    build, step = sized([4, 6, 8, 10, 7, 8], data_dependent)
    st = differential(build, step, steps=6, captures=None)
    assert (st.captures, st.dynamic_captures) == (6, 1), st


def test_dynamic_option_values_and_counts_in_explain():
    # enable(dynamic=) takes None, True or False; explain() reports the dynamic counts of
    # stats() and reset() clears them
    with pytest.raises(ValueError, match="takes None, True or False"):
        compiled_bw.enable(dynamic="auto")
    compiled_bw.reset()
    net = mlp(None, None)
    with compiled_bw.enable(backend=selected_backend()):
        for n in (4, 6, 8):
            mlp(net, n)
    st = compiled_bw.stats()
    assert (st.captures, st.dynamic_captures, st.dynamic_hits) == (2, 1, 1), st
    assert "dynamic_captures=1 dynamic_hits=1" in compiled_bw.explain()
    compiled_bw.reset()
    st = compiled_bw.stats()
    assert (st.captures, st.dynamic_captures, st.dynamic_hits) == (0, 0, 0), st


def slice_ends(state, n):
    # slices whose start and end follow n (x[:n // 2], narrow, tensor_split): SliceBackward0
    # saves them, symbolic; Inductor's size-oblivious compile cannot decide min(end, size)
    # between them (runtime/dynamic.py Note [Size-oblivious compile that fails])
    if state is None:
        return [torch.randn(4, requires_grad=True)]
    (w,) = state
    w.grad = None
    x = torch.randn(n, 4) * w
    a, b, c = x.tensor_split(3)
    (x[: n // 2].exp().sum() + x.narrow(0, n // 2, n - n // 2).pow(2).sum()
     + a.sum() * 2 + b.sin().sum() + c.pow(3).sum()).backward()
    return grads(state)


def test_slice_ends_that_follow_the_size():
    # (every size the slices derive from n changes at the second step.  n // 3 and
    # n - 2 * (n // 3) go 2 -> 3 both and share a symbol in the first dynamic graph
    # (runtime/dynamic.py Note [One symbol for sizes that changed together]); at 10 they
    # differ (4, 3): the second dynamic graph, sharing none, serves 10 and 11)
    st = run([6, 9, 12, 15, 10, 11], slice_ends, captures=3, dynamic_captures=2)
    assert st.dynamic_hits == 3
    assert any(TWO_VALUES in r for r in st.recompile_reasons), st.recompile_reasons


def moe_layer(state, n):
    """A mixture-of-experts layer as Hugging Face writes it: top-2 routing, tokens sorted by
    expert, the experts' grouped matmul (`torch._grouped_mm`, weights transposed) and the
    weighted sum back per token.  The tokens each expert gets change with every batch."""
    if state is None:
        torch.manual_seed(0)
        return [torch.randn(4, 8, requires_grad=True),
                torch.randn(4, 16, 8, requires_grad=True)]
    router, experts = state
    router.grad = experts.grad = None
    x = torch.randn(n, 8)
    weights, chosen = torch.topk((x @ router.t()).softmax(-1), 2, dim=-1)
    flat = chosen.reshape(-1)
    order = flat.argsort()
    tokens = x.repeat_interleave(2, dim=0)[order]
    offs = torch.bincount(flat, minlength=4).cumsum(0).to(torch.int32)
    out = torch._grouped_mm(tokens, experts.transpose(-2, -1), offs=offs)
    back = torch.empty_like(out).index_copy(0, order, out).view(n, 2, 16)
    (back * weights.unsqueeze(-1)).sum(1).pow(2).mean().backward()
    return grads(state)


def test_moe_routing_one_dynamic_graph():
    # TopkBackward0's saved sizes and GroupedMmBackward0's (our copy of its formula:
    # trace/grouped_mm.py) become symbolic: the token counts per expert vary in one graph
    st = run([8, 12, 16, 10, 14], moe_layer, captures=2, dynamic_captures=1)
    assert st.dynamic_hits == 3


def test_dynamic_true_a_slice_from_0_and_backward_twice():
    # #36 item 5: with dynamic=True a slice's saved start of 0 became a size symbol of range
    # [1, oo) (Note [Sizes of one]), so the graph's guards refused the value it was captured
    # at: the second backward through the retained graph, and every later step, recaptured
    def prog(state, n):
        if state is None:
            return [None]
        y = torch.randn(n, requires_grad=True)
        loss = (y[:5] * y[2:7]).sum() + y.view(2, n // 2).t().sum(0).pow(2).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
        return [y.grad.clone()]
    st = run([10, 12, 16], prog, captures=1, dynamic_captures=1, options={"dynamic": True})
    assert st.dynamic_hits == 5, st.recompile_reasons


def test_a_guard_over_a_symbol_no_step_binds_refuses_the_dynamic_graph():
    # Note [Guards name only what a step binds]: such a guard fails at every step, the graph's
    # own sizes included (#36 item 5's "shape guard s93 == s79 failed (s79 = ?)"); the graph
    # is refused when made, and the step captures a static one
    import types

    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from compiled_bw.torchapi.dynamo import symint
    from compiled_bw.trace.dynamic import Guards, NotDynamic

    def guards(make_guard):
        env = ShapeEnv()
        bound, other = symint(env, 5, "bound"), symint(env, 7, "other")
        env.evaluate_expr(make_guard(bound.node.expr, other.node.expr))
        spec = types.SimpleNamespace(int_inputs=(), sites=())
        w = types.SimpleNamespace(saved_node=[(0, "self", 0)],
                                  kinds=[types.SimpleNamespace(name="SinBackward0")])
        exprs = ([], [(0, (bound.node.expr,), (sympy.Integer(1),), sympy.Integer(0))])
        return Guards(env, spec, exprs, w)
    assert guards(lambda b, o: b > 2).check([], [torch.empty(5)]) is None
    assert guards(lambda b, o: b > 2).check([], [torch.empty(2)]) is not None
    with pytest.raises(NotDynamic, match="no input binds"):
        guards(lambda b, o: b < o)
