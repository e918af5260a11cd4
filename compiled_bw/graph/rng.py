"""Functional RNG for traced checkpoint recomputation: random ops drawing from a state tensor.

Consumes a checkpoint region's traced recomputation (an aten GraphModule, functionalized) that
holds random ops (dropout's `bernoulli`); produces the same graph with every random op
replaced by `compiled_bw::rng_draw(state, tensors, call)`, which runs that op from the given
CPU generator state and returns its output and the state after it.  The states form one chain
per region, starting at a new last input: the RNG state checkpoint saved in the forward.

Note [Functional RNG in recomputation]
Eager's checkpoint (preserve_rng_state=True) recomputes a region under `fork_rng`: it saves
the global generator state, sets the state the forward saved before running the region
(`fwd_cpu_state`), runs the region -- its random ops draw, in the forward's order, the
numbers the forward drew, so dropout's recomputed mask is the forward's -- and puts the saved
global state back.  So the recomputation's draws are a function of the saved state alone,
and the global generator after the backward is what it was before.  The graph does the same
without touching the global generator: `rng_draw` sets the chain's state, runs the op (the
same aten kernel eager runs, on a tensor of the same size, dtype and device: the same
numbers), reads the state after it and puts the global state back; the next random op of the
region draws from that state.  The chain is data, so no backend may reorder draws (Inductor
keeps `rng_draw` as an extern call; its own random lowering, which draws other numbers, never
sees these ops), and nothing else in the backward (hooks, custom Functions drawing numbers)
sees or moves the region's state.  Only CPU regions: a region whose arguments are on an
accelerator restores that device's generator too (it keeps the per-node path).  A random op
given its own generator, one returning several tensors, or one with a non-plain argument,
keeps the per-node path too (rewrite returns None).
"""
from __future__ import annotations

import ast
import math
import operator

import torch

from ..torchapi.dynamo import OpOverload, TorchDispatchMode

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("rng_draw(Tensor state, Tensor?[] tensors, str call) -> (Tensor, Tensor)")
# the same for an op returning two tensors (native_dropout's output and mask; Inductor's
# extern calls return tensors, not lists)
_LIB.define("rng_draw2(Tensor state, Tensor?[] tensors, str call) -> (Tensor, Tensor, Tensor)")

_CALLS: dict = {}   # call string -> (op, args template, kwargs template)
_TAGS = {"dtype": torch.dtype, "device": torch.device, "layout": torch.layout,
         "memory_format": torch.memory_format}


def _decode(call: str):
    got = _CALLS.get(call)
    if got is None:
        name, args, kwargs = ast.literal_eval(call)
        ns, op, overload = name.split(".")
        got = _CALLS[call] = (getattr(getattr(getattr(torch.ops, ns), op), overload), args,
                              kwargs)
    return got


def _value(v, tensors: list):
    if isinstance(v, tuple):        # a tag: ("t", k) a tensor, else a torch constant by name
        kind, x = v
        if kind == "t":
            return tensors[x]
        return getattr(torch, x) if kind != "device" else torch.device(x)
    if isinstance(v, list):
        return [_value(a, tensors) for a in v]
    return v


def _call(call: str, tensors: list):
    op, args, kwargs = _decode(call)
    return op(*[_value(a, tensors) for a in args],
              **{k: _value(a, tensors) for k, a in kwargs.items()})


def _rng_draw_impl(state: torch.Tensor, tensors: list, call: str):
    """Note [Functional RNG in recomputation]: the op's output drawn from `state`, and the
    state after it; the global generator is left as it was."""
    before = torch.get_rng_state()
    try:
        torch.set_rng_state(state)
        out = _call(call, tensors)
        after = torch.get_rng_state()
    finally:
        torch.set_rng_state(before)
    return out, after


def _rng_draw2_impl(state: torch.Tensor, tensors: list, call: str):
    (a, b), after = _rng_draw_impl(state, tensors, call)
    return a, b, after


