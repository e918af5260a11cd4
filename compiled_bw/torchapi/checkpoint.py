"""torch.utils.checkpoint's private internals (non-reentrant checkpoint), all compiled_bw reads.

Consumes torch.utils.checkpoint; produces: whether a saved tensor's unpack hook is
non-reentrant checkpoint's (and then its _CheckpointFrame), the state a frame's recompute_fn
closes over (fn, kwargs, RNG/autocast/context settings), the frame's bookkeeping that its
unpack hook reads (used by checkpoint/recompute.py to serve traced recomputed tensors during a
trace), the graph-execution-group switch, and selective checkpointing's storage (the forward's
per-op verdicts and saved outputs) with a dispatch mode that replays its lookup in a trace.
tests/test_private_api.py resolves `USED`.
"""
from __future__ import annotations

import contextlib
import types
from collections import defaultdict

import torch
import torch.utils.checkpoint as _cp
from torch.utils._python_dispatch import TorchDispatchMode

C = torch._C

Holder = _cp._Holder
CheckpointFrame = _cp._CheckpointFrame
default_meta_extractor = _cp._default_meta_extractor
get_graph_exec_group = C._get_graph_exec_group
set_graph_exec_group = C._set_graph_exec_group
noop_context_fn = _cp.noop_context_fn
CachedMode = _cp._CachedTorchDispatchMode
SAC_IGNORED_OPS = _cp.SAC_IGNORED_OPS
# Note [SAC storage format]: torch 2.13 marks each storage entry RECOMPUTE, CONSUMED or saved
# outputs, and its recompute-time lookup reads only the storage.  A torch without those markers
# (2.11, on the GPU images) keeps another format: a list of saved outputs per op, popped by a
# lookup that calls the user's policy again during the backward, which a trace cannot stand in
# for.  There the feature "traced selective checkpointing" is off (SAC_OFF names the release
# and the missing markers): sac_storage answers None and SAC regions run as the real unpack,
# one call each (correct, not traced).  The markers are OPTIONAL symbols: test_private_api
# checks that each is present or that its feature says it is off.
RECOMPUTE = getattr(_cp, "_RECOMPUTE", None)
CONSUMED = getattr(_cp, "_CONSUMED", None)
SAC_FEATURE = "traced selective checkpointing"
_SAC_MISSING = [n for n, v in (("_RECOMPUTE", RECOMPUTE), ("_CONSUMED", CONSUMED)) if v is None]
SAC_OFF = (f"{SAC_FEATURE} is off on torch {torch.__version__}: its torch.utils.checkpoint has no "
           f"{' / '.join(_SAC_MISSING)} storage markers (Note [SAC storage format]); selective "
           "checkpointing regions run as their real unpack" if _SAC_MISSING else None)
# Symbols whose absence turns a named feature off (FEATURES_OFF says why) instead of breaking
# compiled_bw: symbol -> feature.  Every other entry of USED is required.
OPTIONAL = {"torch.utils.checkpoint._RECOMPUTE": SAC_FEATURE,
            "torch.utils.checkpoint._CONSUMED": SAC_FEATURE}
FEATURES_OFF = {SAC_FEATURE: SAC_OFF} if SAC_OFF else {}
VersionWrapper = _cp._VersionWrapper

_MODULE_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks",
                       "_global_backward_hooks", "_global_backward_pre_hooks",
                       "_global_forward_hooks_with_kwargs", "_global_forward_hooks_always_called")

