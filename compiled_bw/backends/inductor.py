"""The `inductor` backend: the captured aten graph compiled by Inductor directly, no Dynamo.

Consumes a GraphModule from passes/ and example inputs (this step's Box); produces Inductor's
boxed callable `f(box) -> tuple`, which empties the box and frees each input after its last
use.  Imported lazily by backends/__init__.py (importing Inductor costs ~2 s), so a torch
without Inductor disables only this backend.  See Note [Inductor without Dynamo].
"""
from __future__ import annotations

import copy
import operator
import os

import sympy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..calls.deliver import barrier, deliver, owned_grad
from ..calls.opaque import current_sites, opaque
from ..checkpoint.recompute import has_traced_recomputation
from ..core import fake_work
from ..core.thread import THREAD
from ..graph.distinct import one_object_per_input
from ..graph.mutated import assign, returns_alias, written_args
from ..graph.rng import rng_draw
from ..torchapi import inductor as torch_inductor
from ..torchapi.dynamo import (
    OpOverload,
    TracingContext,
    detect_fake_mode,
    pool_sizes_without_parity_guards,
    pytree,
    sym_parts,
    tracing,
)
from ..torchapi.inductor import (
    BoxedBool,
    CompiledFxGraph,
    ExternKernelAllocLine,
    V,
    WeakDep,
    compile_fx_inner,
    ir,
    lowering,
    select_decomp_table,
)
from ..torchapi.inductor import config as inductor_config
from ..trace.holders import BUFFER_SUM
from . import fresh_returns, sum_strides

# Note [Inductor without Dynamo]: the sub-notes below, each named [Inductor: ...]
# Note [Inductor: retrace]
#    Retrace: functionalize (a few backward formulas mutate fresh buffers, e.g. index_put_)
#    and apply Inductor's decomposition table, under fake mode, returning a tuple (what
#    compile_fx_inner requires).  `compiled_bw::opaque` survives as a custom op: Inductor
#    lowers it to an extern FallbackKernel call, so opaque nodes never split the graph.
# Note [Inductor: output strides]
#    Output strides: eager's formulas decide the strides of every grad (grad() returns them
#    as they are; hooks see them).  The captured graph's output `val`s hold those strides;
#    we record them in the output node's meta the way compile_fx does for user outputs, so
#    Inductor lays out each output buffer exactly like eager (config.keep_output_stride).
# Note [Inductor: tracing context]
#    compile_fx_inner, inside a TracingContext holding the retrace's fake mode: without
#    a shape env the FX graph cache bypasses itself ("No shape env").  The cache key is the
#    pickled GraphModule (code + __dict__), which the output strides in the node meta are not
#    part of; `gm.compiled_bw_key` puts them, and the opaque sites' output specs, into it.
# Note [Inductor: boxed call]
#    The result (CompiledFxGraph) is boxed: it clears the list and frees every input after
#    its last use.  `compile_fx` is a trap here: its result is flagged `_boxed_call` but is
#    a `*args` function that frees nothing.
# Note [Inductor: no input asserts]
#    No input asserts: Inductor's wrapper checks every input's size and stride on every call
#    (`assert_size_stride`, ~0.25 µs each: 112 of them per step on the overhead-bound
#    benchmark).  The cache key already holds each Box entry's size and stride (the saved
#    tensors' metadata, the root grads' root_meta), so for our graphs -- on this thread,
#    during our compile only -- `codegen_input_size_asserts` emits nothing.  The asserts
#    Inductor emits after extern kernels (opaque calls included) stay.
# Note [Inductor: no CUDA graphs of its own]
# compile_fx_inner without `cudagraphs=` takes the user's global
# `torch._inductor.config.triton.cudagraphs`: with it on, Inductor would wrap our graph in its
# own CUDA graph, whose outputs are static buffers the next replay overwrites -- and our outputs
# become `.grad`s (stolen by AccumulateGrad) and grad() results that outlive the step, and graphs
# with user code inside or written inputs must not be replayed at all.  CUDA graphs are ours to
# decide (runtime/cudagraphs.py, `enable(cudagraphs=True)`), so Inductor gets False, as the
# artifacts of background compiles do when loaded (backends/inductor_artifact.py).

# Note [Inductor: C++ wrapper]
#    C++ wrapper: the code that calls the kernels is C++ too (`cpp_wrapper=True`, an argument
#    of compile_fx_inner, which ignores config.cpp_wrapper and TORCHINDUCTOR_CPP_WRAPPER).  On
#    the overhead-bound benchmark the graph then runs in ~126 us instead of ~170 us: its cost
#    is the calls around 64 small kernels (allocations, reinterpret_tensor, extern mm through
#    Python's argument parser), not the kernels.  It costs compile time (one more C++ file).
#    The C++ wrapper emits no input asserts.  Not for graphs holding opaque calls: on this
#    torch its call of the `compiled_bw::opaque` extern kernel (Tensor?[] in, Tensor[] out)
#    crashes the process (test_inductor.py::test_opaque_call_is_an_extern_kernel_in_one_graph
#    segfaults).  COMPILED_BW_CPP_WRAPPER=0 turns it off (read at each compile; the background
#    worker has the environment it was started with).
# Note [Inductor: C entry point]
#    The C entry point: a C++-wrapper graph's module defines `inductor_entry` (its pybinding:
#    a list of AtenTensorHandle capsules in, one capsule or None per output back) and
#    `call = _wrap_func(inductor_entry)`, which turns Python tensors into capsules and back.
#    runtime/run.py's C++ hit path calls `inductor_entry` itself with the walk's tensors
#    (Note [C++ hit path]; inductor_artifact.native_entry finds it).  Only when the compiled
#    graph's callable is that `call` exactly: post_compile may wrap it (e.g. copying
#    misaligned inputs), and then it is not used.
#
# Note [Inductor: opaque buffers]
#    Opaque calls hand tensors to user code (hooks, custom backwards), which may keep them: a
#    module full backward hook keeps its grad_output until the module's input grads arrive,
#    `retain_grad` and tensor hooks may store what they get or return.  So do delivery points:
#    a leaf's tensor hooks and its AccumulateGrad's node hooks get the grad (a hook that kept
#    a parameter's grad saw it overwritten by a later kernel: found 2026-11-24).  Inductor
#    assumes it owns every intermediate buffer: after a buffer's last use in the graph it reuses its memory for
#    a later buffer (`buf8 = buf4; del buf4  # reuse`) or lets a kernel write its output into
#    it in place -- overwriting what user code still holds (wrong grads, found on Hugging
#    Face models).  So every
#    buffer an opaque call reads or returns, or a delivery point reads, goes into
#    `V.graph.never_reuse_buffers` (our lowerings below): it is freed by reference counting,
#    as in eager, and never written again.
#    Inductor's wrapper never frees such a buffer at all (`codegen_free` skips every buffer it
#    may not reuse), so the graph kept each one alive to its end: a chain of opaque calls
#    (every node whose saved tensors carry hooks is one) peaked at 1.7x eager, a checkpointed
#    transformer at 3.8x.  During our compiles a never-reused buffer gets a plain `del` after
#    its last use instead (`_free_not_reused`: Inductor's FreeLine, which frees without
#    offering it for reuse).