_LIB.impl("rng_draw", _rng_draw_impl, "CompositeExplicitAutograd")
_LIB.impl("rng_draw2", _rng_draw2_impl, "CompositeExplicitAutograd")
rng_draw = torch.ops.compiled_bw.rng_draw.default
rng_draw2 = torch.ops.compiled_bw.rng_draw2.default


@torch.library.register_fake("compiled_bw::rng_draw", lib=_LIB)
def _rng_draw_fake(state: torch.Tensor, tensors: list, call: str):
    return _call(call, tensors), torch.empty_like(state)


@torch.library.register_fake("compiled_bw::rng_draw2", lib=_LIB)
def _rng_draw2_fake(state: torch.Tensor, tensors: list, call: str):
    a, b = _call(call, tensors)
    return a, b, torch.empty_like(state)


_NO = object()


def _encode_arg(a, nodes: list, tensor=torch.fx.Node):
    """An argument as a literal (each `tensor` -- a graph node, or a run-time torch.Tensor --
    as ("t", k) into `nodes`), or _NO."""
    if isinstance(a, tensor):
        nodes.append(a)
        return ("t", len(nodes) - 1)
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else _NO
    for kind, cls in _TAGS.items():
        if isinstance(a, cls):
            return (kind, str(a) if kind == "device" else str(a).split(".")[-1])
    if isinstance(a, (list, tuple)):
        out = [_encode_arg(x, nodes, tensor) for x in a]
        return _NO if any(x is _NO for x in out) else out
    return _NO


def _call_of(op, args, kwargs: dict, tensor=torch.fx.Node):
    """(call string, its tensor arguments) of `op(*args, **kwargs)` (a generator argument
    left out), or None where an argument is not a literal or the string does not name op."""
    found: list = []
    enc_args = [_encode_arg(a, found, tensor) for a in args]
    enc_kw = {k: _encode_arg(a, found, tensor) for k, a in kwargs.items() if k != "generator"}
    if any(a is _NO for a in (*enc_args, *enc_kw.values())):
        return None
    call = repr((f"{op.namespace}.{op._opname}.{op._overloadname}", enc_args, enc_kw))
    try:
        if _decode(call)[0] is not op:
            return None
    except (ValueError, SyntaxError, AttributeError):
        return None
    return call, found


def _encode(node: torch.fx.Node):
    """(call string, tensor argument nodes) of a random op, or None where rng_draw cannot
    stand in for it."""
    t = node.target
    if len(t._schema.returns) != 1 or t._schema.is_mutable:
        return None
    if node.kwargs.get("generator") is not None:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.device.type != "cpu":
        return None
    return _call_of(t, node.args, node.kwargs)


def _chained_draw(state, op, args, kwargs: dict):
    """(output -- a pair for an op returning two tensors --, state after it) of op(*args,
    **kwargs) drawn from `state` through rng_draw; None where rng_draw cannot stand in for it
    (a mutable op, its own generator, an argument that is not a literal, not on the CPU)."""
    rets = op._schema.returns if isinstance(op, OpOverload) else ()
    if len(rets) not in (1, 2) or op._schema.is_mutable or kwargs.get("generator") is not None or \
            not all(isinstance(r.type, torch.TensorType) for r in rets):
        return None
    got = _call_of(op, args, kwargs, torch.Tensor)
    if got is None:
        return None
    call, tensors = got
    dev = kwargs.get("device")
    if any(t.device.type != "cpu" for t in tensors) or (
            dev is not None and torch.device(dev).type != "cpu"):
        return None
    if len(rets) == 1:
        return rng_draw(state, tensors, call)
    a, b, after = rng_draw2(state, tensors, call)
    return (a, b), after


def draw_with_state(state, op, args: tuple, kwargs: dict):
    """AOTAutograd's `run_with_rng_state(state, op, *args, **kwargs)` of a CPU op (a random op
    its partitioner recomputes in the backward of a checkpointed region: it sets the CPU
    generator to `state`, runs op, puts the generator back) as the same draw through
    `rng_draw` (Inductor keeps it as an extern call; graph/aot.py Note [AOT RNG replays]);
    None where rng_draw cannot stand in for it."""
    drawn = _chained_draw(state, op, args, kwargs)
    return None if drawn is None else drawn[0]


