"""Custom autograd.Function nodes: what the forward recorded, and the engine's call at backward.

Consumes a custom Function's node (a BackwardCFunction subclass); produces, at run time, the
grads the eager engine's PyNode::apply would produce for it (python_function.cpp): undefined
grads materialized as zeros of the forward output's shape (unless ctx.set_materialize_grads
(False); non-differentiable outputs per `_materialize_non_diff_grads`), the user's backward
called with this step's ctx, trailing None grads dropped, the count checked, and grads for
non-tensor forward inputs rejected, with eager's messages.

PyNode keeps `is_variable_input`, `output_info` and `materialize_grads` in C++ with no Python
getter, so `install()` wraps `torch.autograd.Function.apply` (and `set_materialize_grads`) to
record them on the node (`node.metadata`).  A node created before compiled_bw was imported
has no record: the walk falls back to eager for it, with that reason.
"""
from __future__ import annotations

import functools
import inspect
import re
import types

import torch

from ..torchapi import autograd as torch_autograd
from ..torchapi.checkpoint import closure_vars
from ..torchapi.dynamo import OpOverload, OpOverloadPacket, backward_verdict, skip_frame
from .subclass import PLAIN

FWD_KEY = "compiled_bw.fwd"
MATERIALIZE_KEY = "compiled_bw.materialize_grads"
GRAD_DTYPES_KEY = "compiled_bw.output_grad_dtypes"    # graph/saved.py Note [Declared grad dtypes]
TRACEABLE_ATTR = "compiled_bw_traceable"


class FwdInfo:
    """What PyNode knows from the forward: per forward arg, is it a tensor; per output slot,
    (shape, dtype, device) for materializing zeros, and whether the output is differentiable.
    `subclass`: a forward input or output was a tensor subclass (its grads may be too)."""
    __slots__ = ("is_var", "out_diff", "out_info", "subclass")

    def __init__(self, is_var: tuple, out_info: tuple, out_diff: tuple,
                 subclass: bool = False) -> None:
        self.is_var = is_var
        self.out_info = out_info
        self.out_diff = out_diff
        self.subclass = subclass


_orig_apply = torch_autograd.original("function_apply")
_orig_set_materialize = torch_autograd.original("set_materialize_grads")


def _bound_args(cls, args, kwargs) -> tuple:
    if torch_autograd.is_setup_context_defined(cls.setup_context):
        bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args
    return args


def _record(cls, args, kwargs, out) -> None:
    outs = out if isinstance(out, tuple) else (out,)
    node = None
    for o in outs:
        if isinstance(o, torch.Tensor) and o.grad_fn is not None and \
                isinstance(o.grad_fn, torch_autograd.BackwardCFunction) and \
                type(o.grad_fn)._forward_cls is cls:
            node = o.grad_fn
            break
    if node is None:
        return
    bound = _bound_args(cls, args, kwargs)
    is_var = tuple(isinstance(a, torch.Tensor) for a in bound)
    info = tuple((o.shape, o.dtype, o.device) if isinstance(o, torch.Tensor) else None for o in outs)
    diff = tuple(isinstance(o, torch.Tensor) and o.grad_fn is node for o in outs)
    sub = any(isinstance(t, torch.Tensor) and type(t) not in PLAIN for t in (*bound, *outs))
    node.metadata[FWD_KEY] = FwdInfo(is_var, info, diff, sub)


def apply(cls, *args, **kwargs):
    out = _orig_apply(cls, *args, **kwargs)
    if torch.is_grad_enabled():
        _record(cls, args, kwargs, out)
    return out


def set_materialize_grads(self, value: bool):
    res = _orig_set_materialize(self, value)
    md = getattr(self, "metadata", None)     # a node's ctx; other ctx objects have none
    if isinstance(md, dict):
        md[MATERIALIZE_KEY] = bool(value)
    return res


def set_output_grad_dtype(self, *dtypes):
    res = _orig_set_grad_dtypes(self, *dtypes)      # (raises as eager for a second call)
    md = getattr(self, "metadata", None)
    if isinstance(md, dict):
        md[GRAD_DTYPES_KEY] = dtypes
    return res


if torch_autograd.DECLARED_GRAD_DTYPES:
    _orig_set_grad_dtypes = torch_autograd.original("set_output_grad_dtype")


