"""AOT backward splicing: every use of AOTAutograd internals (torch 2.13) lives here.

Consumes a `CompiledFunctionBackward` node (the autograd node of a `torch.compile`d forward);
produces, at trace time, its backward inlined into our graph: the AOT prologue (tangent
coercion, argument order `[*symints, *saved, *opaque, *tangents]`) traced, the AOT backward FX
module's nodes copied in (names prefixed `aot<k>_`), the epilogue traced.  The prologue is
traced rather than proxied: its decisions depend only on tensor metadata that the signature
holds, and an opaque call would have to copy every saved tensor it passes through.
`CompiledFunction.compiled_bw` is never touched, so the lazy backward compile never happens.
When the module is not available, or the forward's backend has a bw_compiler of its own (a
user's: torchapi/dynamo.py Note [A backend's own backward compiler]), `aot_plan` says why and
the node runs as one opaque custom call.  tests/test_private_api.py checks every attribute used here and names what moved.

The module is run as AOTAutograd's own backward compile (Inductor) runs it, see `_Splice`:
tensor constants (a module loaded from AOTAutograd's cache holds real ones) become graph
constants, and a `view` of a saved tensor that Inductor's forward gave another layout copies.
Any other failure raises `SpliceFailed` naming the AOT graph and the op (the step falls back).
"""
from __future__ import annotations

import torch

from ..torchapi import dynamo as torch_dynamo
from .mutated import NO_VERSION_BUMP
from .rng import draw_with_state

REQUIRED_CF_ATTRS = ("_aot_id", "_lazy_backward_info", "_bw_prologue_fn", "_bw_epilogue_fn",
                     "metadata")
_PLANS: dict = {}


def is_aot_node_class(cls) -> bool:
    fwd = getattr(cls, "_forward_cls", None)
    return fwd is not None and hasattr(fwd, "_aot_id") and hasattr(fwd, "_lazy_backward_info")


class AotPlan:
    """Per CompiledFunction class: its backward module, or why it cannot be spliced."""
    __slots__ = ("bw_module", "cf", "reason")

    def __init__(self, cf, bw_module, reason: str) -> None:
        self.cf = cf
        self.bw_module = bw_module
        self.reason = reason


def aot_plan(cls) -> AotPlan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls._forward_cls)
    return plan


def _make_plan(cf) -> AotPlan:
    missing = [a for a in REQUIRED_CF_ATTRS if not hasattr(cf, a)]
    if missing:
        # torchapi/dynamo.py Note [AOT backward splicing per release]: torch 2.11's has no
        # _bw_prologue_fn / _bw_epilogue_fn; the backward runs as one opaque call
        return AotPlan(cf, None, torch_dynamo.aot_splice_off() or (
            f"AOTAutograd's CompiledFunction has no {missing} (torch moved it)"))
    try:
        own = torch_dynamo.own_bw_compiler(cf)
    except (LookupError, AttributeError) as e:
        own = f"? (torch {torch.__version__} moved it: {type(e).__name__}: {e})"
    if own:     # torchapi/dynamo.py Note [A backend's own backward compiler]
        return AotPlan(cf, None, f"its torch.compile backend compiles the backward with its "
                                 f"own bw_compiler ({own}): the real node calls it, as eager "
                                 f"autograd does")
    meta = cf.metadata
    if getattr(meta, "is_rng_op_functionalized", False) or getattr(meta, "num_graphsafe_rng_states", 0):
        return AotPlan(cf, None, "AOT backward with functionalized RNG state")
    try:
        bw = torch_dynamo.extract_bw_module(cf)
    except Exception as e:  # noqa: BLE001 -- any failure: run the compiled backward opaquely
        return AotPlan(cf, None, f"AOT backward module not available ({type(e).__name__}: {e})")
    if bw is None:
        return AotPlan(cf, None, "AOT backward module not available")
    drawn = _inductor_draws(bw)
    if drawn:       # Note [Inductor's own random numbers]
        return AotPlan(cf, None, f"its backward recomputes random numbers Inductor drew in "
                                 f"the forward ({drawn}): only Inductor's own compiled "
                                 f"backward draws them again")
    return AotPlan(cf, bw, "")