# Note [Inductor: known-wrong lowerings]
#    Lowerings known to give wrong values stay out of Inductor: for our graphs (during our
#    compile only; torch.compile is left alone) such an op runs its aten kernel as an extern
#    call.  KNOWN_WRONG lists each, with the arguments it is wrong for;
#    tests/test_inductor_opaque.py fails once torch fixes one (then drop it here):
#    - avg_pool2d/3d_backward with ceil_mode and count_include_pad (no divisor_override; also
#      avg_pool1d, which runs avg_pool2d): the last window, partly outside the padded input, is
#      divided by the full kernel size (abs error 0.1-0.3; cf. pytorch/pytorch#198119).
#    - div(rounding_mode="floor") of floating tensors (floor_divide decomposes to it): Inductor
#      computes floor(a / b), eager's kernel (c10::div_floor_floating) a - fmod(a, b) rounded
#      by b: with an infinite operand eager gives NaN where Inductor gives +-inf, and -1 where
#      Inductor gives -0.0 (-3 // inf).  remainder's backward takes it for the divisor's grad,
#      and a checkpointed region may recompute it (torch.compile gives Inductor's values;
#      integer floor division is exact in both).

# Note [Inductor: conv input grads of symbolic sizes]
#    torch 2.13-2.15 lower convolution_backward (2.11 and 2.12 call its aten kernel): for the
#    input's grad the lowering takes the stride order of its output layout through
#    `guard_int_seq(layout.stride)`, a guard that the strides equal their values at the hint,
#    so in a dynamic graph every length or image size of a conv whose input needs a grad (any
#    conv but the first layer) was fixed: each later size was a static capture (a conv1d over
#    lengths 8, 12, 19, 15, 22: 5 captures).  Where the input's sizes are symbolic and the
#    lowering would take that guard (no channels-last layout optimization of a 2-D conv), the
#    aten kernel runs as an extern call instead, as on 2.11/2.12 (with their constraint: its
#    operands in the traced, eager's, strides), the same kernel eager runs
#    (tests/test_dynamic_shapes.py test_conv_lengths_with_an_input_grad).


def _conv_dx_would_pin(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                       transposed, output_padding, groups, output_mask) -> bool:
    ndim = len(input.get_size()) - 2
    return bool(output_mask[0]) and not (V.graph.layout_opt and ndim == 2) and any(
        getattr(s, "free_symbols", None) for s in input.get_size())


PINS_SIZES = {torch.ops.aten.convolution_backward.default: _conv_dx_would_pin}


# Note [Inductor: device index]
#    The C++ wrapper passes device index 0 to an extern kernel given a device without one:
#    sgn's grad (`_efficientzerotensor(..., device=cpu)`) came out on `cpu:0`, eager's on `cpu`.
#    From torch 2.15 Inductor lowers `_efficientzerotensor` to an expanded tensor constant,
#    which its C++ wrapper hands out on `cpu:0` too.  A graph with such a call gets the Python
#    wrapper (cpp_wrapper(); tests/test_inductor_known_wrong.py test_sgn_grad_device_on_inductor,
#    a release test).

# Note [Inductor: call order]
#    Call order: opaque calls and delivery points run user code (hooks, custom Functions,
#    AccumulateGrad with DDP's/FSDP's hooks), so they must run in graph order, which is eager's
#    (runtime/run.py Note [Delivery points]), and after everything eager ran before them: a
#    hook may free or change what earlier nodes read (FSDP reshards a layer's parameters --
#    the saved weights of its matmuls -- in the post-backward hook on their AccumulateGrad).
#    Inductor orders kernels by data dependencies only: independent extern calls may swap
#    (fusion re-sorts nodes, reorder_for_peak_memory moves them: FSDP2 then read `.grad` before
#    it was delivered) and a kernel may run after a later call (FSDP1 then crashed reading a
#    freed weight).  So each of our calls gets a fake dependency on the previous call and on
#    every node between them -- what Inductor itself does to keep collectives in graph order
#    (comms.decide_global_ordering_of_comms, which we wrap, on this thread during our compiles
#    only; fake WeakDeps order, they keep no buffer alive).  Kernels after a call may still run
#    before it where data allows: whatever a call's user code returns reaches them as data --
#    except that user code may also write into what it got (a leaf's hook doing `g.add_(1)` on
#    a grad another path reads; eager's engine runs that hook first and the other path reads
#    the written values).  So a kernel that reads a tensor an earlier call got or returned gets
#    a fake dependency on the latest call before it (tests/test_no_grad_copy.py two_paths_got).
#    A buffer write of a traced recomputation (`compiled_bw::assign`, graph/mutated.py Note
#    [Buffer writes at the recomputation point]) is ordered as a call: what ran before it read
#    the old values, a kernel reading the buffer after it reads the new ones, a hook after it
#    sees them.  Graphs holding one get these barriers and the Python wrapper even without
#    opaque calls.

# Note [Inductor: recomputation order]
#    A graph with traced checkpoint recomputation (checkpoint/recompute.py) already has each
#    region's recompute ops right before their first use, in eager's order, and frees each
#    input after its last use.  Inductor's reorder_for_peak_memory, which does not count graph
#    inputs as freeable, moved recompute kernels so that activations of several regions lived
#    at once: 4 checkpointed transformer layers peaked at 1.18x eager-checkpointed's memory
#    with it, 0.98x without (tests/test_memory.py ckpt4_traced).  It is off for such graphs.

# Note [Inductor: no layout optimization on CPU]
#    With mkldnn, Inductor lays out every graph with a convolution channels-last (GraphLowering.
#    decide_layout_opt): right for torch.compile, whose forward saves its activations
#    channels-last already, wrong for a backward whose saved activations come from an eager
#    forward in NCHW: each convolution_backward then converts its input, its grad and its result.
#    timm resnet18 at 64x64, batch 8, one thread, backward vs eager's (torch 2.15): 1.43x with it,
#    0.87x without (1.35x / 0.88x checkpointed).  Off for CPU graphs; GPU graphs keep Inductor's
#    choice (not measured).

# Note [Inductor: direct calls]
#    Inductor's Python wrapper calls an extern kernel through the dispatcher
#    (`torch.ops.compiled_bw.opaque.default(...)`): OpOverload.__call__, the Autograd fallback,
#    the Python kernel, and then the graph's dispatcher state put back for user code -- ~3 us
#    for a call that does nothing (a barrier), ~8 us for an opaque call.  During our compiles
#    the wrapper calls the Python functions themselves instead, as the eager backend's code
#    does (backends/eager.py Note [Direct opaque calls]): `opaque.opaque_direct` and
#    `deliver.deliver_direct`, imported by the generated module (`_direct_calls`), in the
#    dispatcher state the graph started in; a barrier becomes no code at all (it only orders
#    Inductor's schedule: Note [Inductor: call order]).  The C++ wrapper never holds our calls
#    (Note [Inductor: C++ wrapper]).

CODEGEN_VERSION = 16     # bump when the code Inductor generates for us changes (FX graph cache key)