def install() -> None:
    apply.__doc__ = _orig_apply.__doc__
    for fn in (apply, set_materialize_grads, set_output_grad_dtype):   # Note [Dynamo skips our wrappers]
        skip_frame(fn)
    torch_autograd.patch("function_apply", apply, wrap=classmethod)
    torch_autograd.patch("set_materialize_grads", set_materialize_grads)
    if torch_autograd.DECLARED_GRAD_DTYPES:
        set_output_grad_dtype.__doc__ = _orig_set_grad_dtypes.__doc__
        torch_autograd.patch("set_output_grad_dtype", set_output_grad_dtype)


def is_custom_node(cls) -> bool:
    return issubclass(cls, torch_autograd.BackwardCFunction)


# torch's own Functions whose backward is traceable: BackwardHookFunction (module full backward
# hooks wrap a module's inputs and outputs in it) returns its grads unchanged.  Opaque, each
# would cost a custom-op call and a copy of every grad (opaque outputs must be fresh tensors);
# traced it is nothing.  The module hooks themselves stay opaque calls (node hooks).
KNOWN_TRACEABLE = (torch_autograd.BackwardHookFunction,)


# Note [Traced without opt-in]
# A Function's backward is traced into the graph (instead of an opaque call) when it opted in
# (`compiled_bw_traceable = True`), when it is one of KNOWN_TRACEABLE, when it is a
# torch.library custom op's Function (`register_autograd`: torch requires that backward and
# its setup_context to be traceable -- PyTorch ops and custom ops, no data_ptr, no global
# state read or written), or, for any other Function that did not say
# (`compiled_bw_traceable` unset), when Dynamo finds its backward safe (AUTO_DYNAMO).
# "Safe": at capture, Dynamo traces `backward(ctx, *grads)` whole (fullgraph, the graph never
# runs) with a stand-in ctx holding only its saved tensors, needs_input_grad and its plain
# attributes (anything else read from ctx fails the trace), and that trace
#   - has no graph break (print, .item(), .tolist(), numpy, torch.autograd.grad, a call Dynamo
#     cannot trace),
#   - mutates nothing that existed before the call (ctx, globals, lists, objects), registers
#     no tensor hook and draws no random number, Python's (torchapi/dynamo.py _clean) or
#     torch's (Note [A traced backward draws no torch random number]),
#   - installs guards only on what the cache key follows (`_covered`): the ctx and grads, the
#     backward itself and its closure cells, and the backward's module globals by name (the
#     key holds their values: Note [What a traced function may read]); attributes of torch's
#     modules and builtins are taken as constants.  A guard on anything else (a module flag
#     `mylib.DEBUG`, `cfg.scale` on a global object) refuses: the key would not see it change.
# A refusal keeps the node an opaque call (the real backward, every step), never a fallback;
# so does an exception from our own trace of it (the opaque call then raises eager's error).
# The verdict is cached per (backward, ctx key, saved tensors' and grads' metadata): a cache
# hit never runs Dynamo; a recapture with other values asks again.  What the trace bakes in from
# the ctx is in the cache key (`ctx_state`); a ctx attribute that is not a plain value (numbers,
# strings, None, dtypes, devices, sizes, and tuples/lists of them), whose contents the key could
# not see change, makes that node an opaque call instead (`safe_ctx_state` is None).
# `compiled_bw_traceable = False` on a Function class keeps it opaque whatever the rule.
AUTO_OP, AUTO_DYNAMO = "custom op", "dynamo"


def is_traceable(cls) -> bool:
    fwd = cls._forward_cls
    opt = getattr(fwd, TRACEABLE_ATTR, None)
    if opt is not None:
        return bool(opt)
    return True     # KNOWN_TRACEABLE, a custom op's Function, or AUTO_DYNAMO


def auto_traced(cls) -> str | None:
    """How a Function is traced without opt-in (Note [Traced without opt-in]): AUTO_OP (a
    custom op's), AUTO_DYNAMO (if Dynamo finds it safe), or None (opted in, or
    KNOWN_TRACEABLE).  Then a ctx that is not plain values makes the node opaque, not a
    fallback.  Answered once per node class, as nodes.node_kind classifies it once (the walk
    asks per node, every step)."""
    got = _AUTO_TRACED.get(cls, False)
    if got is False:
        fwd = cls._forward_cls
        if getattr(fwd, TRACEABLE_ATTR, None) is not None or fwd in KNOWN_TRACEABLE:
            got = None
        elif torch_autograd.is_custom_op_function(fwd):
            got = AUTO_OP
        else:
            got = AUTO_DYNAMO
        _AUTO_TRACED[cls] = got
    return got