# Note [Inductor's own random numbers]
# Inductor lowers a forward's random ops (dropout's mask) to its own generator: a seed tensor
# drawn once per graph and `prims.inductor_random(shape, seed, ...)`, a function of the seed
# and each element's index computed inside its kernels.  Where the partitioner recomputes such
# an op in the backward (a checkpointed region of a torch.compile'd model with dropout), the
# backward graph holds `inductor_lookup_seed` / `inductor_random` on the saved seeds, and only
# Inductor's compiled kernels draw the same numbers again: the prims' reference
# implementation (what our eager backend, or a trace of it, runs) draws others -- another
# dropout mask, a wrong gradient.  Such an AOT backward is not spliced: it runs as one opaque
# call of the real node, whose backward AOTAutograd compiles with Inductor as in eager.
_INDUCTOR_RANDOM = ("inductor_random", "inductor_randint", "inductor_seeds",
                    "inductor_lookup_seed")


def _inductor_draws(bw) -> str:
    found = {n.target.__name__.split(".")[0] for n in bw.graph.nodes
             if n.op == "call_function" and getattr(n.target, "namespace", None) == "prims"
             and getattr(n.target, "__name__", "").split(".")[0] in _INDUCTOR_RANDOM}
    return ", ".join(f"prims.{f}" for f in sorted(found))


def saved_of(node) -> tuple:
    """(saved tensors -- unpacked, so eager's version check runs -- , the no-vc-check list,
    symints, opaque objects) of this step's ctx."""
    return (node.saved_tensors, list(getattr(node, "_tensors_no_vc_check", ()) or ()),
            tuple(node.symints), tuple(getattr(node, "opaque_objects", ()) or ()))


def _inductor_compiled(cf) -> bool:
    """Whether torch.compile's Inductor compiled this forward (and so compiles its backward:
    kernels that write into mutated inputs without bumping their version counters)."""
    return type(getattr(cf, "compiled_fw", None)).__module__.startswith("torch._inductor")


class SpliceFailed(Exception):
    """An op of an AOT backward module failed on our fake tensors (message names graph and op)."""


# Views whose eager kernels need a viewable layout; Inductor's lowering copies to contiguous
# instead (ir.View.create: require_contiguous), and the AOT backward was made for Inductor.
_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)
# Ops that read their input's storage through explicit strides: the values depend on its layout.
_AS_STRIDED = (torch.ops.aten.as_strided.default, torch.ops.aten.as_strided_scatter.default,
               torch.ops.aten.as_strided_copy.default)


def view_strides(size, stride, shape) -> list | None:
    """The strides `view(shape)` of a tensor (size, stride) gets, None if it cannot be viewed
    (a port of at::detail::computeStride, aten/src/ATen/TensorUtils.cpp)."""
    numel = 1
    for s in size:
        numel *= s
    shape = list(shape)
    if -1 in shape:
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        shape[shape.index(-1)] = numel // known if known else 0
    if numel == 0:
        return [1] * len(shape)
    if len(size) == 0:
        return [1] * len(shape)
    new = [0] * len(shape)
    view_d = len(shape) - 1
    chunk = stride[-1]
    t_numel = v_numel = 1
    for d in range(len(size) - 1, -1, -1):
        t_numel *= size[d]
        if d == 0 or (size[d - 1] != 1 and stride[d - 1] != t_numel * chunk):
            while view_d >= 0 and (v_numel < t_numel or shape[view_d] == 1):
                new[view_d] = v_numel * chunk
                v_numel *= shape[view_d]
                view_d -= 1
            if v_numel != t_numel:
                return None
            if d > 0:
                chunk, t_numel, v_numel = stride[d - 1], 1, 1
    return new if view_d == -1 else None