def _source_key() -> str:
    """Note [Inductor: cache key of our code]: a hash of the modules that decide what Inductor
    generates for our graphs (our lowerings, the functions generated code calls)."""
    import hashlib
    import sys
    h = hashlib.sha256()
    for name in (__name__, "compiled_bw.calls.opaque", "compiled_bw.calls.deliver",
                 "compiled_bw.graph.mutated",
                 "compiled_bw.torchapi.inductor"):
        with open(sys.modules[name].__file__, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


# Note [Inductor: cache key of our code]
#    Inductor's FX graph cache (on disk, shared by every process of the user) keys an
#    artefact on the graph, torch's own source and Inductor's config -- not on our lowerings
#    or on the functions our generated code calls.  A user who upgrades compiled_bw would be
#    served code compiled by the old version (e.g. before Note [Inductor: opaque input
#    strides]).  CODEGEN_VERSION is bumped by hand on such changes; the source hash of the
#    modules involved is in the key too, so a forgotten bump cannot serve stale code.
SOURCE_KEY = _source_key()


def _avg_pool_ceil_include_pad(grad, x, kernel_size, stride, padding, ceil_mode,
                               count_include_pad, divisor_override=None) -> bool:
    return bool(ceil_mode) and bool(count_include_pad) and divisor_override is None


def _floating(value) -> bool:
    """A float, or an Inductor IR value or FX node (its traced value) of a floating dtype."""
    if isinstance(value, (float, torch.SymFloat)):
        return True
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
        return isinstance(value, torch.Tensor) and value.dtype.is_floating_point
    return hasattr(value, "get_dtype") and value.get_dtype().is_floating_point


def _floor_of_floats(a, b, rounding_mode=None) -> bool:
    return rounding_mode == "floor" and (_floating(a) or _floating(b))


DIVISIONS = (torch.ops.aten.div.Tensor_mode, torch.ops.aten.div.Scalar_mode)


KNOWN_WRONG = {
    torch.ops.aten.avg_pool2d_backward.default: _avg_pool_ceil_include_pad,
    torch.ops.aten.avg_pool3d_backward.default: _avg_pool_ceil_include_pad,
    **dict.fromkeys(DIVISIONS, _floor_of_floats),
}


# Note [Inductor: errors eager's kernels raise]
#    Some backward kernels refuse arguments with an error that their decomposition in
#    Inductor's table does not raise: leaky_relu_backward of an in-place leaky_relu_ with a
#    negative slope (self_is_result: the input is gone, its sign cannot be read back from a
#    result whose sign the slope flipped) raises "In-place leakyReLu backward calculation is
#    triggered with a negative slope which is not supported ... call out-of-place version";
#    rrelu_with_noise_backward does the same where it is a leaky_relu_backward (not training, or
#    lower == upper); elu_backward of an in-place elu_ or celu_ with a negative alpha raises
#    "In-place elu backward calculation is triggered with a negative slope ...".  Decomposed, the
#    graph returned a grad where eager raises.  Where the
#    arguments are such, the retrace keeps the op (the decomposition answers NotImplemented)
#    and Inductor calls its aten kernel, which raises eager's error when the backward runs
#    (tests/test_inductor_known_wrong.py test_inplace_leaky_relu_with_a_negative_slope_raises).


def _leaky_refused(grad, x, negative_slope, self_is_result) -> bool:
    return bool(self_is_result) and negative_slope < 0


def _rrelu_refused(grad, x, noise, lower, upper, training, self_is_result) -> bool:
    as_leaky = not training or upper - lower <= 1e-6      # its kernel's test
    return bool(self_is_result) and as_leaky and (lower + upper) / 2 < 0


def _elu_refused(grad, alpha, scale, input_scale, is_result, self_or_result) -> bool:
    return bool(is_result) and alpha < 0


REFUSED = {
    torch.ops.aten.leaky_relu_backward.default: _leaky_refused,
    torch.ops.aten.elu_backward.default: _elu_refused,
    torch.ops.aten.rrelu_with_noise_backward.default: _rrelu_refused,
}


# Note [Inductor: grads eager leaves untouched]
#    Inductor's nll_loss_backward (and nll_loss2d_backward) multiplies a 0 / -1 one-hot of the
#    targets by the grad; eager's kernel writes -grad (times the class weight) at each target
#    that is not ignored and leaves every other entry 0.  With an inf or NaN upstream grad the
#    product is NaN at every other entry, where eager has 0 (and cross_entropy's log_softmax
#    backward then NaN where eager has inf)
#    (tests/test_inductor_known_wrong.py test_nll_loss_with_a_grad_that_is_not_finite).
#    Ours selects instead: where the class index (an iota) equals the target and the target is
#    not ignored, -grad (divided by the total weight for a mean, as eager's kernel divides
#    before it negates) times the class weight; 0 elsewhere.  No one-hot is materialized:
#    Inductor fuses the selection into the log_softmax backward that reads it (a 1024 x 2048
#    vocabulary's loss backward wrote and read two full one-hot buffers, the decomposition's
#    and a second to find where eager writes: 6.7 ms where eager's kernels took 3.8).  Targets
#    out of range cannot reach a backward: the forward's kernel raised on them.
def _nll_selection(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    """(where eager's kernel writes, whether each row's target counts, what it writes there:
    per row, or one value)."""
    channel_dim = 0 if x.dim() < 2 else 1
    if reduction == 1:      # Reduction::Mean
        grad_output = grad_output / total_weight
    target = target.unsqueeze(channel_dim)
    shape = [1] * x.dim()
    shape[channel_dim] = x.shape[channel_dim]
    valid = target != ignore_index
    # compared in int32 where the class count fits (the vector compare is half as wide): a
    # valid target is below it (the forward's kernel raised otherwise)
    n = x.shape[channel_dim]
    small = isinstance(n, int) and n < 2**31
    index = torch.int32 if small else torch.int64
    classes = torch.arange(n, device=x.device, dtype=index).view(shape)
    safe = torch.where(valid, target, 0)
    if x.dim() > grad_output.dim() > 0:
        grad_output = grad_output.unsqueeze(channel_dim)
    value = -grad_output
    if weight is not None:      # the target's class weight (a row's value: its target's)
        value = value * weight[safe]
    return (classes == safe.to(index)) & valid, valid, value


def _nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    hit, _, value = _nll_selection(grad_output, x, target, weight, reduction, ignore_index,
                                   total_weight)
    return torch.where(hit, value, 0.0).to(x.dtype)


# Note [Inductor: cross-entropy backward in one pass]
#    cross_entropy is log_softmax then nll_loss; its backward is _log_softmax_backward_data of
#    nll_loss_backward's grad: g - exp(out) * g.sum(dim).  Inductor cannot know that the row
#    sum of the selection above is the row's one written value, so it reduces the whole
#    (tokens x vocabulary) selection to get it, then makes a second pass (Llama, 1024 x 2048:
#    6.4 ms where eager's kernels take ~4.5).  Where the log_softmax backward's grad is an
#    nll_loss backward nothing else reads, over the class dim, both become one function of
#    the row's value: where(hit, value, 0) - exp(out) * where(valid, value, 0).  The row sum
#    eager computes is that value exactly (zeros and one value), so the values are eager's.
def _cross_entropy_backward(grad_output, x, target, weight, reduction, ignore_index,
                            total_weight, out):
    hit, valid, value = _nll_selection(grad_output, x, target, weight, reduction, ignore_index,
                                       total_weight)
    return (torch.where(hit, value, 0.0) - out.exp() * torch.where(valid, value, 0.0)).to(
        out.dtype)


_NLL_BACKWARDS = (torch.ops.aten.nll_loss_backward.default,
                  torch.ops.aten.nll_loss2d_backward.default)


def _cross_entropy_backwards(gm: torch.fx.GraphModule) -> list:
    """The log_softmax backwards of Note [Inductor: cross-entropy backward in one pass]."""
    out = []
    for n in gm.graph.find_nodes(op="call_function",
                                 target=torch.ops.aten._log_softmax_backward_data.default):
        g, result, dim, dtype = n.args[:4]
        if not (isinstance(g, torch.fx.Node) and g.target in _NLL_BACKWARDS and
                len(g.users) == 1 and not g.kwargs):
            continue
        x, rv = g.args[1].meta.get("val"), result.meta.get("val")
        if not (isinstance(x, torch.Tensor) and isinstance(rv, torch.Tensor)):
            continue
        channel = 0 if x.dim() < 2 else 1
        if dim % max(rv.dim(), 1) != channel or rv.dim() != x.dim() or \
                not (x.dtype == rv.dtype == dtype):
            continue
        out.append(n)
    return out


def _fuse_cross_entropy_backwards(gm: torch.fx.GraphModule) -> None:
    for n in _cross_entropy_backwards(gm):
        g = n.args[0]
        with gm.graph.inserting_before(n):
            f = gm.graph.call_function(_cross_entropy_backward, (*g.args[:7], n.args[1]))
        f.meta.update(n.meta)
        n.replace_all_uses_with(f)
        gm.graph.erase_node(n)
        gm.graph.erase_node(g)
    gm.recompile()


# Note [Inductor: eager's kernel for its inf and NaN]
#    Two loss backwards of Inductor's table give finite values where eager's kernels give NaN:
#    - soft_margin_loss_backward where exp(-target * input) overflows -- an infinite input, but
#      also a finite margin past ~88 in float32 (~11 in float16): eager's -target * z / (1 + z)
#      is inf / inf, the decomposition's sigmoid its finite limit.  It runs its aten kernel
#      (Inductor registers it as a fallback on every supported release: tests/
#      test_private_api.py); a loss backward is one pointwise op, fusing it saves little.
#    - smooth_l1_loss_backward where input - target is NaN (the decomposition's sign(NaN) is 0).
#      Its aten kernel has no lowering to fall back to (Inductor asserts it has a decomposition),
#      so the decomposition is replaced by eager's vectorized loop, which also gives eager's -1
#      at x == 0 for beta == 0 (the decomposition's sign gives 0).
#    And one decomposition reads an argument otherwise than the kernel: logit_backward with a
#    negative eps (the kernel's "no eps": NaN outside [0, 1]; decomposed: finite in [eps, 1 - eps]).
#    (tests/test_inductor_known_wrong.py test_kernels_whose_inf_or_nan_inductors_code_did_not_give)
EAGER_KERNEL = (torch.ops.aten.soft_margin_loss_backward.default,)


def _smooth_l1_loss_backward(grad_output, x, target, reduction, beta):
    """aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp smooth_l1_backward_cpu_kernel's
    vectorized loop, whose answers its scalar loop gives too."""
    norm = 1.0 / x.numel() if reduction == 1 else 1.0     # Reduction::Mean
    d = x - target
    one = torch.ones_like(d)
    return norm * torch.where(d.abs() >= beta, torch.where(d > 0, one, -one), d / beta) * grad_output


def _logit_backward(decompose):
    """logit_backward's eager kernel takes a negative eps as no eps (NaN outside [0, 1]); the
    decomposition clamped to [eps, 1 - eps], finite there."""
    def logit_backward(grad_output, x, eps=None):
        return decompose(grad_output, x, None if eps is not None and eps < 0 else eps)
    return logit_backward


OUR_DECOMPOSITIONS = {torch.ops.aten.smooth_l1_loss_backward.default: _smooth_l1_loss_backward,
                      torch.ops.aten.nll_loss_backward.default: _nll_loss_backward,
                      torch.ops.aten.nll_loss2d_backward.default: _nll_loss_backward}
# op -> a wrapper of Inductor's decomposition (Note [Inductor: eager's kernel for its inf and NaN])
WRAPPED_DECOMPOSITIONS = {torch.ops.aten.logit_backward.default: _logit_backward}


def _decompositions() -> dict:
    """Inductor's decomposition table, less the cases of Notes [Inductor: errors eager's
    kernels raise] and [Inductor: eager's kernel for its inf and NaN], with Note [Inductor:
    grads eager leaves untouched] (made per compile: the table depends on Inductor's config)."""
    table = dict(select_decomp_table())
    for op in EAGER_KERNEL:
        table.pop(op, None)
    table.update(OUR_DECOMPOSITIONS)
    for op, wrap in WRAPPED_DECOMPOSITIONS.items():
        if op in table:
            table[op] = wrap(table[op])
    for op, refused in REFUSED.items():
        decompose = table.get(op)
        if decompose is None:
            continue

        def checked(*args, decompose=decompose, refused=refused, **kwargs):
            if refused(*args, **kwargs):
                return NotImplemented
            return decompose(*args, **kwargs)
        table[op] = checked
    return table


def _keep_out_of_inductor(op, wrong, fx_strides: bool = False) -> None:
    """Note [Inductor: known-wrong lowerings]: `op`'s lowering, or its aten kernel as an
    extern call where `wrong(*args)` (fx_strides: with its operands in the traced strides)."""
    name = torch_inductor.lowering_patch(op)
    inductor_lowering = torch_inductor.original(name)
    extern = lowering.fallback_handler(op, add_to_fallback_set=False)

    def lower(*args, **kwargs):
        if THREAD.keyed_inputs and wrong(*args, **kwargs):
            if fx_strides:
                args, kwargs = lowering.constrain_to_fx_strides(V.graph.current_node, *args,
                                                                **kwargs)
            return extern(*args, **kwargs)
        return inductor_lowering(*args, **kwargs)
    torch_inductor.patch(name, lower)


def _buffer_names(node) -> list:
    """The names of the buffers an Inductor IR value lives in (views: their base buffer)."""
    names = []
    for x in pytree.tree_leaves(node):
        if isinstance(x, ir.IRNode):
            name = x.maybe_get_name()
            if name is not None:
                names.append(name)
    return names


_opaque_fallback = lowering.fallback_handler(opaque, add_to_fallback_set=False)


# Note [Inductor: opaque input strides]
#    User code sees what an opaque call is given (a hook's grad, a custom backward's grad
#    outputs): its strides must be eager's, size-1 dimensions included (`g.stride()` in a
#    hook).  Inductor lays out an intermediate buffer as it likes (a (3, 1, 5) sum got strides
#    (5, 15, 1) where eager's formula gives (5, 5, 1)), so each tensor an opaque call takes is
#    required to have the exact strides of its traced value, which are eager's (a copy only
#    where more than size-1 strides differ; a size-1 stride is matched by reinterpreting).


def _eager_strides(grads, fx_args) -> list:
    """Note [Inductor: opaque input strides]: each IR grad with its traced value's strides; a
    value passed twice (a module hook's grad_input that is its grad_output) stays one buffer."""
    out = []
    done: dict = {}
    for g, f in zip(grads, fx_args, strict=True):
        val = f.meta.get("val") if isinstance(f, torch.fx.Node) else None
        if isinstance(g, ir.IRNode) and isinstance(val, torch.Tensor):
            key = (id(g), tuple(val.stride()))
            if key not in done:
                ir.ExternKernel.realize_input(g)    # Note [Inductor: one buffer for a value]
                done[key] = ir.ExternKernel.require_exact_strides(g, val.stride())
            g = done[key]
        out.append(g)
    return out


# Note [Inductor: one buffer for a value]
#    A tensor an opaque call or delivery point gets is the tensor later ops of the graph read
#    in eager (AddBackward0 hands one grad to a custom backward and to a leaf; a hook may
#    write into it, against the hook contract, and eager's later ops read the written values).
#    Inductor would give the call a copy of an unrealized value (require_exact_strides, or a
#    custom op's default layout constraint) and recompute the value inside later kernels from
#    its inputs, so a write never reached them.  The value is realized itself, in place, and
#    then given its strides (freezing its layout: no copy), so the call and later kernels share
#    one buffer; a barrier realizes what it takes the same way (Note [Inductor: call order]).
#    Later readers of that buffer run after the call (_ordered_calls).


_barrier_fallback = lowering.fallback_handler(barrier, add_to_fallback_set=False)


@lowering.register_lowering(barrier, type_promotion_kind=None)
def _lower_barrier(live):
    """Note [Inductor: one buffer for a value]: each tensor the barrier takes realized in
    place, not copied."""
    return _barrier_fallback([ir.ExternKernel.realize_input(x) if isinstance(x, ir.IRNode)
                              else x for x in live])


@lowering.register_lowering(opaque, type_promotion_kind=None)
def _lower_opaque(site, grads, label):
    """Note [Inductor: opaque buffers]: an extern call of the real op whose inputs and
    outputs are never reused, and whose inputs have the strides eager's would (Note [Inductor:
    opaque input strides])."""
    grads = _eager_strides(grads, V.graph.current_node.args[1])
    outs = _opaque_fallback(site, grads, label)
    names = _buffer_names(outs)
    for k in {id(o.data.data.inputs[0]): o.data.data.inputs[0] for o in outs}.values():
        assert isinstance(k, ir.FallbackKernel), type(k)
        names += _buffer_names(list(k.inputs))
    V.graph.never_reuse_buffers.update(names)
    return outs


_deliver_fallback = lowering.fallback_handler(deliver, add_to_fallback_set=False)


@lowering.register_lowering(deliver, type_promotion_kind=None)
def _lower_deliver(site, grad, label, owned=False):
    """Note [Inductor: opaque buffers]: a delivery point hands its grad to user code too (the
    leaf's tensor hooks and AccumulateGrad's node hooks, which may keep it), so its buffer is
    never reused either, and it has eager's strides (Note [Inductor: opaque input strides])."""
    if not isinstance(grad, ir.IRNode):
        return _deliver_fallback(site, grad, label, False)
    fx_grad = V.graph.current_node.args[1]
    grad = ir.ExternKernel.realize_input(_eager_strides([grad], [fx_grad])[0])
    names = _buffer_names(grad)
    # runtime/run.py Note [Stealing at delivery points], decided again after Inductor's passes
    # (which may have made a clone the value it copied); a graph input is never stolen
    owned = bool(owned) and owned_grad(fx_grad) and bool(names) and not any(
        n in V.graph.graph_inputs or n in V.graph.constants for n in names)
    V.graph.never_reuse_buffers.update(names)
    return _deliver_fallback(site, grad, label, owned)


def cpp_wrapper(sites: list, inputs: list, gm: torch.fx.GraphModule | None = None) -> bool:
    """Note [Inductor: C++ wrapper]: for CPU graphs without opaque calls, unless COMPILED_BW_CPP_WRAPPER is 0 or
    empty, and without an extern call that takes an index-less device (Note [Inductor: device
    index]).  Not on CUDA:
    Inductor's GPU C++ wrapper fills its kernel parameter cache by running the kernels at
    compile time, which fake inputs cannot ("CudaKernelParamCache not populated"); CUDA graphs
    (runtime/cudagraphs.py) are the GPU's answer to launch overhead."""
    return (not sites and os.environ.get("COMPILED_BW_CPP_WRAPPER", "1") not in ("", "0")
            and all(t.device.type == "cpu" for t in inputs if isinstance(t, torch.Tensor))
            and (gm is None or not (_indexless_device_externs(gm) or _draws(gm) or _assigns(gm)
                                    or _floor_divisions(gm))))


def _floor_divisions(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph divides floats with rounding_mode="floor", which our compiles leave to
    the aten kernel (Note [Inductor: known-wrong lowerings]): the C++ wrapper has no shim for
    it and logs a warning where it runs it through its proxy executor."""
    return any(_floor_of_floats(*n.args, **n.kwargs)
               for n in gm.graph.nodes if n.op == "call_function"
               and n.target in DIVISIONS)


def _assigns(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph writes a buffer with `compiled_bw::assign` (graph/mutated.py Note
    [Buffer writes at the recomputation point]): a call kept in order (Note [Inductor: call
    order]) by the Python wrapper, which calls it."""
    return bool(gm.graph.find_nodes(op="call_function", target=assign))


def _draws(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph calls `compiled_bw::rng_draw` (graph/rng.py), a Python kernel: the
    Python wrapper calls it (as it calls our opaque op)."""
    return bool(gm.graph.find_nodes(op="call_function", target=rng_draw))


# ops Inductor may lower to a tensor constant made on the device argument (torch 2.15)
_CONSTANT_FROM_DEVICE = (torch.ops.aten._efficientzerotensor.default,)


def _indexless_device_externs(gm: torch.fx.GraphModule) -> list:
    """Note [Inductor: device index]: aten calls Inductor runs as extern kernels, given a
    device without an index."""
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and (n.target in lowering.fallbacks or n.target in _CONSTANT_FROM_DEVICE)
            and any(isinstance(d, torch.device) and d.index is None
                    for d in (*n.args, *n.kwargs.values()))]


_input_size_asserts = torch_inductor.original("codegen_input_size_asserts")


def _maybe_input_size_asserts(self) -> None:
    if not THREAD.keyed_inputs:
        _input_size_asserts(self)


_codegen_free = torch_inductor.original("codegen_free")


def _free_not_reused(self, buffer) -> None:
    """Note [Inductor: opaque buffers]: during our compiles (Python wrapper), a buffer Inductor
    may not reuse is still freed after its last use; anything else as Inductor does."""
    name = buffer.get_name()
    g = V.graph
    if (THREAD.keyed_inputs and not g.cpp_wrapper
            and name in g.never_reuse_buffers and name not in self.freed
            and name not in g.removed_buffers and name not in g.graph_inputs
            and name not in g.constants and isinstance(buffer, ir.Buffer)
            and not isinstance(buffer, ir.InputBuffer)):
        self.freed.add(name)
        self.writeline(torch_inductor.FreeLine(self, buffer))
        return
    _codegen_free(self, buffer)


_generate_fallback_kernel = torch_inductor.original("generate_fallback_kernel")
# Note [Inductor: direct calls]: op -> (module, function) the generated code calls instead
_DIRECT = {opaque: ("compiled_bw.calls.opaque", "opaque_direct"),
           deliver: ("compiled_bw.calls.deliver", "deliver_direct"),
           assign: ("compiled_bw.graph.mutated", "assign_direct"),
           barrier: None}


def _direct_calls(self, node) -> None:
    """Note [Inductor: direct calls]: during our compiles (Python wrapper), our ops' extern
    calls call their Python functions without the dispatcher; anything else as Inductor does."""
    op = getattr(node, "op_overload", None)
    if not (THREAD.keyed_inputs and op in _DIRECT and not V.graph.cpp_wrapper):
        _generate_fallback_kernel(self, node)
        return
    target = _DIRECT[op]
    if target is None:          # a barrier: ordering only, nothing to run
        return
    module, name = target
    alias = f"compiled_bw_{name}"
    self.add_import_once(f"from {module} import {name} as {alias}")
    node.python_kernel_name = alias
    self.writeline(ExternKernelAllocLine(self, node))


_global_ordering = torch_inductor.original("decide_global_ordering_of_comms")
_CALLS = (opaque, deliver, assign, barrier)


def _insert_barriers(gm: torch.fx.GraphModule) -> None:
    """Note [Inductor: call order]: before each opaque call / delivery point / buffer write
    (graph/mutated.py Note [Buffer writes at the recomputation point]), a barrier taking
    every tensor computed
    before it and used after it, so that Inductor computes them before the call (an unrealized
    value would be computed inside a later kernel, reading its inputs after the call)."""
    nodes = list(gm.graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    active: dict = {}               # computed tensors defined so far -> position of last use
    for i, n in enumerate(nodes):
        if n.op == "call_function" and n.target in (opaque, deliver, assign):
            active = {v: k for v, k in active.items() if k > i}
            if active:
                with gm.graph.inserting_before(n):
                    b = gm.graph.call_function(barrier, (list(active),))
                b.meta["val"] = None
        if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor) and n.users:
            active[n] = max(pos[u] for u in n.users)
    gm.recompile()


def _ordered_calls(nodes: list, *args, **kwargs) -> list:
    """Note [Inductor: call order]: Inductor's ordering of collectives, then a WeakDep from
    each of our calls on the previous call and on every node between the two, and from each
    node reading a tensor user code got or returned on the latest call before it (scheduler
    nodes in graph order, before dependencies are computed)."""
    nodes = _global_ordering(nodes, *args, **kwargs)
    if THREAD.keyed_inputs:
        before: list = []       # the previous call and the nodes after it
        last = None             # the latest opaque call's / delivery point's buffer
        seen: set = set()       # buffers user code got or returned so far
        for n in nodes:
            op = getattr(n.node, "op_overload", None)
            if op not in _CALLS:
                names = n.get_buffer_names()
                if last is not None and names and \
                        any(d.name in seen for d in n.read_writes.reads):
                    # mutating_buf: not a buffer the node writes, or fusion would take the
                    # dep for an in-place mutation's (Scheduler.fusable_weak_dep)
                    n.add_fake_dep(WeakDep(last, mutating_buf=last, is_fake=True))
                    if isinstance(n.node, ir.MultiOutput):   # one of a call's outputs
                        seen.update(names)
                before.append(n)
                continue
            mutating = next(iter(n.get_buffer_names()))
            for p in before:
                for buf in p.get_buffer_names():
                    n.add_fake_dep(WeakDep(buf, mutating_buf=mutating, is_fake=True))
            before = [n]
            if op is not barrier:
                last = mutating
                seen.update(d.name for d in n.read_writes.reads)
                seen.add(mutating)
    return nodes


def install() -> None:
    """Our changes to Inductor (Notes [Inductor: no input asserts], [Inductor: known-wrong
    lowerings], [Inductor: call order], [Inductor: direct calls]), each active only while compiled_bw compiles
    (`THREAD.keyed_inputs`): at import, and again after compiled_bw.uninstall()."""
    if torch_inductor.is_patched("decide_global_ordering_of_comms"):
        return
    for op, wrong in KNOWN_WRONG.items():
        _keep_out_of_inductor(op, wrong)
    for op, pins in PINS_SIZES.items():
        _keep_out_of_inductor(op, pins, fx_strides=True)
    torch_inductor.patch("codegen_input_size_asserts", _maybe_input_size_asserts)
    torch_inductor.patch("codegen_free", _free_not_reused)
    torch_inductor.patch("generate_fallback_kernel", _direct_calls)
    torch_inductor.patch("decide_global_ordering_of_comms", _ordered_calls)


install()


def _tuple_outputs(gm: torch.fx.GraphModule):
    forward = gm.forward        # not gm(): eager.py Note [The graph is no user module]

    def program(*args):
        return tuple(forward(*args))
    return program


def _output_vals(gm: torch.fx.GraphModule) -> list:
    out = gm.graph.find_nodes(op="output")[0]
    return [n.meta.get("val") if isinstance(n, torch.fx.Node) else None
            for n in pytree.arg_tree_leaves(*out.args)]


def _pin_output_strides(gm: torch.fx.GraphModule, vals: list) -> tuple:
    out = gm.graph.find_nodes(op="output")[0]
    args = out.args[0]
    assert len(args) == len(vals), f"retrace changed the output count: {len(vals)} -> {len(args)}"
    strides = [v.stride() if isinstance(v, torch.Tensor) else None for v in vals]
    out.meta["original_output_strides"] = strides
    out.meta["user_visible_output_idxs"] = [
        i for i, a in enumerate(args) if isinstance(a, torch.fx.Node) and strides[i] is not None]
    return tuple(strides)


# Note [Inductor: unbatched max_pool3d backward]
#    Inductor runs aten.max_pool3d_with_indices_backward as a fallback kernel and asserts that
#    its result has the strides torch's meta kernel predicts: contiguous for a 4-D (unbatched)
#    input.  The CPU kernel follows the input's suggested memory format, which for a 4-D input
#    with channels-last strides (a channels_last_3d batch squeezed) is channels-last: the
#    assert failed where eager succeeds (PyTorch's test_max_pool3d_ndhwc).  In our Inductor
#    graphs that input and the incoming grad are forced contiguous first (Inductor's force_stride_order; a clone would
#    take its input's layout): the kernel then returns what meta predicts, with the same values
#    (the indices address each (D, H, W) volume, whatever the layout); a leaf's `.grad` takes
#    its parameter's layout either way (AccumulateGrad's layout contract).
def _contiguous_unbatched_pool3d(gm: torch.fx.GraphModule) -> None:
    op = torch.ops.aten.max_pool3d_with_indices_backward.default
    changed = False
    for n in gm.graph.find_nodes(op="call_function", target=op):
        for x in n.args[:2]:        # the grad and the input: the kernel follows both
            v = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
            if v is None or v.dim() != 4 or v.is_contiguous():
                continue
            want = v.clone(memory_format=torch.contiguous_format)
            with gm.graph.inserting_before(n):
                c = gm.graph.call_function(torch_inductor.force_stride_order,
                                           (x, list(want.stride())))
            c.meta["val"] = want
            n.replace_input_with(x, c)
            changed = True
    if changed:
        gm.recompile()


# Note [Inductor: reshape copies on CPU]
#    A `reshape` of a tensor its strides do not allow viewing is a copy: ATen's composite
#    `reshape` is `_unsafe_view(clone(x, contiguous_format))`, and eager makes that copy.
#    Inductor inlines the clone into whatever reads the view, addressing the source through
#    the view's reindexing.  Where the view regroups dims (MultiheadAttention's backward:
#    the grads of q, k, v, (B, H, L, hd) -> (B*H, L, hd) -> permuted -> (L, B*H, hd) ->
#    (L, B, H*hd)), that reindexing goes through the flat index, floor divisions and moduli
#    of it (`((x3 + 64*x0)//16) % (4*ks0)` with symbolic sizes), which Inductor's C++ code
#    cannot vectorize: the kernel that reads it runs one element at a time.  So on CPU the
#    clone of a non-contiguous tensor that such a view reads is realized as eager realizes
#    it (Inductor's force_stride_order to contiguous strides: a contiguous buffer, which the
#    view then reinterprets).  Same values (a copy into contiguous memory); as many copies as
#    eager makes.  nn.TransformerEncoder's backward (2 layers, d=64, one thread): a static
#    graph (64 x 439 tokens) 1.11x -> 0.91x of eager's, a dynamic one 1.19x -> 0.88x
#    (benchmarks/RESULTS.md, session 47).  Not on CUDA (Triton computes such
#    indices per element; not measured there).  Symbolic sizes are compared as expressions,
#    never by evaluating them (no guard is added while compiling a dynamic graph).
_RESHAPES = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
             torch.ops.aten.reshape.default)


def _expr(size):
    return sym_parts(size)[0] if isinstance(size, torch.SymInt) else size


def _contiguous_strides(shape) -> list:
    """Contiguous strides of `shape`: ints and SymInts (of the shape's own symbols)."""
    out = [1]
    for size in reversed(shape[1:]):
        out.insert(0, out[0] * size)
    return out


def _same_size(a, b) -> bool:
    """Whether two sizes or strides (ints or SymInts) are one expression (no guard)."""
    return sympy.expand(_expr(a) - _expr(b)) == 0


def _looks_contiguous(v) -> bool:
    """Whether v's strides are contiguous strides, dims of size 1 aside."""
    want = _contiguous_strides(v.shape)
    return all(_expr(size) == 1 or _same_size(st, w)
               for size, st, w in zip(v.shape, v.stride(), want, strict=True))


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(_same_size(x, y) for x, y in zip(a, b, strict=True))


def _reshape_copies(gm: torch.fx.GraphModule) -> list:
    """(view node, its clone input) pairs of Note [Inductor: reshape copies on CPU]."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in _RESHAPES:
            continue
        x = n.args[0]
        if not (isinstance(x, torch.fx.Node) and x.target is torch.ops.aten.clone.default
                and x.kwargs.get("memory_format") is torch.contiguous_format):
            continue
        v, src, out_v = x.meta.get("val"), x.args[0].meta.get("val"), n.meta.get("val")
        if not all(isinstance(t, torch.Tensor) for t in (v, src, out_v)):
            continue
        if _looks_contiguous(src) or not _looks_contiguous(v) or \
                _same_shape(out_v.shape, v.shape):
            continue
        out.append((n, x))
    return out


def _realized_reshape_copies(gm: torch.fx.GraphModule) -> None:
    """Note [Inductor: reshape copies on CPU]: each such clone realized for its view."""
    pairs = _reshape_copies(gm)
    g = gm.graph
    for n, x in pairs:
        v = x.meta["val"]
        with g.inserting_before(n):
            stride = [1]        # contiguous strides, as graph values
            for d in range(v.dim() - 1, 0, -1):
                st, size = stride[0], v.shape[d]
                if isinstance(size, torch.SymInt):
                    size = g.call_function(torch.ops.aten.sym_size.int, (x, d))
                    size.meta["val"] = v.shape[d]
                if isinstance(st, int) and isinstance(size, int):
                    stride.insert(0, st * size)
                    continue
                m = g.call_function(operator.mul, (st, size))
                m.meta["val"] = v.stride()[d - 1]
                stride.insert(0, m)
            c = g.call_function(torch_inductor.force_stride_order, (x, stride))
        c.meta["val"] = v
        n.replace_input_with(x, c)
    if pairs:
        gm.recompile()


# Note [Inductor: views of intermediates]
# Our graph's `view`s were traced on eager's meta strides.  Inductor retraces the graph with its
# own decompositions, whose outputs may take other strides (a `cat` of rotary halves of a
# transposed q in Phi-3's attention comes out (384, 16, 32, 1) where eager's is contiguous),
# and a `view` that was legal on eager's strides then raises ("Cannot view a tensor with
# shape ...") and the whole graph stays on the eager backend.  So before that retrace, a
# `view` of an intermediate (not of a graph input, whose strides are fixed) whose result is
# never written to becomes `reshape`: the same values, a view wherever the strides allow.
def _intermediate_views(gm: torch.fx.GraphModule) -> list:
    """The `view`s of intermediates whose result is never written to."""
    return [n for n in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.view.default)
            if isinstance(n.args[0], torch.fx.Node) and n.args[0].op != "placeholder"
            and not any(isinstance(u.target, OpOverload) and u.target._schema.is_mutable
                        for u in n.users)]


# Note [Inductor: exact output strides]
# keep_output_stride makes Inductor lay out each output as the captured graph's output `val`
# says (runtime/real_strides.py Note [Real output strides]: the real kernels' strides where a
# first run showed them), but only as far as its strides are "significant": a size-1
# dimension's stride follows the retraced graph's own prediction (ir.
# try_match_insignificant_strides), and AccumulateGrad, whose layout contract ignores size-1
# dimensions, stores such an output as `.grad`.  So each static-shaped output with a size-1
# dimension goes through `compiled_bw::exact_strides`, lowered to require_exact_strides
# (Note [Inductor: opaque input strides]): the same values, reinterpreted where only size-1
# strides differ.  Only Inductor's graphs hold the op; its eager kernel is for completeness.
_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("exact_strides(Tensor x, int[] stride) -> Tensor")


def _exact_strides_impl(x, stride):
    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


_LIB.impl("exact_strides", _exact_strides_impl, "CompositeExplicitAutograd")
torch.library.register_fake("compiled_bw::exact_strides", _exact_strides_impl, lib=_LIB)
exact_strides = torch.ops.compiled_bw.exact_strides.default


@lowering.register_lowering(exact_strides, type_promotion_kind=None)
def _lower_exact_strides(x, stride):
    return ir.ExternKernel.require_exact_strides(x, stride)


def _exact_output_strides(gm: torch.fx.GraphModule, vals: list) -> None:
    """Note [Inductor: exact output strides]: the outputs that may need it go through the op,
    whose `val` has the strides Inductor must give them."""
    out = gm.graph.find_nodes(op="output")[0]
    args = list(out.args[0])
    changed = False
    for i, (a, v) in enumerate(zip(args, vals, strict=True)):
        if not (isinstance(a, torch.fx.Node) and isinstance(v, torch.Tensor)) or 1 not in v.shape:
            continue
        val = a.meta.get("val")
        if not all(isinstance(d, int) for d in (*v.shape, *v.stride())) or \
                getattr(val, "fake_mode", None) is None:
            continue
        with gm.graph.inserting_before(out):
            n = gm.graph.call_function(exact_strides, (a, list(v.stride())))
        with val.fake_mode:
            n.meta["val"] = torch.empty_strided(v.shape, v.stride(), dtype=val.dtype,
                                                device=val.device)
        args[i] = n
        changed = True
    if changed:
        out.args = (tuple(args) if isinstance(out.args[0], tuple) else args, *out.args[1:])
        gm.recompile()


# Note [Inductor: writes into tensors user code holds]
# A traced custom backward may write into its grad in place (`return g.mul_(2)`).  Where that
# grad is a tensor user code got or returned -- an opaque call's input or output (a hook that
# kept `g`), or a delivered grad -- eager's in-place op changes the tensor user code holds.
# The eager backend runs the op as traced, in place; Inductor's retrace functionalizes it into
# a new value, and the held tensor would keep its old values (found by a random-program
# differential with user code, 2026-11-28).  Such a graph is not compiled by Inductor: it
# runs on the eager backend, with the compile failure recorded (stats().fallback_reasons).
# Only a write after user code saw the tensor counts: one before (a formula finishing its own
# result in place, e.g. the `narrow(...).mul_(2)` of irfft's backward, whose result then goes
# to an opaque CopySlices) is in the value functionalization hands on, as eager hands on the
# written tensor.  A graph input user code gets (a root grad passed on to a hook) is user
# code's before the graph runs: any write into it counts.  Writes into other graph inputs
# (saved tensors, root grads) are copied back by functionalization as eager leaves them.  A
# buffer sum the holders made in place (BUFFER_SUM, trace/holders.py) is into what the engine
# alone holds (CopySlices' grad for the base among opaque outputs), never such a write.
def _writes_user_code_sees(gm: torch.fx.GraphModule) -> list:
    """The in-place ops that write into an opaque call's input or output or a delivered grad
    (or a view of one) after user code got it."""
    seen: dict = {}     # node -> graph position from which user code holds it
    order = {n: k for k, n in enumerate(gm.graph.nodes)}

    def held(t, k: int) -> None:    # a graph input is user code's from the start
        seen.setdefault(t, -1 if t.op == "placeholder" else k)
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is opaque:
            for t in (*n.users, *(g for g in n.args[1] if isinstance(g, torch.fx.Node))):
                held(t, order[n])
        elif n.target is deliver and isinstance(n.args[1], torch.fx.Node):
            held(n.args[1], order[n])
    if not seen:
        return []
    bad = []
    for n in gm.graph.nodes:
        op = n.target
        if n.op != "call_function" or not isinstance(op, OpOverload) or \
                not op._schema.is_mutable or n.meta.get(BUFFER_SUM):
            continue    # (a buffer sum the holders made: into what only the engine holds)
        for arg in written_args(n):
            base = arg
            while isinstance(base, torch.fx.Node):
                if seen.get(base, order[n]) < order[n]:
                    bad.append(n.name)
                    break
                if not (base.op == "call_function" and base.args
                        and returns_alias(base.target)):
                    break
                base = base.args[0]     # a view (or an in-place op's result) of its input
    return bad


def compile_inductor(gm: torch.fx.GraphModule, example_inputs: list):
    # the sizes as our trace saw them; a failing meta kernel is a compile failure we report
    # (torchapi/dynamo.py Note [Meta failures are our fallbacks])
    with pool_sizes_without_parity_guards(), fake_work.ours():
        return _compile_inductor(gm, example_inputs)


def _compile_inductor(gm: torch.fx.GraphModule, example_inputs: list):
    install()               # (after compiled_bw.uninstall(): our compiles need it)
    written = _writes_user_code_sees(gm)
    if written:     # Note [Inductor: writes into tensors user code holds]
        raise NotImplementedError(
            f"the graph writes in place into a tensor user code holds ({', '.join(written[:3])}"
            ": a traced custom backward's in-place op on a grad a hook or custom backward got "
            "or returned); Inductor's functionalization would leave that tensor unchanged")
    vals = _output_vals(gm)
    twins = fresh_returns.needs_twins(gm)
    direct = fresh_returns.needs_functional(gm)
    reshapes = bool(_intermediate_views(gm))
    cross_entropy = bool(_cross_entropy_backwards(gm))
    ordered = bool(current_sites()) or _assigns(gm)
    sums = sum_strides.in_place_sums(gm)
    if ordered or twins or direct or reshapes or cross_entropy or sums:
        gm = copy.deepcopy(gm)      # the captured graph stays as it was (last_graph, eager)
    if sums:        # Note [Inductor: in-place sums keep their strides]
        sum_strides.keep_sum_strides(gm)
    if reshapes:    # Note [Inductor: views of intermediates]
        for n in _intermediate_views(gm):
            n.target = torch.ops.aten.reshape.default
        gm.recompile()
    if cross_entropy:       # Note [Inductor: cross-entropy backward in one pass]
        _fuse_cross_entropy_backwards(gm)
    if ordered:
        _insert_barriers(gm)
    if twins:       # Note [Inductor: mutating ops that return their input]
        fresh_returns.use_twins(gm)
    if direct:      # Note [Inductor: mutating ops called directly]
        fresh_returns.use_functional(gm)
    retraced = make_fx(torch.func.functionalize(_tuple_outputs(gm)),
                       decomposition_table=_decompositions(),
                       tracing_mode="fake")(*one_object_per_input(example_inputs))
    _exact_output_strides(retraced, vals)    # Note [Inductor: exact output strides]
    strides = _pin_output_strides(retraced, vals)
    _contiguous_unbatched_pool3d(retraced)
    # CODEGEN_VERSION, SOURCE_KEY: artefacts cached before a change of how we compile (e.g. Note
    # [Inductor: no input asserts]) are not reused (Note [Inductor: cache key of our code])
    sites = current_sites()
    retraced.compiled_bw_key = repr((CODEGEN_VERSION, SOURCE_KEY, strides,
                                     [(s.out_specs, s.out_strides) for s in sites]))
    phs = retraced.graph.find_nodes(op="placeholder")
    for n, ex in zip(phs, example_inputs, strict=True):
        if "val" not in n.meta:     # a SymInt input of a dynamic graph (runtime/dynamic.py)
            n.meta["val"] = ex
    fakes = [n.meta["val"] for n in phs]
    fake_mode = detect_fake_mode(fakes)
    patches = {"keep_output_stride": True}
    if has_traced_recomputation(gm):    # Note [Inductor: recomputation order]
        patches["reorder_for_peak_memory"] = False
    if all(t.device.type == "cpu" for t in fakes if isinstance(t, torch.Tensor)):
        patches["layout_optimization"] = False  # Note [Inductor: no layout optimization on CPU]
        _realized_reshape_copies(retraced)      # Note [Inductor: reshape copies on CPU]
    THREAD.keyed_inputs = True
    try:
        with tracing(TracingContext(fake_mode)), inductor_config.patch(**patches):
            fn = compile_fx_inner(retraced, fakes,
                                  cpp_wrapper=cpp_wrapper(sites, fakes, retraced),
                                  cudagraphs=BoxedBool(False))  # Note [Inductor: no CUDA graphs of its own]
    finally:
        THREAD.keyed_inputs = False
    if isinstance(fn, CompiledFxGraph):
        return fn
    # A graph without calls comes back as make_boxed_func(gm.forward), which keeps the box.
    def run(box: list):
        args = list(box)
        box.clear()
        return fn(args)
    return run