_AUTO_TRACED: dict = {}     # node class -> auto_traced (kept alive as nodes._KINDS keeps it)


_SCALARS = (int, bool, str, type(None), torch.dtype, torch.device, torch.layout,
            torch.memory_format)
NOT_PLAIN = object()


def plain_key(v):
    """A key for a plain value (its type included: True and 1, -0.0 and 0.0 differ), or
    NOT_PLAIN."""
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    if t is float:
        return (t, repr(v))
    if t is tuple or t is list or t is torch.Size:
        items = tuple(plain_key(x) for x in v)
        return NOT_PLAIN if any(x is NOT_PLAIN for x in items) else (t, items)
    return NOT_PLAIN


# Note [What a traced function may read]
# A trace bakes in every Python value a traced function (a traceable unpack hook besides the
# packed object, an opted-in custom backward besides its ctx) reads: its closure
# cells, default arguments, and the module globals it names (a `SCALE` the user reassigns
# between steps, a dict entry in a closure).  So the key holds, besides the function object,
# the values those hold now: plain values as plain_key keys them, modules, builtins, classes,
# torch ops and GraphModules by identity, Python functions (and functools.partials) the same
# way two levels deep.  Any other value (a user object, a dict, a tensor) could change unseen:
# then the node runs as one opaque call of the real node, which calls the function every step.
_BY_IDENTITY = (types.ModuleType, types.BuiltinFunctionType, types.BuiltinMethodType, type,
                OpOverload, OpOverloadPacket, torch.fx.GraphModule)


def function_key(fn, depth: int = 2):
    """Note [What a traced function may read]: a key for what calling `fn` computes, or
    NOT_PLAIN."""
    if isinstance(fn, _BY_IDENTITY):
        return (object, fn)
    if isinstance(fn, functools.partial):
        parts = (function_key(fn.func, depth), plain_key(fn.args),
                 plain_key(tuple(sorted(fn.keywords.items()))))
        return NOT_PLAIN if any(p is NOT_PLAIN for p in parts) else (functools.partial, parts)
    if not isinstance(fn, types.FunctionType) or depth < 0:
        return NOT_PLAIN
    parts = [fn, fn.__code__]      # code too: it can be replaced (`fn.__code__ = ...`)
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:          # an empty cell (a name assigned after the function)
            parts.append(NOT_PLAIN)
            break
        parts.append(value_key(v, depth))
    parts.append(plain_key(fn.__defaults__))
    if fn.__kwdefaults__:
        parts.append(plain_key(tuple(sorted(fn.__kwdefaults__.items()))))
    g = fn.__globals__
    for name in _global_names(fn.__code__):
        if name in g:
            parts.append((name, value_key(g[name], depth)))
    return NOT_PLAIN if any(p is NOT_PLAIN for p in parts) else tuple(parts)


# Note [Constant function keys]
# The walk keys every traced custom node on its backward (ctx_state), every step.  A function
# that reads no closure and no default values has the same key as long as its code is the same
# object and each global name it may read (`_global_names`) holds the same object as when the
# key was made, provided each of those is a value whose key is its identity or its immutable
# value (a module, a class, a builtin, a torch op, an int / float / str / dtype ...: `_KEPT`):
# torch's BackwardHookFunction.backward (`return args`, in every module full backward hook)
# reads none, a typical backward reads `torch`.  That key is kept with the objects it was made
# from and checked against them on each use, by identity (~1-3 us a node saved); a global
# reassigned (`SCALE = 3.0`), a name defined or deleted, or any other value (a list, a
# function, whose key follows its own globals) makes function_key run.
_CONSTANT_KEYS: dict = {}   # function -> (its __code__, its key, global names, their values)
_KEPT = _BY_IDENTITY + (int, bool, str, float, type(None), torch.dtype, torch.device,
                        torch.layout, torch.memory_format)
_ABSENT = object()