class _Splice(torch.fx.Interpreter):
    """Runs an AOT backward module on fake tensors under make_fx, with the semantics the
    module was made for (AOTAutograd compiles it with Inductor):
    - a real tensor constant (get_attr; a module deserialized from AOTAutograd's cache holds
      them where a fresh one holds factory calls) goes through `lift_fresh`, which make_fx
      records as `lift_fresh_copy` of a graph constant: fake mode never sees a real tensor,
      and nothing can write into the shared constant;
    - a view of a tensor whose layout cannot be viewed (Inductor's layout optimization gave a
      saved activation channels-last strides; AOTAutograd restrides the placeholders so, and
      Inductor's `view` copies to contiguous) copies it to contiguous first, as Inductor does.
    - an as_strided-family op of a non-contiguous tensor of 2 or more dims raises (its values
      depend on a layout Inductor chooses); the step falls back.
    Remembers the node it runs, so a failure can name it."""

    def __init__(self, gm) -> None:
        super().__init__(gm)
        self.current = None

    def run_node(self, n):
        self.current = n
        return super().run_node(n)

    def get_attr(self, target, args, kwargs):
        v = super().get_attr(target, args, kwargs)
        if type(v) is torch.Tensor:
            return torch.ops.aten.lift_fresh.default(v)
        return v

    def call_function(self, target, args, kwargs):
        if target in _VIEWS and isinstance(args[0], torch.Tensor):
            x = args[0]
            if view_strides(tuple(x.shape), x.stride(), args[1]) is None:
                x = torch.ops.aten.clone.default(x, memory_format=torch.contiguous_format)
                args = (x, *args[1:])
        elif target in _AS_STRIDED and isinstance(args[0], torch.Tensor) and \
                args[0].dim() > 1 and not args[0].is_contiguous():
            # Inductor reads the storage of the layout *it* chose for this tensor, which for a
            # non-contiguous one we cannot know: equal values are not guaranteed.
            raise SpliceFailed(f"{target} of a non-contiguous tensor (strides "
                               f"{tuple(args[0].stride())}): its values depend on the layout "
                               f"Inductor chooses")
        elif target is torch_dynamo.run_with_rng_state:     # Note [AOT RNG replays]
            out = draw_with_state(args[0], args[1], args[2:], kwargs)
            if out is not None:
                return out
        return super().call_function(target, args, kwargs)


# Note [AOT RNG replays]
# A torch.compile'd forward whose checkpointed region has random ops (dropout; also SDPA,
# tagged nondeterministic_seeded) saves the CPU generator state before each and, in its
# backward, recomputes the op under `run_with_rng_state(state, op, ...)`.  Spliced, that would
# be a higher-order op our Inductor compile cannot lower (the graph stayed on the eager
# backend); it is the same draw as rng.py's `rng_draw` from that state (set the generator,
# run the op, put the generator back), which Inductor keeps as an extern call.  A non-CPU op
# stays the higher-order op.


def trace_aot(plan: AotPlan, node, saved: list, no_vc: list, grads: list, prefix: str,
              tracer_graph, passthrough: tuple = (), symints=None) -> tuple:
    """Inline one AOT backward (under make_fx); returns the per-forward-input grads tuple that
    CompiledFunction.backward would return.  Graph nodes created here get `prefix`.
    symints: the module's SymInt arguments (a dynamic graph's SymInt inputs), else the ctx's.
    Exceptions of the `passthrough` types propagate as they are; any other raises SpliceFailed."""
    cf = plan.cf
    before = set(tracer_graph.nodes)
    symints = list(node.symints) if symints is None else list(symints)
    # grad mode off for all of it, as eager's engine runs the backward (create_graph=False):
    # the prologue refuses input mutations in the backward when grad mode is on
    with torch.no_grad():
        all_args = cf._bw_prologue_fn(tuple(saved) + tuple(no_vc), symints,
                                      list(getattr(node, "opaque_objects", ()) or ()),
                                      list(grads))
    interp = _Splice(plan.bw_module)
    try:
        with torch.no_grad():
            out = interp.run(*all_args)
    except passthrough:
        raise
    except Exception as e:  # SpliceFailed included: named and re-raised, the step falls back
        n = interp.current
        op = "?" if n is None else (f"{n.target}" if n.op == "call_function" else f"{n.op} {n.target}")
        raise SpliceFailed(
            f"splicing the AOT backward of torch.compile graph {getattr(cf, '_aot_id', '?')} "
            f"({type(node).__name__}) failed at node {getattr(n, 'name', '?')!r} ({op}): "
            f"{type(e).__name__}: {e}") from e
    with torch.no_grad():
        out = cf._bw_epilogue_fn(out)
    inductor = _inductor_compiled(cf)
    for n in tracer_graph.nodes:
        if n not in before and n.op == "call_function":
            n._rename(prefix + n.name)
            if inductor:    # mutated.py Note [Graph inputs the backward mutates]
                n.meta[NO_VERSION_BUMP] = True
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
