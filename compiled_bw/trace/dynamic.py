"""Dynamic shapes: which sizes of a Python walk signature may vary, and the checks per step.

Consumes two Python walk signatures (walk/walk.py) of the same backward, or one and
`dynamic=True`; produces a DynSpec: the signature positions that hold sizes (the *dynamic
positions*), what each one is (a saved tensor's dim, an input-metadata dim, a saved size value
of a node whose formula we trace here with symbolic sizes), the masked signature that keys the
dynamic graph, and after the trace the Guards that decide per step whether the graph holds for
that step's sizes.

Note [Dynamic shapes]
A graph traced with fake tensors bakes in every size it met.  A dynamic graph is traced with
the dims that changed symbolic (fake tensors from a ShapeEnv, runtime/run.py `_dynamic`), so
its ops compute sizes from its inputs.  Sizes do not only come from inputs: a node's formula
reads sizes it saved in the forward (SumBackward0's self_sym_sizes, MmBackward0's strides,
MeanBackward0's numel) and validate_outputs reads each input's metadata.  Those numbers are
C++ ints inside the node, so the real node cannot be called with symbols: a node whose saved
sizes change is traced with our copy of its formula (FORMULAS, each from
torch/csrc/autograd/FunctionsManual.cpp / derivatives.yaml), fed SymInt graph inputs; a node
whose saved values change and has no copy here makes the whole graph static (capture as
before).  The input metadata becomes SymInt graph inputs too, and so do an AOT backward's
symints (Note [Dynamic AOT backwards]).  Every other position of the signature is in the
dynamic key exactly (masked with DYN only at the dynamic positions).
A step reuses the graph only if (Guards.check): every symbol's value lies in its range (0 is
specialized; 1 on the Inductor backend too: Note [Sizes of one]), every replacement and guard
the trace recorded holds, and every size/stride/storage offset of every symbolic input equals
what the trace assumed.  A guard that fails means a new capture, with its reason.

Note [Sizes of one]
A size of 1 broadcasts: every elementwise op between two symbolic sizes asks "is it 1?", and
answered by the traced size that is a guard `Ne(s, 1)` (or, with 0/1 specialized, a range
[2, oo)): a batch of 1 would always be another capture.  The trace runs with torch's backed
size-oblivious reasoning instead (torchapi/dynamo.py `size_oblivious`, as torch.export
does): size symbols are size-like, range [0, oo), and an
undecided "== 1" takes the general, non-broadcasting path with an equality guard instead of a
1-guard.  That path is right at size 1 too: where both sides are equal, broadcasting and not
broadcasting give the same values; where only one side is 1 at run time, the equality guard
fails and the step recaptures.  A size-1 dim where the formula (sum_to_size, squeeze's
unsqueeze_to, expand) decides on it reads it from its saved sizes: a SymInt whose `== 1`
test is a guard (sizes that are plain ints in the key are not symbolic).  A size of 0 stays
specialized (range check): nothing is gained there, and errors eager raises on empty inputs
would have to be traced.
Only for the eager backend (it runs the traced aten ops): Inductor's code compiled for such a
graph gave wrong grads at size 1 (garbage where a size-1 dim was read; tests
test_a_dimension_going_to_one_and_back and test_size_one_and_back_broadcasting on Inductor),
so for Inductor 0 and 1 stay specialized (range [2, oo): a batch of 1 is another capture).
With that range, size-oblivious reasoning is exact, so Inductor's compile runs with it: a
choice Inductor makes with `guard_or_false` (an optimization whose general path is right for
every size) then adds no guard (it added `batch * length <= 4096` on the transformer
benchmark: one more capture and compile for the larger sizes).
Some programs build another autograd graph at size 1, which no size rule can serve: ATen's
`linear` of a contiguous 3-D input takes its addmm path (view, AddmmBackward0, view), of any
other one matmul + add (UnsafeViewBackward0, MmBackward0, AddBackward0), and
nn.MultiheadAttention's batch_first in-projection is a linear of a transposed (length, batch,
d) input, contiguous only at batch 1.  Another graph is another capture (the recompile log
says "graph size changed", and where the graphs part); its grads come from other kernels
(a bias grad summed over (length, 1) vs over length), so the dynamic graph of the other one
is never asked to serve it.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import operator

import sympy
import torch

from ..checkpoint import recompute
from ..graph.nodes import AOT, LEAF, TRACE
from ..torchapi import autograd as torch_autograd
from ..torchapi.dynamo import fft_r2c_meta_strides_wrong
from . import grouped_mm, upsample

DYN = "<dyn>"


class NotDynamic(Exception):
    """This graph stays static; the message says why."""


# ---- node formulas with symbolic saved sizes -------------------------------------------------

def _maybe_multiply(t, s):
    # FunctionsManual.cpp maybe_multiply: t if s == 1 else t * s
    return t if s == 1 else t * s


def _strided(strides, what: str) -> None:
    if len(strides) != 2:   # not saved: mat was not strided (its layout is hidden from Python)
        raise NotDynamic(f"{what}: strides not saved (a non-strided matrix)")


def _mm_mat1_backward(grad, mat2, sizes, strides, alpha):
    # FunctionsManual.cpp mm_mat1_backward (strided tensors): a column-major mat1 gets its grad
    # column-major
    _strided(strides, "mm_mat1_backward")
    if len(strides) == 2 and strides[0] == 1 and strides[1] == sizes[0]:
        return _maybe_multiply(mat2.mm(grad.t()).t(), alpha)
    return _maybe_multiply(grad.mm(mat2.t()), alpha)


def _mm_mat2_backward(grad, mat1, sizes, strides, alpha):
    # FunctionsManual.cpp mm_mat2_backward (strided tensors)
    _strided(strides, "mm_mat2_backward")
    if len(strides) == 2 and strides[0] == 1 and strides[1] == sizes[0]:
        return _maybe_multiply(grad.t().mm(mat1).t(), alpha)
    return _maybe_multiply(mat1.t().mm(grad), alpha)


def _signed(x):
    """Saved int64 values read through Python come back as uint64 when negative (dim=-1 reads
    18446744073709551615)."""
    if type(x) is int and x >= 2 ** 63:
        return x - 2 ** 64
    if type(x) is tuple:
        return tuple(_signed(e) for e in x)
    return x


def _sum_backward(g, sizes, dims, keepdim):
    # FunctionsManual.cpp sum_backward
    if not keepdim and len(sizes) > 0:
        if len(dims) == 1:
            return g.unsqueeze(dims[0]).expand(sizes)
        wrapped = {d % len(sizes) for d in dims}
        for d in range(len(sizes)):
            if d in wrapped:
                g = g.unsqueeze(d)
    return g.expand(sizes)


def _sum1(g, v, saved, need):
    return [_sum_backward(g, v["self_sym_sizes"], v["dim"], v["keepdim"])]


def _mean1(g, v, saved, need):
    # FunctionsManual.cpp mean_backward: the divisor is numel for an all-reduce, else the
    # product of the reduced dims' sizes (_safe_size)
    sizes, dims = v["self_sym_sizes"], v["dim"]
    if len(dims) == 0:
        n = v["self_sym_numel"]
    else:
        n = 1
        if len(sizes) > 0:
            for d in dims:
                n = n * sizes[d % len(sizes)]
    return [_sum_backward(g, sizes, dims, v["keepdim"]) / n]


def _select(g, v, saved, need):
    return [torch.ops.aten.select_backward(g, v["self_sym_sizes"], v["dim"], v["index"])]


def _slice(g, v, saved, need):
    # FunctionsManual.cpp slice_backward_wrapper
    start = 0 if v["start"] is None else v["start"]
    end = 2 ** 63 - 1 if v["end"] is None else v["end"]
    if type(end) is int and end >= 2 ** 62:     # `x[a:]`: slice_backward clamps end to the
        sizes = v["self_sym_sizes"]             # dim's size; a symbolic one (Inductor's
        end = sizes[v["dim"] % len(sizes)]      # size-oblivious min(end, s) cannot decide)
    return [torch.ops.aten.slice_backward(g, v["self_sym_sizes"], v["dim"], start, end,
                                          v["step"])]


def _squeeze0(g, v, saved, need):
    # FunctionsManual.cpp unsqueeze_to(self, sym_sizes)
    for d, n in enumerate(v["self_sym_sizes"]):
        if n == 1:
            g = g.unsqueeze(d)
    return [g]


def _squeeze1(g, v, saved, need):
    # FunctionsManual.cpp unsqueeze_to(self, dim, sym_sizes)
    sizes = v["self_sym_sizes"]
    d = v["dim"] % max(len(sizes), 1)
    return [g.unsqueeze(d) if len(sizes) > 0 and sizes[d] == 1 else g]


def _squeeze2(g, v, saved, need):
    # FunctionsManual.cpp unsqueeze_to(self, dims, sym_sizes)
    sizes = v["self_sym_sizes"]
    mask = {d % len(sizes) for d in v["dim"]} if len(sizes) > 0 else set()
    for d in range(len(sizes)):
        if d in mask and sizes[d] == 1:
            g = g.unsqueeze(d)
    return [g]


def _sum0(g, v, saved, need):
    return [g.expand(v["self_sym_sizes"])]


def _mean0(g, v, saved, need):
    return [g.expand(v["self_sym_sizes"]) / v["self_sym_numel"]]


def _view(g, v, saved, need):
    sizes = v["self_sym_sizes"]
    _tie_view_sizes(g.shape, sizes)
    return [g.reshape(sizes)]


# Note [View sizes tied to the grad's]
# A view's backward reshapes the grad to the view input's sizes, saved by the node: SymInt
# inputs of their own symbols.  The grad's sizes are other symbols, or products of them (a
# (b, t, d) -> (b*t, d) view upstream).  FakeTensor's reshape then has to prove the numel
# equality and find how the dims split and merge between independent symbols: ~0.1-0.7 s of
# sympy per call on the benchmark's transformer (~4 s of its 29 views' trace), and strides with
# floor divisions (`128*((s1*s10)//s59)`) that make every later op's reasoning slower.  So a
# target size that is a symbol of its own is first tied to the one expression of the grad's
# sizes that has its value at the hint (a grad dim, a product of consecutive grad dims, or a
# factor of a grad dim's product): a shape guard `s59 == s10`, a replacement, checked per
# step as every guard is.  Where two such expressions have that value (b == t at the capture)
# nothing is tied: the reshape reasons as before.  A view only splits and merges consecutive
# dims, so the expressions a target may be tied to are those of its own run: the grad's dims
# and the target's are first lined up into runs of equal product at the hint (dims of 1
# aside), and a target is compared only with its run's expressions.  (Compared with every
# grad dim, a size that equals another dim by chance was tied to it: the width of a feature
# map flattened by `x.flatten(2)` tied to the batch where the two were 3 at the capture, a
# guard every later step with other sizes failed -- one capture per step.)  The reshape's result is what it was (the
# same sizes at run time); a tie that a later step's sizes break fails the guards (another
# capture), never a wrong grad.

def _tie_view_sizes(gshape, sizes) -> None:
    from ..torchapi.dynamo import guard_equal, hint_of, sym_parts
    targets = [x for x in sizes if isinstance(x, torch.SymInt)]
    if not targets:
        return
    env = sym_parts(targets[0])[1]
    gexprs = [sym_parts(a)[0] if isinstance(a, torch.SymInt) else sympy.Integer(a)
              for a in gshape]
    texprs = [sym_parts(x)[0] if isinstance(x, torch.SymInt) else sympy.Integer(x)
              for x in sizes]
    gsyms = set().union(*(e.free_symbols for e in gexprs)) if gexprs else set()
    for gs, ts in _view_runs(env, gexprs, texprs, hint_of):
        by_hint: dict = {}
        cands = []
        for i, e in enumerate(gs):
            p = sympy.Integer(1)
            for f in gs[i:]:
                p = p * f
                cands.append(p)
            if isinstance(e, sympy.Mul):
                cands.extend(e.args)
        for c in cands:
            h = hint_of(env, c)
            if h is not None:
                by_hint.setdefault(h, set()).add(c)
        for e in ts:
            if not isinstance(e, sympy.Symbol) or e in gsyms:
                continue
            found = by_hint.get(hint_of(env, e), set())
            if len(found) == 1 and not next(iter(found)).is_number:
                guard_equal(env, e, next(iter(found)))


def _view_runs(env, gexprs, texprs, hint_of) -> list:
    """Note [View sizes tied to the grad's]: the grad's dims and the view target's, dims of 1
    left out, lined up into consecutive runs of the same product at the hint: [(grad exprs,
    target exprs)]; [] where they do not line up (no hint, a size of 0: nothing is tied)."""
    gh = [hint_of(env, e) for e in gexprs]
    th = [hint_of(env, e) for e in texprs]
    if None in gh or None in th or 0 in gh or 0 in th:
        return []
    g = [(e, h) for e, h in zip(gexprs, gh, strict=True) if h != 1]
    t = [(e, h) for e, h in zip(texprs, th, strict=True) if h != 1]
    runs, i, j = [], 0, 0
    while i < len(g) and j < len(t):
        gs, ts = [g[i][0]], [t[j][0]]
        pg, pt = g[i][1], t[j][1]
        while pg != pt:
            if pg < pt:
                i += 1
                if i == len(g):
                    return []
                gs.append(g[i][0])
                pg *= g[i][1]
            else:
                j += 1
                if j == len(t):
                    return []
                ts.append(t[j][0])
                pt *= t[j][1]
        runs.append((gs, ts))
        i, j = i + 1, j + 1
    return runs if i == len(g) and j == len(t) else []


def _expand(g, v, saved, need):
    return [g.sum_to_size(v["self_sym_sizes"])]


def _value_selecting(g, v, saved, need):
    # FunctionsManual.cpp value_selecting_reduction_backward_symint (max/min/kthvalue/mode/
    # median/nanmedian over a dim): the grad scattered to the selected indices of zeros
    sizes, dim, idx = v["self_sym_sizes"], v["dim"], saved("indices")
    zeros = g.new_zeros(sizes)
    if not v["keepdim"] and len(sizes) > 0:
        return [zeros.scatter(dim, idx.unsqueeze(dim), g.unsqueeze(dim))]
    return [zeros.scatter(dim, idx, g)]


def _value_selecting_kept(g, v, saved, need):
    # topk / sort: the same with keepdim true (derivatives.yaml: their indices keep the dim)
    return _value_selecting(g, {**v, "keepdim": True}, saved, need)


def _evenly_distribute(g, v, saved, need):
    # Note [Formulas of the plain-tensor branch]: FunctionsManual.cpp evenly_distribute_backward
    # (max / min / median / nanmedian of a whole tensor) on a CPU tensor: the grad split evenly
    # over the positions equal to the result (the NaN positions where it is NaN), zeros
    # elsewhere even where the grad is not finite
    x, value = saved("self"), saved("result")
    mask = torch.where(value.isnan(), x.isnan(), x == value)
    # eager: grad.new_zeros(sizes).masked_fill_(mask, grad / mask.sum()), contiguous
    return [torch.where(mask, g / mask.sum(), 0.0).contiguous()]


def _masked_fill1(g, v, saved, need):
    # masked_fill with a tensor value: the value's grad is eager's grad.masked_select(mask).sum()
    # (masked_fill_backward), whose size depends on data; the traced formula sums
    # where(mask, grad, 0) instead, in another order (another rounding)
    if len(need) > 1 and need[1]:
        raise NotDynamic("the value's grad sums a masked_select, whose size depends on data")
    return [g.masked_fill(saved("mask"), 0), None]


def _prod_safe_zeros(g, x, dim: int):
    # FunctionsManual.cpp prod_safe_zeros_backward: the product of all other elements along
    # dim, as exclusive cumulative products from both ends
    if x.numel() == 0:
        return g.expand_as(x)
    n = x.shape[dim]
    ones = torch.ones([1 if d == dim else s for d, s in enumerate(x.shape)], dtype=g.dtype,
                      device=g.device)
    before = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    after = torch.cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return g * (before * after)


def _eager_prod_layout(x) -> None:
    if not x.is_contiguous():
        # eager's grad has the input's layout on one branch, a contiguous one on the other
        raise NotDynamic("prod of a non-contiguous tensor: the grad's strides depend on data")


def _prod0(g, v, saved, need):
    # Note [Formulas of the plain-tensor branch]: FunctionsManual.cpp prod_backward (prod()) on
    # a CPU tensor: grad * result / input where no element is 0; with two or more zeros (grad
    # mode off) zeros; with one, the exclusive products.  All three are computed and the
    # branch eager takes selected, so what an unselected one gives (0 / 0, inf * 0) is unseen.
    x, result = saved("self"), saved("result")
    if x.dim() == 0:
        return [g]
    _eager_prod_layout(x)
    zeros = (x == 0).sum()
    safe = _prod_safe_zeros(g, x.view(-1), 0).view_as(x)      # (x is contiguous)
    plain = g * (result / x)
    return [torch.where(zeros == 0, plain, torch.where(zeros > 1, 0.0, safe))]


def _prod1(g, v, saved, need):
    # the same for prod(dim): grad * result / input where the whole tensor has no 0, else the
    # exclusive products
    x, result = saved("self"), saved("result")
    if x.dim() == 0:
        return [g]
    _eager_prod_layout(x)
    dim = v["dim"] % x.dim()
    if not v["keepdim"]:
        g, result = g.unsqueeze(dim), result.unsqueeze(dim)
    safe = _prod_safe_zeros(g, x, dim)
    plain = g * (result / x)
    return [torch.where((x == 0).sum() == 0, plain, safe)]


def _grouped_mm(g, v, saved, need):
    # graph/fake_ops.py Note [Grouped mm on fake tensors]
    try:
        return grouped_mm.grads(g, v, saved, need)
    except grouped_mm.NotOurs as e:
        raise NotDynamic(f"GroupedMmBackward0: {e}") from None


def _repeat(g, v, saved, need):
    # FunctionsManual.cpp repeat_backward: the grad's leading (new) dims summed away, then
    # each dim repeated r != 1 times viewed as (r, size) and the r's summed, in one reshape
    sizes, repeats = v["self_sym_sizes"], v["repeats"]
    if any(r == 0 for r in repeats):
        return [g.new_zeros(sizes)]
    extra = g.dim() - len(sizes)
    for _ in range(extra):
        g = g.sum(0)
    shape, dims = [], []
    for d, n in enumerate(sizes):
        r = repeats[d + extra]
        if r != 1:
            shape.append(r)
            dims.append(len(shape) - 1)
        shape.append(n)
    if dims:
        g = g.reshape(shape).sum(dims)
    return [g]


def _index(g, v, saved, need):
    # derivatives.yaml index.Tensor: index_backward(grad.new_zeros(self.sym_sizes()), indices,
    # grad): index_put with accumulate (the functional form: what the node records on fake
    # tensors, which are subclass-like)
    indices = saved("indices", many=True)
    zeros = g.new_zeros(v["self_sym_sizes"])
    return [torch.ops.aten.index_put(zeros, indices, g, True)]


def _unfold(g, v, saved, need):
    # derivatives.yaml unfold: unfold_backward_symint(grad, self.sym_sizes(), dimension, size,
    # step) (size, the window's length, stays in the key)
    return [torch.ops.aten.unfold_backward(g, v["self_sym_sizes"], v["dimension"], v["size"],
                                           v["step"])]


def _diagonal(g, v, saved, need):
    # derivatives.yaml diagonal: diagonal_backward_symint(grad, self.sym_sizes(), offset, dim1,
    # dim2)
    return [torch.ops.aten.diagonal_backward(g, v["self_sym_sizes"], v["offset"], v["dim1"],
                                             v["dim2"])]


def _trace(g, v, saved, need):
    # derivatives.yaml trace: trace_backward_symint(grad, self.sym_sizes()), eager's own op;
    # torch 2.11's reads the flat grad's numel(), which symbolic sizes refuse, so there it is
    # copied: the grad written to every (m + 1)-th element of n * m zeros (the out-of-place
    # index_fill of the subclass branch: the same values), viewed as (n, m) -- up to n * m,
    # past the diagonal of a tall matrix, as that release's eager does (2.12 on stop at
    # min(n, m) elements)
    sizes = v["self_sym_sizes"]
    if not _trace_fills_past_the_diagonal():
        return [torch.ops.aten.trace_backward(g, sizes)]
    n, m = sizes
    every = torch.arange(0, n * m, m + 1, device=g.device)
    return [g.new_zeros(n * m).index_fill(0, every, g).view(n, m)]


@functools.cache
def _trace_fills_past_the_diagonal() -> bool:
    """Whether this release's trace backward is torch 2.11's (a 3 x 1 input gets 2 ones).
    Learned before a trace (learn_branches): inside one its tensors would be fake."""
    return bool(torch.ops.aten.trace_backward(torch.ones(()), [3, 1]).sum() == 2)


def _index_select(g, v, saved, need):
    # derivatives.yaml index_select: index_select_backward_symint(grad, self.sym_sizes(), dim,
    # index) (zeros of self's sizes, index_add of the grad; repeated indices accumulate)
    return [torch.ops.aten.index_select_backward(g, v["self_sym_sizes"], v["dim"],
                                                 saved("index"))]


def _mm(g, v, saved, need):
    out = [None, None]
    if need[0]:
        out[0] = _mm_mat1_backward(g, saved("mat2"), v["self_sym_sizes"],
                                   v["self_sym_strides"], 1)
    if need[1]:
        out[1] = _mm_mat2_backward(g, saved("self"), v["mat2_sym_sizes"],
                                   v["mat2_sym_strides"], 1)
    return out


def _addmm(g, v, saved, need):
    out = [None, None, None]
    if need[0]:
        out[0] = _maybe_multiply(g, v["beta"])
    if need[1]:
        out[1] = _mm_mat1_backward(g, saved("mat2"), v["mat1_sym_sizes"],
                                   v["mat1_sym_strides"], v["alpha"])
    if need[2]:
        out[2] = _mm_mat2_backward(g, saved("mat1"), v["mat2_sym_sizes"],
                                   v["mat2_sym_strides"], v["alpha"])
    return out


def _split_with_sizes(grads, sizes, split_sizes, dim):
    # FunctionsManual.cpp split_with_sizes_backward: an undefined grad of one output is zeros of
    # that output's size (self's dtype and device: every output's, so a defined grad's)
    dim = dim % len(sizes)
    like = next(g for g in grads if g is not None)
    full = []
    for g, n in zip(grads, split_sizes, strict=True):
        if g is None:
            shape = list(sizes)
            shape[dim] = n
            g = like.new_zeros(shape)
        full.append(g)
    return torch.cat(full, dim)


def _split(gs, v, saved, need):
    # FunctionsManual.cpp split_backward: every split is split_size long but the last, which
    # is what is left of the dim
    sizes, n, k = v["self_sym_sizes"], v["split_size"], len(gs)
    dim_size = sizes[v["dim"] % len(sizes)]
    splits = [n] * (k - 1) + [n - (n * k - dim_size)]
    return [_split_with_sizes(gs, sizes, splits, v["dim"])]


def _split_sizes(gs, v, saved, need):
    return [_split_with_sizes(gs, v["self_sym_sizes"], v["split_sizes"], v["dim"])]


def _cat(g, v, saved, need, in_sizes):
    # FunctionsManual.cpp cat_tensors_backward, the inputs' sizes from the input metadata of
    # the nodes it feeds (its own saved sizes are not readable: see IN_META_FORMULAS)
    # Inputs that need no grad have hidden sizes: together they are what the known ones leave
    # of the grad's length, and they all sit on one side of every input whose grad is used
    # (nodes.py Note [Hidden saved state]; else the node ran opaque and is not here)
    dim = v["dim"] % g.dim()

    def legacy_empty(s):
        return len(s) == 1 and type(s[0]) is int and s[0] == 0

    hidden = g.shape[dim]
    for s in in_sizes:
        if s is not None and not legacy_empty(s):
            hidden = hidden - s[dim]
    # split_with_sizes, not narrow at a symbolic offset: a slice whose start is a difference
    # of sizes gets an unbacked length in the symbolic trace
    chunks, where, hidden_done = [], [], False
    for s in in_sizes:
        if s is None:
            if not hidden_done:
                chunks.append(hidden)
                hidden_done = True
            where.append(None)
        elif legacy_empty(s):
            where.append("empty")
        else:
            where.append(len(chunks))
            chunks.append(s[dim])
    parts = g.split_with_sizes(chunks, dim)
    return [None if w is None or (w != "empty" and not need[k]) else
            g.new_zeros((0,)) if w == "empty" else parts[w] for k, w in enumerate(where)]


# nodes whose sizes are hidden in C++ (not readable from Python): always traced from our copy,
# with the sizes of their inputs read from the input metadata of the nodes they feed
IN_META_FORMULAS = {"CatBackward0": _cat}

# nodes with several grads: their formula takes the list (None: undefined this step)
MULTI_GRAD = {"SplitBackward0", "SplitWithSizesBackward0", "UnsafeSplitBackward0"}

# class name -> (formula(grad, values, saved(attr), need) -> outputs, the saved values that
# are sizes: may vary; every other saved value of the node stays in the key)
FORMULAS = {
    "SumBackward0": (_sum0, ("self_sym_sizes",)),
    "MeanBackward0": (_mean0, ("self_sym_sizes", "self_sym_numel")),
    "SumBackward1": (_sum1, ("self_sym_sizes",)),
    "MeanBackward1": (_mean1, ("self_sym_sizes", "self_sym_numel")),
    "SelectBackward0": (_select, ("self_sym_sizes",)),
    "SliceBackward0": (_slice, ("self_sym_sizes", "start", "end")),
    "SqueezeBackward0": (_squeeze0, ("self_sym_sizes",)),
    "SqueezeBackward1": (_squeeze1, ("self_sym_sizes",)),
    "SqueezeBackward2": (_squeeze2, ("self_sym_sizes",)),
    # the in-place squeeze_ (ATen's matmul of an n-d tensor and a vector squeezes in place)
    "SqueezeBackward3": (_squeeze0, ("self_sym_sizes",)),
    "SqueezeBackward4": (_squeeze1, ("self_sym_sizes",)),
    "SqueezeBackward5": (_squeeze2, ("self_sym_sizes",)),
    "ViewBackward0": (_view, ("self_sym_sizes",)),
    "UnsafeViewBackward0": (_view, ("self_sym_sizes",)),
    "ReshapeAliasBackward0": (_view, ("self_sym_sizes",)),
    "ExpandBackward0": (_expand, ("self_sym_sizes",)),
    "SplitBackward0": (_split, ("self_sym_sizes", "split_size")),
    "SplitWithSizesBackward0": (_split_sizes, ("self_sym_sizes", "split_sizes")),
    "UnsafeSplitBackward0": (_split, ("self_sym_sizes", "split_size")),
    **dict.fromkeys(("MaxBackward0", "MinBackward0", "KthvalueBackward0", "ModeBackward0",
                     "MedianBackward1", "NanmedianBackward1"),
                    (_value_selecting, ("self_sym_sizes",))),
    **dict.fromkeys(("TopkBackward0", "SortBackward0", "SortBackward1"),
                    (_value_selecting_kept, ("self_sym_sizes",))),
    "RepeatBackward0": (_repeat, ("self_sym_sizes", "repeats")),
    "IndexBackward0": (_index, ("self_sym_sizes",)),
    "IndexSelectBackward0": (_index_select, ("self_sym_sizes",)),
    "UnfoldBackward0": (_unfold, ("self_sym_sizes",)),
    "DiagonalBackward0": (_diagonal, ("self_sym_sizes",)),
    "TraceBackward0": (_trace, ("self_sym_sizes",)),
    **upsample.FORMULAS,
    "MmBackward0": (_mm, ("self_sym_sizes", "self_sym_strides", "mat2_sym_sizes",
                          "mat2_sym_strides")),
    "AddmmBackward0": (_addmm, ("mat1_sym_sizes", "mat1_sym_strides", "mat2_sym_sizes",
                                "mat2_sym_strides")),
    "GroupedMmBackward0": (_grouped_mm, ("self_sym_sizes", "self_sym_strides",
                                         "mat2_sym_sizes", "mat2_sym_strides")),
    **dict.fromkeys(("MaxBackward1", "MinBackward1", "MedianBackward0", "NanmedianBackward0"),
                    (_evenly_distribute, ())),
    "MaskedFillBackward1": (_masked_fill1, ()),
    "ProdBackward0": (_prod0, ()),
    "ProdBackward1": (_prod1, ()),
}
# nodes whose real formula raises on fake tensors where our copy runs (static graphs too)
REAL_REFUSES = frozenset({"GroupedMmBackward0"})

# Note [Formulas of the plain-tensor branch]
# Some formulas of torch's FunctionsManual.cpp branch on `areAnyTensorSubclassLike(...)` (some
# `|| input.is_cuda()`): the other branch, which eager takes on plain (CPU) tensors, reads
# tensor data (`.item()`).  Traced on fake tensors, the real formula takes the first branch,
# whose values differ where a grad is not finite: evenly_distribute_backward (max / min /
# median of a whole tensor) multiplies the grad by the 0/1 mask, so an inf or NaN grad (a step
# that overflowed in mixed precision) gave NaN at every position eager leaves 0; prod_backward
# always took the exclusive products, where eager divides the result by each element when none
# is 0: eager's grad is inf where the product overflowed, 0 where it underflowed, and 0 for two
# zeros and an inf, where the traced one was finite, finite, NaN; masked_fill_backward sums the
# value's grad in another order (the node runs as itself where that grad is used).  For these
# nodes (max & co. not on CUDA), our copy of eager's branch is traced instead, in static and
# dynamic graphs alike (tests/test_wrong_values.py
# test_max_of_a_whole_tensor_with_a_grad_that_is_not_finite,
# test_prod_that_overflows_or_holds_zeros).
PLAIN_BRANCH = {       # node -> whether eager takes that branch on CUDA too
    **dict.fromkeys(("MaxBackward1", "MinBackward1", "MedianBackward0", "NanmedianBackward0"),
                    False),
    "ProdBackward0": True, "ProdBackward1": True, "MaskedFillBackward1": True,
}

# With grad mode on (create_graph=True) linalg_det_backward takes the SVD formula for subclasses
# and, on plain tensors, linalg_solve where |det| is not tiny (masked_fmap); cumprod_backward
# divides by the input where it has no zero: the traced formulas' second derivatives differed
# (NaN at the identity for det).  Those nodes run as the real node in create_graph traces.
# Where a release's formula branches so with grad mode off too (cumprod on torch 2.11:
# torchapi/autograd.py cumprod_branches_without_grad_mode), the node runs as itself in every
# graph.  GRAD_MODE_BRANCH: node -> the probe that says so on this release, or None.
GRAD_MODE_BRANCH = {
    "LinalgDetBackward0": None,
    "CumprodBackward0": torch_autograd.cumprod_branches_without_grad_mode,
}


# A release whose meta kernel of an op a formula calls gives another layout than the real
# kernel: the formula's fake result has the wrong strides, and Inductor, which takes an extern
# call's layout from it, read the real result wrongly (torch 2.11's _fft_r2c, which irfft's and
# hfft's backward call: grads up to 17 off, silently with the C++ wrapper; the Python wrapper's
# stride assert raised).  Where the probe says so, the node runs as itself in every graph
# (trace.py _traced_call).  RELEASE_META: node -> the probe.
RELEASE_META = {"FftC2RBackward0": fft_r2c_meta_strides_wrong}


def learn_branches() -> None:
    """What grad_mode_branch, RELEASE_META and _trace ask torch, learned before a trace: the
    probes run eager autograd, real tensors or fake tensors of their own, which cannot run
    inside one."""
    for probe in (*GRAD_MODE_BRANCH.values(), *RELEASE_META.values(),
                  _trace_fills_past_the_diagonal):
        if probe is not None:
            probe()


def grad_mode_branch(name: str, grad_mode: bool) -> bool:
    """Whether node `name` runs as the real node in a trace with this grad mode
    (GRAD_MODE_BRANCH)."""
    if name not in GRAD_MODE_BRANCH:
        return False
    probe = GRAD_MODE_BRANCH[name]
    return grad_mode or (probe is not None and probe())


# ---- dynamic positions ------------------------------------------------------------------------

def _is_int(x) -> bool:
    return type(x) is int


def size_diff(old, new, path=()) -> list | None:
    """Positions (paths of indices) where two signatures hold different ints; None if they
    differ anywhere else (structure, dtypes, ranks, ...)."""
    if old is new:
        return []
    if isinstance(old, tuple) and isinstance(new, tuple):
        if type(old) is not type(new) or len(old) != len(new):
            return None
        out: list = []
        for k, (a, b) in enumerate(zip(old, new, strict=True)):
            if a is b:
                continue
            d = size_diff(a, b, (*path, k))
            if d is None:
                return None
            out.extend(d)
        return out
    if _is_int(old) and _is_int(new):
        return [] if old == new else [path]
    return [] if type(old) is type(new) and old == new else None


def int_paths(x, path=()) -> list:
    """Every int position inside x (dynamic=True: all of them are candidates)."""
    if isinstance(x, tuple):
        return [p for k, a in enumerate(x) for p in int_paths(a, (*path, k))]
    return [path] if _is_int(x) else []


@dataclasses.dataclass(frozen=True)
class Site:
    """What a dynamic position is."""
    what: str          # "saved" (tensor w.saved[index] dim), "in" (input metadata), "value",
    node: int          # "leaf" (a leaf's own metadata: keyed, not a graph input), "ckmeta"
    #                    (a checkpoint forward's saved tensor's size),
    #                    "ckouter" (a nested region's argument's metadata: keyed only)
    index: int = 0     # saved: position in w.saved; in: input slot; value: element (-1: scalar)
    part: int = 0      # saved/leaf: 0 size, 1 stride
    dim: int = 0
    attr: str = ""
    region: int = -1   # ckmeta: its checkpoint region's number

    def label(self, w) -> str:
        name = w.kinds[self.node].name
        if self.what == "saved":
            _, attr, _ = w.saved_node[self.index]
            part = "size" if self.part == 0 else "stride"
            return f"node {self.node} {name}: saved tensor {attr} {part} of dim {self.dim}"
        if self.what == "in":
            return f"node {self.node} {name}: input {self.index} metadata dim {self.dim}"
        if self.what == "leaf":
            part = "size" if self.part == 0 else "stride"
            return f"node {self.node} {name}: leaf {part} of dim {self.dim}"
        if self.what == "symint":
            return f"node {self.node} {name}: AOT backward symint {self.index}"
        if self.what == "ckmeta":
            return (f"node {self.node} {name}: checkpoint region {self.region}'s saved tensor "
                    f"{self.index} size of dim {self.dim}")
        if self.what == "ckouter":
            part = "size" if self.part == 0 else "stride"
            return (f"node {self.node} {name}: its checkpoint region's argument {self.index} "
                    f"(an enclosing region's tensor) {part} of dim {self.dim}")
        el = "" if self.index < 0 else f"[{self.index}]"
        return f"node {self.node} {name}: saved value {self.attr}{el}"


def _checkpointed(w) -> set:
    """Nodes of traced checkpoint regions (checkpoint/recompute.py)."""
    return {i for reg in (getattr(w, "regions", None) or {}).values() if reg is not None
            for i in reg.nodes}


def classify(w, path: tuple, strict: bool = True) -> Site | None:
    """The Site of a signature position of walk w, or None (strict: raise NotDynamic) when a
    change there is not a size change we can make symbolic."""
    def no(why: str):
        if strict:
            raise NotDynamic(why)
        return None
    sig = w.signature
    entry = sig[path[0]]
    if entry[0] == "execution order" or len(path) < 2:
        return no("the execution order changed")
    i, pos = entry[0], path[1]
    kind = w.kinds[i]
    name = kind.name
    if pos < 3:
        return no(f"node {i} {name}: its class or edges changed")
    if pos == 3:                        # input metadata: (shape, dtype, device[, grad_dtype])
        if len(path) == 5 and path[3] == 0:
            return Site("in", i, path[2], 0, path[4])
        return no(f"node {i} {name}: input metadata changed")
    if kind.how == LEAF:
        if pos == 4 and len(path) == 4 and path[2] in (0, 1):
            return Site("leaf", i, 0, path[2], path[3])
        return no(f"node {i} {name}: leaf state changed")
    if kind.how == AOT and i not in w.hooks:
        return _classify_aot(w, i, name, path, no)
    if kind.how != TRACE or i in w.hooks:
        return no(f"node {i} {name}: not traced from its formula ({kind.how}) or has hooks")
    k = pos - 4
    if i in _checkpointed(w):   # its saved tensors' part first, then its values
        if pos == 4:
            return _classify_region(w, i, name, path, no)
        k -= 1
    if k < len(kind.value_attrs):
        attr = kind.value_attrs[k]
        f = FORMULAS.get(name)
        if f is None or attr not in f[1]:
            return no(f"node {i} {name}: saved value {attr} changed (its formula reads it as a "
                      "constant: no symbolic copy of it here)")
        return Site("value", i, path[2] if len(path) > 2 else -1, attr=attr)
    t = k - len(kind.value_attrs)
    layout = _tensor_layout(w.nodes[i], kind)
    if t >= len(layout) or layout[t] is None or len(path) != 4 or path[2] not in (0, 1):
        return no(f"node {i} {name}: saved tensor state changed")
    key = (i, *layout[t])
    try:
        s = w.saved_node.index(key)
    except ValueError:
        return no(f"node {i} {name}: saved tensor list changed")
    return Site("saved", i, s, path[2], path[3])


def _classify_region(w, i: int, name: str, path: tuple, no) -> Site | None:
    """A position in the checkpoint part of node i's entry (walk.py values_entry:
    (ATTR, (region number, region key, nested parts) at its first mention, holders)):
    Note [Symbolic recomputation] in checkpoint/recompute.py."""
    part, rel = w.signature[path[0]][4][1], path[3:]
    if path[2] != 1:
        return no(f"node {i} {name}: its checkpoint holders changed")
    # an enclosing region's part is inside its first inner region's (nested parts:
    # (holder, part) pairs; recompute.py Note [Nested regions])
    while len(rel) >= 4 and rel[0] == 2 and rel[2] == 1:
        part, rel = part[2][rel[1]][1], rel[3:]
    if len(rel) < 2 or rel[0] != 1:
        return no(f"node {i} {name}: its checkpoint region changed")
    number, key = part[0], part[1]
    reg = next((r for r in w.regions.values() if r is not None and r.number == number), None)
    if reg is None or reg.retrace is None:
        return no(f"node {i} {name}: its checkpoint region {number} is traced with static "
                  "sizes (it writes a buffer or is selective)")
    sub = rel[1:]
    if sub[0] == recompute.SIG_SAVED_META:      # (5, holder, item, 1, dim): its shape
        if len(sub) == 5 and sub[3] == 1 and key[sub[0]][sub[1]][sub[2]][0] == "shape":
            return Site("ckmeta", i, sub[1], 0, sub[4], region=number)
        return no(f"node {i} {name}: checkpoint region {number}: the forward's saved "
                  "tensors changed")
    if sub[0] == recompute.SIG_ARGS and len(sub) == 5 and key[3][sub[1]][0] == "outer" and \
            sub[2] == 1 and sub[3] in (0, 1):
        # (3, arg, 1, size/stride, dim): a nested region's argument, the enclosing region's
        # recomputed tensor, whose metadata that region's own trace of this step gave
        return Site("ckouter", i, sub[1], sub[3], sub[4])
    for n in (3, 4, 5):
        skey = reg.sites.get(sub[:n])
        if skey is not None:
            rest = sub[n:]
            if len(rest) == 2 and rest[0] in (0, 1):
                return Site("saved", i, w.saved_node.index(skey), rest[0], rest[1])
            break
    return no(f"node {i} {name}: checkpoint region {number}: its key changed at {sub}")


def _tensor_layout(node, kind) -> list:
    """Per signature position after a built-in node's saved values, the saved tensor it
    describes: (attr, -1) for a tensor, (attr, j) for element j of a list of optional tensors
    (walk.py values_entry: the elements' metadata, then the list's length: None here)."""
    out: list = []
    for a in kind.tensor_attrs:
        raw = getattr(node, "_raw_saved_" + a, None)
        if isinstance(raw, (tuple, list)):
            out.extend((a, j) for j in range(len(raw)))
            out.append(None)
        else:
            out.append((a, -1))
    return out


# Note [Dynamic AOT backwards]
# A `torch.compile`d forward traced with dynamic shapes has one CompiledFunction (one AOT
# backward class) for every size: its backward module takes the sizes it needs as SymInt
# arguments first (`ctx.symints`: plain ints at run time, in the signature), then the saved
# tensors, whose sizes vary with them.  In a dynamic capture the symints that changed become
# SymInt graph inputs (Site "symint"), handed to the module's prologue instead of the ctx's
# ints (trace.py _aot_call, aot.trace_aot), and the saved tensors' dims that changed are
# symbolic like any saved tensor's; the module's ops then compute their sizes from them,
# and whatever relates them (a view by a symint of a symbolic tensor) is a guard of the
# graph.  A forward Dynamo recompiled is another class: a static capture, as any other
# change of structure.
# An AOT backward's signature entry (walk.py _custom_entry): [i, class, edges, in_meta,
# is_var, subclass, symints, *saved "tensors" metadata, *saved "novc" metadata]
_AOT_SYMINTS = 6


def _classify_aot(w, i: int, name: str, path: tuple, no) -> Site | None:
    """A position of an AOT backward's entry: one of its `symints` (a SymInt input of the
    spliced module, Note [Dynamic AOT backwards]) or a dim of a saved tensor."""
    pos = path[1]
    if pos == _AOT_SYMINTS and len(path) == 3:
        return Site("symint", i, path[2])
    k = pos - _AOT_SYMINTS - 1
    if k < 0 or len(path) != 4 or path[2] not in (0, 1):
        return no(f"node {i} {name}: AOT backward state changed")
    n = len(w.nodes[i]._raw_saved_tensors)
    key = (i, "tensors", k) if k < n else (i, "novc", k - n)
    try:
        s = w.saved_node.index(key)
    except ValueError:
        return no(f"node {i} {name}: AOT backward's saved tensor list changed")
    return Site("saved", i, s, path[2], path[3])


def mask(sig: tuple, paths) -> tuple | None:
    """sig with DYN at every path (a hashable key that ignores the dynamic positions); None
    when sig has not the structure the paths were taken from (no path there: it matches no
    dynamic graph's key)."""
    by_entry: dict = {}
    for p in paths:
        by_entry.setdefault(p[0], []).append(p[1:])
    out = list(sig)
    try:
        for e, ps in by_entry.items():
            out[e] = _mask(sig[e], ps)
    except _NotThere:
        return None
    return tuple(out)


class _NotThere(Exception):
    pass


def _mask(x, paths):
    if any(len(p) == 0 for p in paths):
        return DYN
    groups: dict = {}
    for p in paths:
        groups.setdefault(p[0], []).append(p[1:])
    if not isinstance(x, tuple) or any(not 0 <= k < len(x) for k in groups):
        raise _NotThere
    lst = list(x)
    for k, ps in groups.items():
        lst[k] = _mask(x[k], ps)
    return tuple(lst)


def matcher(masked: tuple, paths):
    """A function sig -> bool equal to `mask(sig, paths) == masked` (and False where mask gives
    None), built once per dynamic graph: C-level tuple comparisons of the positions without a
    path (operator.itemgetter), recursing only into the tuples that hold a dynamic position."""
    tree: dict = {}
    for p in paths:
        node = tree
        for k in p[:-1]:
            node = node.setdefault(k, {})
            if node is None:
                break
        else:
            node[p[-1]] = None
    return _matcher(masked, tree)


def _matcher(m, tree: dict):
    if not isinstance(m, tuple):    # a path through a non-tuple: mask() never fits there
        return lambda x: False
    n = len(m)
    rest = [k for k in range(n) if k not in tree]
    get = operator.itemgetter(*rest) if rest else None
    want = get(m) if get is not None else None
    subs = tuple((k, _matcher(m[k], sub)) for k, sub in sorted(tree.items())
                 if sub is not None and k < n)
    if any(not 0 <= k < n for k in tree):
        return lambda x: False

    def eq(x) -> bool:
        if not isinstance(x, tuple) or len(x) != n:
            return False
        if get is not None and get(x) != want:
            return False
        for k, f in subs:
            if not f(x[k]):
                return False
        return True
    return eq


def values_at(sig: tuple, paths) -> list:
    out = []
    for p in paths:
        x = sig
        for k in p:
            x = x[k]
        out.append(_signed(x))
    return out


@dataclasses.dataclass
class DynSpec:
    """The dynamic positions of a signature and what the trace needs from them."""
    paths: tuple                 # sorted signature paths
    sites: tuple                 # Site per path
    masked: tuple                # mask(signature, paths)
    saved_dims: dict             # w.saved position -> set of dims made symbolic (every
    #                              saved tensor with a dynamic position, maybe with no dim)
    int_inputs: tuple            # indices into paths of the SymInt graph inputs, in order

    @staticmethod
    def build(w, paths) -> DynSpec:
        paths = tuple(sorted(set(paths)))
        sites = tuple(classify(w, p) for p in paths)
        # a saved value (a slice's start, an AOT backward's symint) of 0 stays a number: as a
        # size symbol its range would start at 1 (Note [Sizes of one]) and the graph's guards
        # would refuse the very value it was captured at (dynamic=True: `x[:5]`'s start 0
        # made every backward a capture)
        zero = {k for k, (s, v) in enumerate(zip(sites, values_at(w.signature, paths),
                                                 strict=True))
                if v == 0 and s.what in ("value", "symint")}
        if zero:
            paths = tuple(p for k, p in enumerate(paths) if k not in zero)
            sites = tuple(s for k, s in enumerate(sites) if k not in zero)
        saved_dims: dict = {}
        ints = []
        for k, s in enumerate(sites):
            if s.what == "saved":
                # a tensor whose strides alone vary stays static in the trace, but is checked
                # (Guards: its strides must be the traced ones)
                dims = saved_dims.setdefault(s.index, set())
                if s.part == 0:
                    dims.add(s.dim)
            elif s.what in ("in", "value", "symint", "ckmeta"):
                ints.append(k)
        if not any(saved_dims.values()) and not ints:
            raise NotDynamic("no size the graph reads changed")
        vals = values_at(w.signature, paths)
        for s, v in zip(sites, vals, strict=True):
            if v == 0 and (s.what in ("in", "ckmeta") or (s.what == "saved" and s.part == 0)):
                # (Note [Sizes of one]: a size of 0 is specialized)
                raise NotDynamic(f"{s.label(w)} is 0")
        for k in ints:
            if vals[k] < 0:     # a negative slice start/end: symbols here are sizes (>= 0)
                raise NotDynamic(f"{sites[k].label(w)} is negative ({vals[k]})")
        return DynSpec(paths, sites, mask(w.signature, paths), saved_dims, tuple(ints))

    def matches(self, sig) -> bool:
        """Whether `mask(sig, self.paths) == self.masked` (the dynamic key matches)."""
        m = self.__dict__.get("_matches")
        if m is None:
            m = self.__dict__["_matches"] = matcher(self.masked, self.paths)
        return m(sig)


def all_size_paths(w) -> list:
    """dynamic=True: every position of w's signature that could be a symbolic size."""
    out = []
    for e, entry in enumerate(w.signature):
        if entry[0] == "execution order":
            continue
        for p in int_paths(entry[3:], (e,)):
            p = (p[0], p[1] + 3, *p[2:])
            s = classify(w, p, strict=False)
            if s is not None:
                out.append(p)
    return out


# ---- the trace's view of the walk ------------------------------------------------------------

class DynWalk:
    """A walk whose input metadata and saved sizes are symbolic at the dynamic positions:
    what trace.py's engine reads instead of the walk (attributes not set here are the walk's)."""

    def __init__(self, w, spec: DynSpec, symints: list) -> None:
        self._w = w
        self.dynamic = True
        sym_in: dict = {}
        vals: dict = {}
        self.aot_symints: dict = {}    # AOT node -> its ctx.symints, SymInts where dynamic
        # (region number, holder, dim) -> SymInt: a checkpoint forward's saved size (recompute.py
        # Note [Symbolic recomputation])
        self.region_sizes: dict = {}
        for k, si in zip(spec.int_inputs, symints, strict=True):
            s = spec.sites[k]
            if s.what == "ckmeta":
                self.region_sizes[(s.region, s.index, s.dim)] = si
            elif s.what == "in":
                sym_in[(s.node, s.index, s.dim)] = si
            elif s.what == "symint":
                if s.node not in self.aot_symints:
                    self.aot_symints[s.node] = list(w.nodes[s.node].symints)
                self.aot_symints[s.node][s.index] = si
            else:
                vals.setdefault(s.node, {})[(s.attr, s.index)] = si
        in_meta = list(w.in_meta)
        for (i, slot, d), si in sym_in.items():
            metas = list(in_meta[i])
            m = list(metas[slot])
            shape = list(m[0])
            shape[d] = si
            m[0] = tuple(shape)
            metas[slot] = tuple(m)
            in_meta[i] = tuple(metas)
        self.in_meta = in_meta
        self.formulas: dict = {}
        for i, sv in vals.items():     # nodes whose saved sizes vary: our copy of the formula
            self.formulas[i] = self._formula(i, sv)
        for i, kind in enumerate(w.kinds):
            if kind.name in IN_META_FORMULAS and i not in self.formulas:
                self.formulas[i] = self._formula(i, {})

    def __getattr__(self, name):
        return getattr(self._w, name)

    def _formula(self, i: int, sym_vals: dict):
        kind = self._w.kinds[i]
        if kind.name in IN_META_FORMULAS:
            f = IN_META_FORMULAS[kind.name]
            sizes = [None if c < 0 else self.in_meta[c][nr][0] for c, nr in self._w.edges[i]]

            def fn(g, v, saved, need):
                return f(g, v, saved, need, sizes)
        else:
            fn, _ = FORMULAS[kind.name]
        return formula_runner(self._w, i, fn, sym_vals)


def formula_runner(w, i: int, fn, sym_vals: dict):
    """run(buf, placeholders) -> node i's grads by our copy fn of its formula, reading its
    saved values (sym_vals: (attr, element) -> SymInt where they are symbolic) and its saved
    tensors' placeholders; raises NotDynamic where the copy does not apply."""
    node = w.nodes[i]
    kind = w.kinds[i]
    values = {}
    for a in kind.value_attrs:
        v = _signed(getattr(node, "_saved_" + a))
        if isinstance(v, tuple):
            v = tuple(sym_vals.get((a, j), x) for j, x in enumerate(v))
        else:
            v = sym_vals.get((a, -1), v)
        values[a] = v
    edges = w.edges[i]

    def run(buf: list, placeholders: dict) -> list:
        multi = kind.name in MULTI_GRAD
        if (not multi and len(buf) != 1) or all(g is None for g in buf) or any(
                g is not None and g.dtype.is_complex for g in buf):
            raise NotDynamic(f"node {i} {kind.name}: undefined or complex grad")
        if any(isinstance(v, complex) for v in values.values()):
            raise NotDynamic(f"node {i} {kind.name}: complex scalar")

        def saved(attr, many=False):
            """The saved tensor attr; many: the list of optional tensors attr (None
            where undefined)."""
            if many:
                n = len(getattr(node, "_raw_saved_" + attr))
                ts = [placeholders.get((i, attr, j)) for j in range(n)]
                if all(t is None for t in ts) and recompute.is_checkpointed(node, (attr,)):
                    # a traced region's tensors, as below (none of them is a placeholder)
                    ts = list(getattr(node, "_saved_" + attr))
                if any(t is not None and t.dtype.is_complex for t in ts):
                    raise NotDynamic(f"node {i} {kind.name}: saved {attr} complex")
                return ts
            t = placeholders.get((i, attr, -1))
            if t is None and recompute.is_checkpointed(node, (attr,)):
                # a traced region's tensor: its unpack answers from the region's graph
                # (checkpoint/recompute.py tracing)
                t = getattr(node, "_saved_" + attr)
            if t is None or t.dtype.is_complex:
                raise NotDynamic(f"node {i} {kind.name}: saved {attr} missing or complex")
            return t
        need = [c >= 0 for c, _ in edges]
        with torch.no_grad():
            return fn(list(buf) if multi else buf[0], values, saved, need)
    return run


def plain_branch(w, i: int, buf: list):
    """A runner of our copy of node i's formula where eager takes the branch its traced
    formula does not (Note [Formulas of the plain-tensor branch]); None for other nodes."""
    name = w.kinds[i].name
    on_cuda = PLAIN_BRANCH.get(name)
    if on_cuda is None or (not on_cuda and any(g is not None and g.is_cuda for g in buf)):
        return None
    return formula_runner(w, i, FORMULAS[name][0], {})


def own_formula(w, i: int):
    """A runner (formula_runner) of our copy of node i's formula where its real formula
    cannot run on fake tensors (graph/fake_ops.py Note [Grouped mm on fake tensors]); None for other nodes."""
    if w.kinds[i].name not in REAL_REFUSES:
        return None
    return formula_runner(w, i, FORMULAS[w.kinds[i].name][0], {})


# ---- guards ----------------------------------------------------------------------------------

def _expr(x):
    """The expression a SymInt was made with (not `.node.expr`: that applies the replacements
    the trace found later, which Guards.check verifies instead)."""
    return x.node._expr if isinstance(x, torch.SymInt) else sympy.Integer(x)


def input_exprs(saved_fakes: dict, symints: list) -> tuple:
    """Taken before the trace: per SymInt input its symbol; per symbolic saved tensor (w.saved
    position -> fake) the expressions of its sizes, strides and storage offset."""
    tensors = [(s, tuple(_expr(x) for x in f.shape), tuple(_expr(x) for x in f.stride()),
                _expr(f.storage_offset())) for s, f in saved_fakes.items()]
    return [_expr(si) for si in symints], tensors


# a Guards answer: sizes that share a symbol differ (runtime/dynamic.py Note [One symbol for
# sizes that changed together])
TWO_VALUES = "two values for one symbol"


class Guards:
    """Decides per step whether the dynamic graph holds for its sizes (Note [Dynamic shapes])."""

    def __init__(self, env, spec: DynSpec, exprs: tuple, w) -> None:
        if any(env.deferred_runtime_asserts.values()):
            raise NotDynamic("the trace made data-dependent sizes")
        self.spec = spec
        self.labels = {}
        # the symbol of each SymInt input and each symbolic dim: bound per step
        self.int_syms, self.tensors = exprs
        # every SymInt input's site: a failed check of one traced as a number (a size of 1
        # specialized) names its node and dimension too.  A symbol several sizes share
        # (runtime/dynamic.py Note [One symbol for sizes that changed together]) is named by
        # the first SymInt input, else the first saved tensor, that has it
        self.int_labels = [spec.sites[k].label(w) for k in spec.int_inputs]
        for label, sym in zip(self.int_labels, self.int_syms, strict=True):
            if isinstance(sym, sympy.Symbol):
                self.labels.setdefault(sym, label)
        self.saved_labels = {}
        for s, sizes, _, _ in self.tensors:
            i, attr, _ = w.saved_node[s]
            self.saved_labels[s] = f"node {i} {w.kinds[i].name}: saved tensor {attr}"
            for d, e in enumerate(sizes):
                if isinstance(e, sympy.Symbol):
                    self.labels.setdefault(e, f"{self.saved_labels[s]} size of dim {d}")
        # sizes of 0 are specialized (Note [Sizes of one]): the range starts at 1
        self.ranges = {s: (max(r.lower, 1) if s in env.size_like else r.lower, r.upper)
                       for s, r in env.var_to_range.items()}
        self.replacements = list(env.replacements.items())     # (symbol, expression) pairs
        self.guards = [g.expr for g in env.guards]
        unbound = self._unbound()
        if unbound is not None:     # Note [Guards name only what a step binds]
            raise NotDynamic(f"a shape guard names a symbol no input binds: {unbound}")

        self._fast = _compile_check(self)

    def _unbound(self) -> str | None:
        """A guard or replacement (one whose symbol a step binds) over a symbol that no
        SymInt input and no checked size, stride or offset binds, or None."""
        bound = {e for e in self.int_syms if isinstance(e, sympy.Symbol)}
        for _, sizes, strides, off in self.tensors:
            bound.update(e for e in (*sizes, *strides, off) if isinstance(e, sympy.Symbol))
        for sym, e in self.replacements:
            if sym in bound and not e.free_symbols <= bound:
                return f"{sym} == {e}"
        for g in self.guards:
            if not g.free_symbols <= bound:
                return str(g)
        return None

    def extended(self, state: tuple) -> Guards:
        """These guards and those of an Inductor compile made elsewhere (the compile worker's
        ShapeEnv after it: guards, replacements, ranges; runtime/dynamic.py Note [Dynamic
        graphs compile in the background]).  A guard over a symbol no input binds fails for
        every size (_check): the step runs the graph these guards served."""
        guards, replacements, ranges = state
        g = copy.copy(self)
        g.__dict__.pop("_memo", None)
        g.guards = self.guards + [e for e in guards if e not in self.guards]
        g.replacements = self.replacements + [
            p for p in replacements.items() if p not in self.replacements]
        g.ranges = dict(self.ranges)
        for sym, (lo, hi) in ranges.items():
            if sym not in g.ranges:
                g.ranges[sym] = (lo, hi)
                continue
            lo0, hi0 = g.ranges[sym]
            g.ranges[sym] = (lo if _finite(lo0) is None or (_finite(lo) is not None and
                                                             _finite(lo) > _finite(lo0)) else lo0,
                             hi if _finite(hi0) is None or (_finite(hi) is not None and
                                                            _finite(hi) < _finite(hi0)) else hi0)
        g._fast = _compile_check(g)
        return g

    def checked_saved(self) -> list:
        """The w.saved positions of the tensors whose metadata the check reads."""
        return [s for s, _, _, _ in self.tensors]

    def check(self, ints: list, saved: list) -> str | None:
        """None if the graph holds for these sizes, else why not (a recompile reason).  The
        answer depends on the ints and the checked tensors' metadata only: memoized."""
        key = (tuple(ints), tuple((tuple(saved[s].shape), saved[s].stride(),
                                   saved[s].storage_offset()) for s, _, _, _ in self.tensors))
        memo = self.__dict__.setdefault("_memo", {})
        if key in memo:
            return memo[key]
        fast = self._fast
        why = None if fast is not None and fast(ints, saved) else self._check(ints, saved)
        if len(memo) < 1024:
            memo[key] = why
        return why

    def _check(self, ints: list, saved: list) -> str | None:
        b: dict = {}
        for sym, v in zip(self.int_syms, ints, strict=True):
            if isinstance(sym, sympy.Symbol):
                if b.setdefault(sym, v) != v:
                    return f"{self.labels.get(sym, sym)}: {TWO_VALUES}"
        for s, sizes, strides, off in self.tensors:
            t = saved[s]
            for e, v in (*zip(sizes, t.shape, strict=True), *zip(strides, t.stride(), strict=True),
                         (off, t.storage_offset())):
                if isinstance(e, sympy.Symbol) and b.setdefault(e, v) != v:
                    return f"saved tensor {s}: {TWO_VALUES} {e}"
        for sym, v in b.items():
            r = self.ranges.get(sym)
            if r is not None and not (r[0] <= v and v <= r[1]):
                return (f"{self.labels.get(sym, sym)} = {v} outside the traced range [{r[0]}, "
                        f"{r[1]}] (0 is specialized, on Inductor 1 too)")
        for sym, e in self.replacements:
            if sym in b and e.xreplace(b) != b[sym]:
                return self._failed(f"{sym} == {e}", e.free_symbols | {sym}, b)
        for g in self.guards:
            if g.xreplace(b) is not sympy.true:
                return self._failed(str(g), g.free_symbols, b)
        for k, sym in zip(range(len(ints)), self.int_syms, strict=True):
            if sym.xreplace(b) != ints[k]:
                if not sym.free_symbols:
                    return (f"{self.int_labels[k]} = {ints[k]}, traced as the constant {sym} "
                            f"(0 is specialized, on Inductor 1 too)")
                return self._failed(f"{self.int_labels[k]} = {ints[k]} == {sym}",
                                    sym.free_symbols, b)
        for s, sizes, strides, off in self.tensors:
            t = saved[s]
            if (tuple(e.xreplace(b) for e in sizes) != tuple(t.shape)
                    or tuple(e.xreplace(b) for e in strides) != t.stride()
                    or off.xreplace(b) != t.storage_offset()):
                return (f"{self.saved_labels[s]}: size "
                        f"{tuple(t.shape)} stride {t.stride()} is not the traced ({sizes}, "
                        f"{strides})")
        return None

    def _failed(self, guard: str, syms, b) -> str:
        who = ", ".join(f"{self.labels.get(s, s)} = {b.get(s, '?')}" for s in
                        sorted(syms, key=str))
        return f"shape guard {guard} failed ({who})"


# Note [Guards name only what a step binds]
# A step binds the graph's symbols from its SymInt inputs and the sizes, strides and offsets
# of its checked saved tensors (Guards._check).  A guard over any other symbol (a view's base
# storage, which fakeifying a saved view can make symbolic) can never be decided, so it fails
# at every step, the graph's own sizes included: a dynamic graph that never hits, and a
# dynamic capture per step after it ("shape guard s93 == s79 failed (s79 = ?)" on the second
# backward through a retained graph, #36).  Such a graph is refused when it is made: the step
# captures a static graph instead, which the same sizes hit.  (The compile worker's extra
# guards are checked per step as before: Guards.extended.)

# Note [Guards as Python code]
# Guards._check substitutes the step's values into sympy expressions (xreplace): ~7 ms per new
# set of sizes on a 2-layer transformer's graph.  _compile_check turns the same checks into
# one Python function, made once per graph: ints and sizes bound to local names, ranges,
# replacements, guards and the traced sizes/strides/offsets as integer arithmetic.  It answers
# True only when _check would answer None; False sends the step to _check, which decides and
# gives the reason.  An expression outside what _py prints exactly on Python ints (Symbol,
# Integer, +, *, integer powers, comparisons, and/or/not, FloorDiv, Mod, Max, Min) makes that
# check `return False` (the sympy path decides), and so does a symbol no input binds.

class _NoCode(Exception):
    pass


_REL = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">",
        sympy.Ge: ">="}