def rewrite(gm: torch.fx.GraphModule, is_random) -> bool:
    """Replace every node of `gm` for which `is_random(node)` by an rng_draw on the region's
    state chain (a new last placeholder, `rng_state`); False (gm unusable) where one cannot be
    replaced (Note [Functional RNG in recomputation])."""
    g = gm.graph
    phs = g.find_nodes(op="placeholder")
    with g.inserting_after(phs[-1]):
        state = g.placeholder("rng_state")
    for node in list(g.nodes):
        if node.op != "call_function" or not is_random(node):
            continue
        if not isinstance(node.target, OpOverload):
            return False
        enc = _encode(node)
        if enc is None:
            return False
        call, tensors = enc
        with g.inserting_before(node):
            draw = g.call_function(rng_draw, (state, tensors, call))
            out = g.call_function(operator.getitem, (draw, 0))
            state = g.call_function(operator.getitem, (draw, 1))
        out.meta["val"] = node.meta.get("val")
        node.replace_all_uses_with(out)
        g.erase_node(node)
    gm.recompile()
    return True


# Note [Functional RNG in a symbolic recomputation]
# A region's recomputation traced again with symbolic sizes (checkpoint/recompute.py Note
# [Symbolic recomputation]) runs the region's Python code inside the dynamic graph's trace,
# with no graph of its own to rewrite: so DrawsFrom, a dispatch mode around that call, makes
# each random op an rng_draw on the region's state chain as the ops arrive, in the order
# eager's recomputation draws them -- what rewrite() makes of the static trace.  An in-place
# random op on a tensor (dropout's `empty_like(x).bernoulli_(1 - p)` on CPU) becomes the
# functional op functionalization gives the static trace (FUNCTIONAL: the same kernel, the same
# numbers) drawn from the chain and copied into that tensor; any other random op that
# rng_draw cannot stand in for raises NotReplayable (the graph stays static, as before).

_aten = torch.ops.aten
FUNCTIONAL = {_aten.bernoulli_.float: _aten.bernoulli.p,
              _aten.bernoulli_.Tensor: _aten.bernoulli.Tensor,
              _aten.uniform_.default: _aten.uniform.default,
              _aten.normal_.default: _aten.normal_functional.default,
              _aten.exponential_.default: _aten.exponential.default}


def is_random(op, args, kwargs: dict) -> bool:
    """Whether an op call draws random numbers: tagged so, unless its `dropout_p` argument is
    0 (attention kernels take one; with 0 they draw nothing)."""
    if not (isinstance(op, OpOverload) and torch.Tag.nondeterministic_seeded in op.tags):
        return False
    for k, a in enumerate(op._schema.arguments):
        if a.name == "dropout_p":
            p = args[k] if k < len(args) else kwargs.get("dropout_p", a.default_value)
            return not (isinstance(p, (int, float)) and p == 0)
    return True


class NotReplayable(Exception):
    """A random op rng_draw cannot stand in for (Note [Functional RNG in a symbolic
    recomputation])."""


class DrawsFrom(TorchDispatchMode):
    """Note [Functional RNG in a symbolic recomputation]: random ops draw from `state` (a
    chain: each draw's state after it is the next one's)."""

    def __init__(self, state: torch.Tensor) -> None:
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not is_random(func, args, kwargs):
            return func(*args, **kwargs)
        target = FUNCTIONAL.get(func, func)
        if target is not func:      # its arguments in full (a default is left out of args)
            args = tuple(args[k] if k < len(args) else kwargs.get(a.name, a.default_value)
                         for k, a in enumerate(func._schema.arguments) if not a.kwarg_only)
        drawn = _chained_draw(self.state, target, args, kwargs)
        if drawn is None:
            raise NotReplayable(f"{func}: rng_draw cannot stand in for it (a mutable op, its "
                                "own generator, an argument that is not a literal, not on "
                                "the CPU)")
        out, self.state = drawn
        if target is not func:      # in place: the draw written into its tensor
            return args[0].copy_(out)
        return out