USED = {
    "torch.utils.checkpoint._Holder": "checkpoint/recompute.py (a checkpointed saved tensor)",
    "torch.utils.checkpoint._CheckpointFrame": "checkpoint/recompute.py",
    "torch.utils.checkpoint._checkpoint_hook": "checkpoint/recompute.py (its unpack hook's code)",
    "torch.utils.checkpoint._default_meta_extractor": "checkpoint/recompute.py (determinism check)",
    "torch._C._get_graph_exec_group": "checkpoint/recompute.py (the trace's unpack group)",
    "torch._C._set_graph_exec_group": "checkpoint/recompute.py (the trace's unpack group)",
    "torch.utils.checkpoint._CachedTorchDispatchMode": "checkpoint/recompute.py (a SAC region's "
        "recompute context: its storage and allow_cache_entry_mutation)",
    "torch.utils.checkpoint.SAC_IGNORED_OPS": "SacReplay (ops SAC neither counts nor caches)",
    "torch.utils.checkpoint._RECOMPUTE": "checkpoint/recompute.py (a SAC storage verdict)",
    "torch.utils.checkpoint._CONSUMED": "checkpoint/recompute.py (a SAC entry already used)",
    "torch.utils.checkpoint._VersionWrapper": "checkpoint/recompute.py (a SAC saved output)",
    "torch.utils._python_dispatch.TorchDispatchMode": "SacReplay",
    **{f"torch.nn.modules.module.{n}": "checkpoint/recompute.py (global module hooks)"
       for n in _MODULE_GLOBAL_HOOKS},
}


def _unpack_code():
    frame = types.SimpleNamespace(unpack_error_cb=None)
    return _cp._checkpoint_hook(frame).unpack_hook.__code__


UNPACK_CODE = _unpack_code()
_FRAME_CELL = UNPACK_CODE.co_freevars.index("frame")


def checkpoint_frame(hook):
    """The _CheckpointFrame of non-reentrant checkpoint's unpack hook (without debug's error
    callback), or None for any other hook (every walk asks, per hooked saved tensor)."""
    if getattr(hook, "__code__", None) is not UNPACK_CODE:
        return None
    return hook.__closure__[_FRAME_CELL].cell_contents


def closure_vars(fn) -> dict:
    """The free variables a function closes over, by name (empty if it has none)."""
    cells = getattr(fn, "__closure__", None) or ()
    return {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, cells, strict=True)
            if _filled(c)}


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 -- an empty cell raises
    except ValueError:
        return False
    return True


# the recompute_fn closure of _checkpoint_without_reentrant_generator: what we read (cells
# only filled on some paths, e.g. had_device_in_fwd with preserve_rng_state, are left out)
RECOMPUTE_VARS = ("fn", "kwargs", "preserve_rng_state",
                  "device_autocast_kwargs", "cpu_autocast_kwargs", "recompute_context",
                  "device_ctx")
# variables a release's recompute_fn may not have, with the value that means what such a
# release does: torch 2.11's has no non-strict-tracing branch at all (with the variable
# required, every checkpointed region was declined there, unnamed)
# (nor 2.13 an FX-tracing flag: 2.15 closes over is_fx_tracing and re-enters it).  A region
# whose forward ran while either was set is declined (checkpoint/recompute.py `_frame_ok`).
RECOMPUTE_DEFAULTS = {"is_non_strict_tracing": False, "is_fx_tracing": False}
# where recompute_fn is defined: torch 2.15 moved the body of
# _checkpoint_without_reentrant_generator into an _impl it calls (the old name is a shim)
RECOMPUTE_GENERATORS = ("_checkpoint_without_reentrant_generator_impl",
                        "_checkpoint_without_reentrant_generator")


def _recompute_freevars() -> frozenset | None:
    """The closure variables of this release's recompute_fn, read from its code (no frame)."""
    for name in RECOMPUTE_GENERATORS:
        gen = getattr(_cp, name, None)
        for c in getattr(getattr(gen, "__code__", None), "co_consts", ()):
            if isinstance(c, types.CodeType) and c.co_name == "recompute_fn":
                return frozenset(c.co_freevars)
    return None