def backward_key(fn):
    """function_key(fn), from _CONSTANT_KEYS where Note [Constant function keys] allows."""
    plain_fn = type(fn) is types.FunctionType
    if plain_fn:
        got = _CONSTANT_KEYS.get(fn)
        if got is not None and got[0] is fn.__code__ and fn.__defaults__ is None \
                and fn.__kwdefaults__ is None:
            g = fn.__globals__
            for name, v in zip(got[2], got[3], strict=True):
                if g.get(name, _ABSENT) is not v:
                    break
            else:
                return got[1]
    key = function_key(fn)
    if (plain_fn and fn.__closure__ is None and fn.__defaults__ is None
            and fn.__kwdefaults__ is None and key is not NOT_PLAIN):
        names = _global_names(fn.__code__)
        g = fn.__globals__
        values = tuple(g.get(name, _ABSENT) for name in names)
        if all(v is _ABSENT or type(v) in _KEPT or isinstance(v, _BY_IDENTITY) for v in values):
            _CONSTANT_KEYS[fn] = (fn.__code__, key, names, values)
    return key


def constant_key_record(fn):
    """(fn, its code, its globals, ((name, present, value), ...)) when backward_key(fn) would
    answer from _CONSTANT_KEYS now (Note [Constant function keys]), else None: what the C++
    walk checks instead (walk/fastwalk.py Note [Custom node memo])."""
    if type(fn) is not types.FunctionType:
        return None
    got = _CONSTANT_KEYS.get(fn)
    if got is None or got[0] is not fn.__code__ or fn.__defaults__ is not None \
            or fn.__kwdefaults__ is not None:
        return None
    g = fn.__globals__
    values = []
    for name, v in zip(got[2], got[3], strict=True):
        now = g.get(name, _ABSENT)
        if now is not v:
            return None
        values.append((name, v is not _ABSENT, None if v is _ABSENT else v))
    return fn, fn.__code__, g, tuple(values)


def value_key(v, depth: int = 2):
    k = plain_key(v)
    if k is not NOT_PLAIN:
        return k
    return function_key(v, depth - 1)


