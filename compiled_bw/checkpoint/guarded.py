"""Checkpointed regions of modules that did not opt in, traced under Dynamo's guards.

Consumes a non-reentrant checkpoint region's recompute callable (a module, its bound
__call__/forward, functools.partial(function, module, **kwargs) as Hugging Face's
gradient checkpointing builds, or a closure over modules as timm's checkpoint_seq builds) and
its arguments at walk time; produces, per step, the
Capture whose guards hold for them now (or None: the region keeps the per-node path).
checkpoint/recompute.py traces and keys what it returns.

Note [Guarded recomputation]
A module that did not declare `compiled_bw_traceable` may read anything: a config object's
attribute, a global, a plain attribute, and may have Python side effects.  Dynamo decides:
it traces `fn(*args)` once (fullgraph, static shapes; the graph never runs), and a region is
traced only when the trace is whole and recorded no effect outside the call (no mutation of
an object that existed before it, no global write, no print (a graph break), no Python
random draw; torchapi/dynamo.py region_guards; a `requires_grad` set on a tensor the region
makes is no side effect: torchapi/dynamo.py Note [requires_grad set on a tensor the region
makes]).  Its guards (module attributes, config
attributes, globals, tensor metadata, grad mode and other global state) are what the
traced recomputation depends on, so they are checked at every backward against the state
then -- eager recomputes at backward time, so that is the moment its recomputation reads.
Guards that hold select that capture (its number is in the region's key, so the backward
graph traced with it is the one reused); none holding is a new Dynamo trace (a recapture,
counted), up to _MAX_PER_KEY per function, then the region declines.  A region Dynamo
refuses is declined for good (its function's key remembers it: no new trace of that key,
Note [A refusal stops new traces only]).  What Dynamo does not guard
is checked apart: module hooks (recompute.py's hook checks, every step), tensors the forward
reads that are not parameters, buffers or arguments (a traced constant would be stale:
recompute.py declines a trace holding one).

Note [Guarded recomputation over varying sizes]
Dynamo's first trace of a function key has static shapes: its guards hold for those sizes
only.  Where none of a key's captures holds (a new sequence length, or anything else its
guards read), the next trace makes tensor sizes symbolic (dynamic=True; Python numbers stay
specialized), so its guards are ranges and relations of sizes and the capture, its number in
the region's key, serves every length those allow: the backward graph over the lengths can be
dynamic (recompute.py Note [Symbolic recomputation]).  A function Dynamo refuses with
symbolic sizes is traced static again, as before.

Note [Checkpointed closures]
timm's `checkpoint_seq` (and older Hugging Face code's `create_custom_forward(module)`)
checkpoints a closure: `forward(x)` runs `functions[start..end]`, which its cells hold.  Such a
function is traced like a partial: Dynamo judges and guards it (a closure is matched by its
code, every cell it reads is guarded: the modules, their attributes, `start`/`end`), and the
modules its cells hold (a module, or a tuple/list of them) are the region's module (_Cells):
their parameters and buffers are the graph's inputs, swapped in place by functional_call on
the very modules the closure calls.  A tensor it reads any other way (a global's module, a
tensor in a cell) is a constant of the trace, which recompute.py declines.  A closure whose
cells hold no module declines (it can only read what the trace cannot make an input).  The
key holds the code and the cells' plain values (timm's `start`/`end`), so the blocks of one
stack do not share (and exhaust) one key's captures.  torch's own
`torch.utils.checkpoint.checkpoint_sequential` makes the same closure, in a file Dynamo skips
(it refuses to trace it): Dynamo is shown the same code filed under another name.

Note [A refusal stops new traces only]
One function key serves every region that calls the same code (Hugging Face's blocks share
one partial's function): a model's regions may differ in what Dynamo sees (an instance
that branches on a tensor's value is refused, its siblings trace).  A
refusal (or _MAX_PER_KEY) stops new Dynamo traces of the key; it does not make an earlier
capture's guards wrong, so a region whose guards hold still selects its capture.  Otherwise
the verdict would depend on walk order: the first backward traces the regions walked before
the refused one, the second finds the key refused and runs them all hooked (another graph,
a recapture every model with such a block paid on its second step).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import types

import torch
import torch.utils.checkpoint

from ..torchapi.dynamo import pytree, region_guards

_MAX_PER_KEY = 8


@dataclasses.dataclass
class Capture:
    guards: object
    number: int                 # unique per capture: the region's key part


_CAPTURES: dict = {}    # function key -> [Capture]
_REFUSED: set = set()   # function keys Dynamo refused (or over _MAX_PER_KEY)
COUNTS = {"captures": 0, "guard_failures": 0, "refused": 0}
_next = [0]


class _Cells(torch.nn.Module):
    """The modules a closure's cells hold, as one module (Note [Checkpointed closures])."""

    def __init__(self, modules) -> None:
        super().__init__()
        self.cells = torch.nn.ModuleList(modules)