def _py(e, names: dict) -> str:
    """Python source computing sympy expression e on ints (names: symbol -> local name)."""
    from ..torchapi.dynamo import FloorDiv, PythonMod
    from ..torchapi.dynamo import SymMax as Max
    from ..torchapi.dynamo import SymMin as Min
    from ..torchapi.dynamo import SymMod as Mod
    if e is sympy.true:
        return "True"
    if e is sympy.false:
        return "False"
    if isinstance(e, sympy.Symbol):
        if e not in names:
            raise _NoCode(str(e))
        return names[e]
    if isinstance(e, sympy.Integer):
        return str(int(e))
    args = [_py(a, names) for a in e.args]
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(args) + ")"
    if isinstance(e, sympy.Mul):
        return "(" + " * ".join(args) + ")"
    if isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and e.exp >= 0:
        return f"({args[0]} ** {args[1]})"
    for rel, op in _REL.items():
        if type(e) is rel:
            return f"({args[0]} {op} {args[1]})"
    if isinstance(e, (sympy.And, sympy.Or)):
        op = " and " if isinstance(e, sympy.And) else " or "
        return "(" + op.join(args) + ")"
    if isinstance(e, sympy.Not):
        return f"(not {args[0]})"
    if isinstance(e, FloorDiv):
        return f"({args[0]} // {args[1]})"
    if isinstance(e, (Mod, PythonMod, sympy.Mod)):
        return f"({args[0]} % {args[1]})"
    if isinstance(e, (Max, Min, sympy.Max, sympy.Min)):
        return f"{'max' if isinstance(e, (Max, sympy.Max)) else 'min'}({', '.join(args)})"
    raise _NoCode(type(e).__name__)