# Traced checkpoint recomputation reads recompute_fn's closure: torch 2.11's passes the
# region's kwargs as its first input instead of closing over them (and saves them with the
# arguments), which our tracing of the saved arguments does not read.  There the feature is
# off by name (its regions run as the real unpack, correct, one opaque call per node).
RECOMPUTE_FEATURE = "traced checkpoint recomputation"
_FV = _recompute_freevars()
_RC_MISSING = ["recompute_fn"] if _FV is None else [n for n in RECOMPUTE_VARS if n not in _FV]
RECOMPUTE_OFF = (f"{RECOMPUTE_FEATURE} is off on torch {torch.__version__}: its checkpoint's "
                 f"recompute_fn does not close over {', '.join(_RC_MISSING)}; checkpointed "
                 "regions run as their real unpack" if _RC_MISSING else None)
if RECOMPUTE_OFF:
    FEATURES_OFF[RECOMPUTE_FEATURE] = RECOMPUTE_OFF


# the recompute_fn variables its RNG replay reads (filled when preserve_rng_state is True)
RNG_VARS = ("device_type", "fwd_cpu_state", "had_device_in_fwd")


def forward_rng_state(cv: dict):
    """The CPU generator state checkpoint saved in the forward and restores before recomputing
    (closure variables `cv` of recompute_fn), when that is all it restores: preserve_rng_state,
    a CPU region, no accelerator generator saved.  Else None."""
    if cv.get("preserve_rng_state") is not True or cv.get("device_type") != "cpu":
        return None
    if cv.get("had_device_in_fwd") and cv.get("fwd_devices"):
        return None
    s = cv.get("fwd_cpu_state")
    return s if type(s) is torch.Tensor else None


def global_module_hooks() -> bool:
    """Whether any global nn.Module hook is registered (register_module_forward_hook & co.)."""
    m = torch.nn.modules.module
    return any(getattr(m, n) for n in _MODULE_GLOBAL_HOOKS)


def is_noop_context(ctx) -> bool:
    return type(ctx) is contextlib.nullcontext


def is_sac_context(ctx) -> bool:
    """Selective checkpointing's recompute context (torch's own, not a subclass)."""
    return type(ctx) is CachedMode


def hooked_entry(wrapper) -> bool:
    """A selective-checkpoint saved output that went through the user's saved-tensors pack hook
    (torch 2.15+, checkpoint(respect_saved_tensors_hooks=True)): its `val` is what the pack
    hook returned, and eager's lookup calls the unpack hook on it.  Such an entry is not the
    tensor the op returned, so the trace declines the region (Note [SAC storage format])."""
    return getattr(wrapper, "unpack_hook", None) is not None


def sac_storage(ctx):
    """(storage, allow_cache_entry_mutation) of selective checkpointing's recompute context
    (torch's own _CachedTorchDispatchMode, not a subclass), else None.  The storage maps each
    op to {call index: RECOMPUTE | CONSUMED | pytree of VersionWrapper}, filled by the
    forward's caching mode (which alone calls the policy)."""
    if not is_sac_context(ctx) or SAC_OFF is not None:
        return None                     # Note [SAC storage format]
    return ctx.storage, ctx.allow_cache_entry_mutation


class SacMismatch(Exception):
    """The trace called an op that the forward's storage has no entry for."""


class SacReplay(TorchDispatchMode):
    """_CachedTorchDispatchMode's lookup, in a trace: ops in SAC_IGNORED_OPS pass, any other
    op takes the next call index of its own counter; `answer(op, index)` gives None (run
    it: recomputed) or the outputs to return instead (saved in the forward).  `consumed`
    lists the (op, index) pairs answered, in order: the entries eager's lookup consumes."""

    def __init__(self, answer) -> None:
        super().__init__()
        self.answer = answer
        self.counter: dict = defaultdict(int)
        self.consumed: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        idx = self.counter[func]
        self.counter[func] += 1
        out = self.answer(func, idx)
        if out is None:
            return func(*args, **kwargs)
        self.consumed.append((func, idx))
        return out