def _plain_cell(v) -> bool:
    return v is None or type(v) in (int, bool, str, float)


def _closure(fn):
    """callee() of a function whose closure holds modules: Note [Checkpointed closures]."""
    mods, plain = [], []
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:          # an empty cell
            continue
        if isinstance(v, torch.nn.Module):
            mods.append(v)
        elif type(v) in (tuple, list):
            mods.extend(x for x in v if isinstance(x, torch.nn.Module))
        elif _plain_cell(v):
            plain.append((type(v), v))
    if not mods:
        return None
    return _Cells(mods), (_Cells, fn.__code__, tuple(plain)), lambda m, a, kw: fn(*a, **kw)


def callee(fn):
    """(module, function key, call): the module whose parameters and buffers the region
    reads, a key for the code it runs, and `call(module_substitute, args, kwargs)` running
    it; None for any other callable (a function whose closure holds no module, a lambda)."""
    if isinstance(fn, torch.nn.Module):
        return fn, (type(fn), "__call__"), lambda m, a, kw: m(*a, **kw)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        f = getattr(fn, "__func__", None)
        if f is type(owner).__call__:
            return owner, (type(owner), "__call__"), lambda m, a, kw: m(*a, **kw)
        if f is type(owner).forward:
            return owner, (type(owner), "forward"), lambda m, a, kw: m.forward(*a, **kw)
        return None
    if type(fn) is functools.partial and fn.args and isinstance(fn.args[0], torch.nn.Module) \
            and hasattr(fn.func, "__code__"):
        module, func, rest = fn.args[0], fn.func, fn.args[1:]
        kw = fn.keywords

        def call(m, a, extra):
            return func(m, *rest, *a, **{**kw, **extra})
        return module, (type(module), func.__code__), call
    if type(fn) is types.FunctionType and fn.__closure__:
        return _closure(fn)
    return None


def partial_tensors(fn) -> dict:
    """The tensors a partial's keywords hold (they become graph inputs, never constants):
    keyword -> (pytree spec, its tensors), for a tensor or a container of tensors only
    (Hugging Face passes rotary embeddings as `position_embeddings=(cos, sin)`)."""
    if type(fn) is not functools.partial:
        return {}
    out = {}
    for k, v in fn.keywords.items():
        leaves, spec = pytree.tree_flatten(v)
        if leaves and all(isinstance(t, torch.Tensor) for t in leaves):
            out[k] = (spec, leaves)
    return out


_SEQUENTIAL = "checkpoint_sequential.<locals>.run_function.<locals>.forward"
_RETARGETED: dict = {}      # torch's code object -> the same code under our file name


def _as_dynamo_traces(fn):
    """fn, or for torch's own checkpoint_sequential segment (a closure in a file Dynamo skips:
    it would refuse it) the same function with the same code, cells and globals, filed under
    a name Dynamo traces (Note [Checkpointed closures]).  One code object per torch code, so
    Dynamo's guard on the closure's code holds from step to step."""
    if type(fn) is not types.FunctionType or fn.__qualname__ != _SEQUENTIAL or \
            fn.__code__.co_filename != torch.utils.checkpoint.__file__:
        return fn
    code = _RETARGETED.get(fn.__code__)
    if code is None:
        code = _RETARGETED[fn.__code__] = fn.__code__.replace(
            co_filename="<compiled_bw: torch checkpoint_sequential segment>")
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def lookup(fn, key, args: tuple, kwargs: dict, judging=contextlib.nullcontext) -> Capture | None:
    """The capture whose guards hold for `fn(*args, **kwargs)` now; a new Dynamo trace (inside
    `judging()`: recompute.py hides inert hooks there) if none does; None if Dynamo refuses the
    region (or it was recaptured too often)."""
    fn = _as_dynamo_traces(fn)
    caps = _CAPTURES.setdefault(key, [])
    for c in caps:      # before the refusal: Note [A refusal stops new traces only]
        if c.guards.check(fn, args, kwargs):
            return c
    if key in _REFUSED:
        return None
    if caps:
        COUNTS["guard_failures"] += 1
    if len(caps) >= _MAX_PER_KEY:
        _REFUSED.add(key)
        return None
    with judging():     # Note [Guarded recomputation over varying sizes]
        g = region_guards(fn, args, kwargs, dynamic=bool(caps))
        if g is None and caps:      # (what Dynamo refuses with symbolic sizes: static ones)
            g = region_guards(fn, args, kwargs)
    if g is None or not g.check(fn, args, kwargs):
        COUNTS["refused"] += 1
        _REFUSED.add(key)
        return None
    COUNTS["captures"] += 1
    _next[0] += 1
    c = Capture(g, _next[0])
    caps.append(c)
    return c


def reset() -> None:
    _CAPTURES.clear()
    _REFUSED.clear()
    for k in COUNTS:
        COUNTS[k] = 0