def _global_names(code) -> tuple:
    """The names a code object (and the functions defined in it) may look up as globals."""
    names = _NAMES.get(code)
    if names is None:
        found = list(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                found.extend(_global_names(c))
        names = _NAMES[code] = tuple(dict.fromkeys(found))
    return names


_NAMES: dict = {}       # code object -> the names it may look up (code objects are immutable)


# Note [Grad buffers of a custom backward]
# torch 2.15's ctx.input_grad_buffers gives a custom backward, per forward input, the engine's
# InputBuffer holding what earlier producers already contributed (or None), so it can add its
# grad there and return None.  Which entries are there follows eager's execution order and
# buffer state, which only the engine has: a compiled graph has no such buffers, and torch
# raises when the property is read outside the engine's call.  A backward that reads it (the
# attribute named in its code, in functions defined in it, or in global functions or closures
# it names, two calls deep) makes its backward run eager autograd, with the node named (walk.py
# `_custom_entry`); one that reads it deeper raises torch's error under compiled_bw.
def reads_grad_buffers(fn, depth: int = 2) -> bool:
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    names = _global_names(code)
    if "input_grad_buffers" in names or "_input_grad_buffers" in names:
        return True
    if depth <= 0:
        return False
    g = getattr(fn, "__globals__", {})
    return any(type(f) is types.FunctionType and f is not fn and reads_grad_buffers(f, depth - 1)
               for f in [g.get(n) for n in names] + list(closure_vars(fn).values()))


def safe_ctx_state(node, how: str = AUTO_OP) -> tuple | None:
    """ctx_state for an auto-traced Function: its ctx attributes as plain-value keys, with the
    materialize flag (and for AUTO_DYNAMO what its backward reads: backward_key); None when one
    is not a plain value (the node then runs opaque)."""
    items = []
    for k, v in sorted(vars(node).items()):
        key = plain_key(v)
        if key is NOT_PLAIN:
            return None
        items.append((k, key))
    items.append(("materialize", node.metadata.get(MATERIALIZE_KEY, True)))
    if how == AUTO_DYNAMO:
        backward = backward_key(type(node)._forward_cls.backward)
        if backward is NOT_PLAIN:
            return None
        items.append(("backward", backward))
    return tuple(items)


_TRUSTED_MODULES = ("torch", "math", "operator", "functools", "builtins")
_GLOBAL_GUARD = re.compile(r"^G\['([^']+)'\](.*)$")
_CLOSURE_GUARD = re.compile(r"^L\['fn'\](\.__closure__\[\d+\]\.cell_contents)?$")
_ATTR = re.compile(r"^\.(\w+)(.*)$")


def _trusted(module) -> bool:
    name = module if isinstance(module, str) else getattr(module, "__name__", "")
    return isinstance(name, str) and name.split(".")[0] in _TRUSTED_MODULES


def _reachable_names(fn, depth: int = 2) -> set:
    """The module globals `fn` and the same-module functions it names (closures included),
    `depth` levels deep, may read: those function_key keys."""
    names = set(_global_names(fn.__code__))
    if depth > 0:
        g = fn.__globals__
        inner = [g.get(n) for n in names] + [c.cell_contents for c in fn.__closure__ or ()
                                              if _filled(c)]
        for f in inner:
            if isinstance(f, types.FunctionType) and f.__globals__ is g:
                names |= _reachable_names(f, depth - 1)
    return names


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _covered(fn):
    """Note [Traced without opt-in]: whether the cache key follows what a Dynamo guard (by its
    source name) on `fn(ctx, *grads)` checks."""
    g = fn.__globals__
    own = "__import_" + str(g.get("__name__", "")).replace(".", "_dot_")
    names = _reachable_names(fn)

    def covered(name: str) -> bool:
        if not name or name.startswith(("L['args']", "L['sentinel']")) or \
                _CLOSURE_GUARD.match(name):
            return True
        m = _GLOBAL_GUARD.match(name)
        if m is None:
            return False
        root, rest = m.groups()
        if root.startswith("__builtins_dict"):
            return True
        if root != own:
            return root.startswith("__import_") and _trusted(
                root[len("__import_"):].replace("_dot_", "."))
        a = _ATTR.match(rest)
        if a is None:
            return rest == ""
        gname, tail = a.groups()
        if gname not in names or gname not in g:
            return False
        v = g[gname]
        if tail == "":
            return value_key(v) is not NOT_PLAIN
        return isinstance(v, types.ModuleType) and _trusted(v)
    return covered


class _StandInCtx:
    """What a Function's backward may read from its ctx while Dynamo judges it: the saved
    tensors, needs_input_grad and the ctx's own (plain) attributes."""


def _meta(t):
    if t is None:
        return None
    return (t.shape, t.stride(), t.dtype, t.device, t.requires_grad)


_VERDICTS: dict = {}    # (node class, ctx key, saved and grad metadata) -> verdict
_CLASS_VERDICT: dict = {}   # node class -> None (judged safe once) | why Dynamo refused it
_STATES: dict = {}          # node class -> the ctx keys it was judged with
_MAX_STATES = 4


_ON_CHANGE: list = []    # called when a class verdict changes (walk/fastwalk.py's memos)


def on_verdict_change(fn) -> None:
    """Call fn() whenever what the walk's entry of a custom node reads from this module's
    caches may change (a class verdict, reset()): walk/fastwalk.py Note [Custom node memo]."""
    _ON_CHANGE.append(fn)


def _changed() -> None:
    for fn in _ON_CHANGE:
        fn()


def reset() -> None:
    """Forget every verdict and kept function key (compiled_bw.reset())."""
    for d in (_VERDICTS, _CLASS_VERDICT, _STATES, _CONSTANT_KEYS):
        d.clear()
    for k in COUNTS:
        COUNTS[k] = 0
    _changed()


def class_refusal(node, saved: tuple, meta) -> str | None:
    """Why an AUTO_DYNAMO node's class runs opaque for good (Note [Refused for good]), or None.
    A class first seen is judged here, at the walk, with this node's values; the walk then
    asks a dict per node."""
    got = _CLASS_VERDICT.get(type(node), False)
    if got is False:
        metas = tuple(m[:3] if isinstance(m, tuple) else (tuple(m.shape), m.dtype, m.device)
                      for m in meta)
        got = dynamo_verdict(node, saved, metas)
        _CLASS_VERDICT.setdefault(type(node), got)
        _changed()
    return got


# Note [Refused for good]
# A class whose backward Dynamo refused once (with any values) runs as an opaque call from then
# on, without its ctx values in the cache key: else each new ctx value (a step counter, a
# per-call scale) of a class that never gets traced would be a recapture.  So does a class
# judged with more than _MAX_STATES different ctx keys (a seed or step number in its ctx):
# traced, each new value is a recapture; opaque, none is.  Refusing for good
# is always exact (an opaque call is eager's PyNode call); it only forgoes a class whose
# backward takes a safe branch for other values.  The first verdict of a class is asked at the
# walk (a class first seen is a capture anyway), later ones at capture (trace.py).
COUNTS = {"dynamo_verdicts": 0, "cached_verdicts": 0, "stored_verdicts": 0}


def dynamo_verdict(node, saved: tuple, grad_meta: tuple) -> str | None:
    """Note [Traced without opt-in]: None if Dynamo finds the backward of AUTO_DYNAMO node
    `node` safe with these saved tensors and grads ((shape, dtype, device) per slot), else
    why not.  Cached: a second node (or capture) with the same key asks no Dynamo."""
    state = safe_ctx_state(node, AUTO_DYNAMO)
    if state is None:
        return "its ctx or what its backward reads holds a value the cache key cannot follow"
    key = (type(node), state, tuple(_meta(t) for t in saved), grad_meta,
           tuple(node.needs_input_grad))
    got = _VERDICTS.get(key, False)
    if got is not False:
        COUNTS["cached_verdicts"] += 1
        return got
    states = _STATES.setdefault(type(node), set())
    states.add(state)
    if len(states) > _MAX_STATES:       # Note [Refused for good]
        got = _CLASS_VERDICT[type(node)] = (
            f"its ctx values changed {len(states)} times (each a recapture while traced)")
        _changed()
        return got
    stored = STORED_VERDICTS[0]
    if stored is not None:              # Note [Stored verdicts]
        got = stored.get(key)
        if got is not False:
            COUNTS["stored_verdicts"] += 1
            return _remember(key, got)
    COUNTS["dynamo_verdicts"] += 1
    ctx = _StandInCtx()
    vars(ctx).update(vars(node))
    ctx.saved_tensors = saved
    ctx.needs_input_grad = tuple(node.needs_input_grad)
    out_info = fwd_info(node).out_info      # a non-tensor output's grad is always None
    grads = tuple(None if o is None else torch.empty(m[0], dtype=m[1], device=m[2])
                  for m, o in zip(grad_meta, out_info, strict=True))
    fn = type(node)._forward_cls.backward
    try:
        got = backward_verdict(fn, (ctx, *grads), _covered(fn))
    except Exception as e:  # noqa: BLE001 -- our own failure: the node stays opaque
        got = f"judging it failed: {type(e).__name__}: {e}"
    else:
        if stored is not None:
            stored.put(key, got)
    return _remember(key, got)


def _remember(key, got):
    _VERDICTS[key] = got
    if got is not None:
        _CLASS_VERDICT[key[0]] = got
        _changed()
    return got


# Note [Stored verdicts]
# Dynamo's verdict on a backward costs a process its first ~2 s (importing Dynamo, tracing the
# backward): with warm start on, a stored graph holding a traced custom Function would wait for
# it at every process start, since the walk asks before the key is known.  The verdict is a
# function of its key here -- the backward's code and what it reads (function keys), the ctx
# state, the saved tensors' and grads' metadata -- and of the torch release and compiled_bw's
# sources, so runtime/warm.py keeps verdicts on disk beside the graphs, keyed as it keys graphs
# (Note [Keys that name user code]), and STORED_VERDICTS[0] answers from them: `get(key)` a
# verdict or False (none stored, or a key that does not pickle), `put(key, verdict)`.  Both
# "traced" (None) and a refusal (its reason) are stored; a verdict that raised in our own code
# is not.  (Until 2026-11-28 only "traced" was: a refused class runs as opaque calls, and the
# reference count that decides whether a leaf may steal a grad such a call passed through read
# one lower in a process where Dynamo never ran; calls/opaque.py Note [Counting references
# inline] fixed that.)
STORED_VERDICTS: list = [None]


def fwd_info(node) -> FwdInfo | None:
    return node.metadata.get(FWD_KEY)


def ctx_state(node) -> tuple | None:
    """What the trace of a Function that opted in bakes in: its ctx attributes (plain values,
    and functions, modules and ops as value_key keys them) and what its backward reads (Note
    [What a traced function may read]); None when any of it is something else, whose contents
    the key could not see change (the node then runs opaque).  A tensor ctx attribute raises
    TypeError (the walk says why it falls back)."""
    items = []
    for k, v in sorted(vars(node).items()):
        if isinstance(v, torch.Tensor):
            raise TypeError(f"{type(node).__name__}: ctx.{k} is a tensor; a traceable Function "
                            "must pass tensors through ctx.save_for_backward")
        key = value_key(v)         # typed: True and 1, -0.0 and 0.0 are different keys
        if key is NOT_PLAIN:
            return None
        items.append((k, key))
    backward = backward_key(type(node)._forward_cls.backward)
    if backward is NOT_PLAIN:
        return None
    items.append(("backward", backward))
    return tuple(items)


def materializes(node, info: FwdInfo) -> tuple:
    """Per grad slot: does PyNode::to_py_args turn an undefined grad there into zeros?"""
    if not node.metadata.get(MATERIALIZE_KEY, True):
        return (False,) * len(info.out_info)
    non_diff_zeros = node._materialize_non_diff_grads
    return tuple(o is not None and (d or non_diff_zeros)
                 for o, d in zip(info.out_info, info.out_diff, strict=True))


def materialize(node, info: FwdInfo, grads: list, shapes=None) -> list:
    """PyNode::to_py_args: undefined grads -> zeros of the forward output (unless disabled).
    shapes: per slot, the output's shape as the walk sees it (a dynamic walk's symbolic
    sizes: zeros of this step's size, not of the forward the node was recorded from)."""
    for g in grads:
        if g is None:
            break
    else:
        return list(grads)      # nothing to materialize (the common case: no per-slot work)
    if not node.metadata.get(MATERIALIZE_KEY, True):
        return list(grads)
    res = []
    ms = materializes(node, info)
    for i, g in enumerate(grads):
        if g is None and ms[i]:
            shape, dtype, device = info.out_info[i]
            if shapes is not None and shapes[i] is not None:
                shape = shapes[i]
            g = torch.zeros(shape, dtype=dtype, device=device)
        res.append(g)
    return res


def call_backward(node, grads: list, shapes=None) -> list:
    """PyNode::apply minus the engine: returns one grad (or None) per tensor forward input.
    shapes: as materialize's."""
    info = fwd_info(node)
    return finish(node, info, node.apply(*materialize(node, info, grads, shapes)))


# Note [A traced backward that writes its ctx]
# A traced Function's backward runs once, at capture, on fake tensors; later steps run only its
# ops.  An attribute it sets or deletes on its ctx (`ctx.seen = ...`, a counter) is a Python
# side effect the graph would not repeat: eager sets it every step, with real values, and user
# code may read it (`y.grad_fn.seen`).  Tracing can see that one, so such a node becomes an
# opaque call (the real backward runs every step) and the ctx is put back as it was before the
# trace, so no fake value is left on it.  Other side effects (globals, logs) cannot be seen:
# for those the opt-in is the user's statement that there are none.


def call_traced_backward(node, grads: list, shapes=None) -> list | None:
    """call_backward while tracing a traced Function; None (and the ctx restored) when the
    backward wrote a ctx attribute (Note [A traced backward that writes its ctx]).
    shapes: as materialize's."""
    ctx = vars(node)
    before = dict(ctx)
    try:
        outs = call_backward(node, grads, shapes)
    finally:
        written = ctx.keys() != before.keys() or any(ctx[k] is not v for k, v in before.items())
        if written:
            ctx.clear()
            ctx.update(before)
    return None if written else outs


def finish(node, info: FwdInfo, r) -> list:
    """PyNode::apply's checks on what a backward returned (python_function.cpp)."""
    if type(r) is torch.Tensor and info.is_var == (True,):
        return [r]              # one tensor for one tensor input: nothing to check
    name = type(node).__name__
    if not isinstance(r, tuple):
        r = (r,)
    n = len(info.is_var)
    if len(r) > n and all(x is None for x in r[n:]):
        r = r[:n]
    if len(r) != n:
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {n}, got {len(r)})")
    outs = []
    for i, (x, is_var) in enumerate(zip(r, info.is_var, strict=True)):
        if not is_var:
            if x is not None:
                raise RuntimeError(f"function {name} returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was "
                                   "not a Variable")
            continue
        if x is not None and not isinstance(x, torch.Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(x).__name__})")
        outs.append(x)
    return outs