def _finite(x) -> int | None:
    """A range bound as an int; None for an infinite one (no check)."""
    if type(x) is int:
        return x
    return int(x) if isinstance(x, sympy.Integer) else None


def _compile_check(g: Guards):
    """Note [Guards as Python code]: fn(ints, saved) -> True only where g._check says None."""
    names: dict = {}
    body: list = []

    def bind(sym, value: str) -> None:
        if sym in names:
            body.append(f"if {value} != {names[sym]}: return False")
        else:
            names[sym] = f"v{len(names)}"
            body.append(f"{names[sym]} = {value}")

    def must(cond_of) -> None:
        try:
            body.append(f"if not {cond_of()}: return False")
        except _NoCode:
            body.append("return False")

    for k, sym in enumerate(g.int_syms):
        if isinstance(sym, sympy.Symbol):
            bind(sym, f"ints[{k}]")
    for j, (s, sizes, strides, off) in enumerate(g.tensors):
        body.append(f"t{j} = saved[{s}]; sh{j} = t{j}.shape; st{j} = t{j}.stride()")
        body.append(f"if len(sh{j}) != {len(sizes)} or len(st{j}) != {len(strides)}: "
                    "return False")
        body.append(f"of{j} = t{j}.storage_offset()")
        for d, e in enumerate(sizes):
            if isinstance(e, sympy.Symbol):
                bind(e, f"sh{j}[{d}]")
        for d, e in enumerate(strides):
            if isinstance(e, sympy.Symbol):
                bind(e, f"st{j}[{d}]")
        if isinstance(off, sympy.Symbol):
            bind(off, f"of{j}")
    for sym, name in list(names.items()):
        r = g.ranges.get(sym)
        if r is not None:
            lo, hi = _finite(r[0]), _finite(r[1])
            if lo is not None:
                body.append(f"if {name} < {lo}: return False")
            if hi is not None:
                body.append(f"if {name} > {hi}: return False")
    for sym, e in g.replacements:
        if sym in names:
            must(lambda sym=sym, e=e: f"({_py(e, names)} == {names[sym]})")
    for e in g.guards:
        must(lambda e=e: f"({_py(e, names)} is True)")
    for k, sym in enumerate(g.int_syms):
        if not isinstance(sym, sympy.Symbol):
            must(lambda k=k, sym=sym: f"(ints[{k}] == {_py(sym, names)})")
    for j, (_, sizes, strides, off) in enumerate(g.tensors):
        for d, e in enumerate(sizes):
            if not isinstance(e, sympy.Symbol):
                must(lambda j=j, d=d, e=e: f"(sh{j}[{d}] == {_py(e, names)})")
        for d, e in enumerate(strides):
            if not isinstance(e, sympy.Symbol):
                must(lambda j=j, d=d, e=e: f"(st{j}[{d}] == {_py(e, names)})")
        if not isinstance(off, sympy.Symbol):
            must(lambda j=j, off=off: f"(of{j} == {_py(off, names)})")
    body.append("return True")
    src = "def check(ints, saved):\n" + "".join(f"    {ln}\n" for ln in body)
    scope: dict = {}
    exec(compile(src, "<compiled_bw guards>", "exec"), scope)
    return scope["check"]
