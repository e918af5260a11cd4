"""Every private autograd-node attribute compiled_bw reads, in one place (torch 2.13; private
modules and functions of torch are in torchapi/).

Consumes autograd nodes; produces their saved tensors' SavedTensor handles (`_raw_saved_X`),
their `_input_metadata`, their `_sequence_nr()`, and installs our pack/unpack hooks on saved
tensors (Slot).  tests/test_private_api.py checks each of these and names what moved.

Note [Slots]
A Slot is installed on each saved tensor with `_raw_saved_X.register_hooks(pack, unpack)`:
pack moves the tensor out of the SavedVariable into the Slot, unpack returns
  - the graph placeholder while we trace (so the node's formula lands in the FX graph),
  - else the tensor, or eager's "backward through the graph a second time" error once the
    compiled backward that used it has run with retain_graph=False (the Slot then drops it,
    as eager frees saved tensors).
A Slot references nothing but its tensor: a closure holding nodes would form a reference
cycle through C++ that the GC cannot break.
The C++ walk (walk/fastwalk.py) has C++ slots with the same behaviour (_fastwalk_slots.cpp), and
needs none on a cache hit (Node::release_variables after the run); both are driven through
the same three calls (PySlots here, SlotList there): set_placeholders, clear_placeholders,
release.
"""
from __future__ import annotations

import re

import torch
from torch.autograd.graph import GradientEdge

from ..torchapi import autograd as torch_autograd
from .custom import GRAD_DTYPES_KEY

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)
SLOTS_KEY = "compiled_bw.slots"
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
_LEGACY_TYPES = {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                 torch.float32, torch.float64}


def modified_message(t: torch.Tensor, expected: int, names=None) -> str:
    """Eager's error text (SavedVariable::unpack, anomaly mode off: compiled_bw
    runs eager autograd under anomaly mode; _fastwalk_slots.cpp slot_unpack says the same) for
    saved tensor `t`, saved at version `expected` and modified in place since.  names: what
    eager names after "which is output" (a Slot's, Note [What eager's unpack error names]);
    None: `t`'s own grad_fn.  torch 2.13 names it without "Backward0" ("of Mul,"), 2.11 whole
    ("of MulBackward0,"): torchapi.autograd.unpack_error_strips_backward()."""
    if names is None:
        fn = t.grad_fn
        name, nr = (None, 0) if fn is None else (fn.name(), t.output_nr)
    else:
        name, nr = named_in_error(names)
    if name is not None and torch_autograd.unpack_error_strips_backward():   # not on 2.11
        name = _BACKWARD_SUFFIX.sub("", name)
    which = "" if name is None else f", which is output {nr} of {name},"
    tname = t.type()     # the legacy Python name, else Tensor::toString's (CPUBoolType)
    if t.dtype not in _LEGACY_TYPES:
        tname = f"{t.device.type.upper()}{tname.rsplit('.', 1)[1][:-len('Tensor')]}Type"
    return ("one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{tname} {list(t.shape)}]{which} is at version "
            f"{t._version}; expected version {expected} instead. Hint: enable anomaly "
            "detection to find the operation that failed to compute its gradient, with "
            "torch.autograd.set_detect_anomaly(True, check_nan=False).")


# Note [What eager's unpack error names]
# Eager's "modified by an inplace operation" error (SavedVariable::unpack, no hooks) names,
# after "which is output N of": for a saved original (an input of the node; eager keeps the
# tensor itself), the tensor's grad_fn read when the error is raised, N = 0 (output_nr_ is only
# recorded for saved outputs), and nothing for a leaf; for a saved output, the node it was
# saved for (for an in-place on a view, the view's grad_fn) and the output's number.  Our slots
# are hooks, and registering hooks drops the SavedVariable's tensor and packs a detached copy,
# which has no grad_fn: so before registering, a slot records what eager would name (two
# unpacks: a saved original comes back as the same tensor, anything else as a new one carrying
# that grad_fn), keeping a saved original's tensor as eager kept it, until released.

def eager_names(a: torch.Tensor | None, b: torch.Tensor | None, owner_name: str):
    """What a slot records from two unpacks `a`, `b` of one saved tensor (Note [What eager's
    unpack error names]): (original tensor or None, grad_fn name or None, output number)."""
    if a is None:
        return None
    if a is b:
        return (None, None, 0) if a.is_leaf else (a, owner_name, 0)
    fn = a.grad_fn
    return (None, owner_name if fn is None else fn.name(), a.output_nr)


def named_in_error(names) -> tuple:
    """(grad_fn name or None, output number) that eager's error names, from eager_names'."""
    orig, name, nr = names
    if orig is not None:
        fn = orig.grad_fn
        return (name if fn is None else fn.name()), 0
    return name, nr


# Note [Version checks in C++]
# After each call that ran user code, the saved tensors that later traced code reads (or that
# eager's later nodes unpack) are checked for in-place changes (trace/trace.py Note [Saved
# tensors modified during the backward]).  With the extension, the tensors and their versions
# when the graph started are taken in one C++ call per step (`fastwalk.version_checks`:
# ~1 us a site in Python before) and each call's check is one C++ call that answers None or
# the first modified tensor (`VersionChecks.check`); each site is checked once, its tensors
# dropped then, as the dict below pops them.


def check_after_call(checks, site: int) -> None:
    """Note [Saved tensors modified during the backward] (trace/trace.py), once call `site`
    ran: raise eager's error for the first tensor it checks -- (tensor, version when the graph
    started, None or what traced code reads it) -- that was modified in place since.  checks:
    site -> those triples, or the extension's VersionChecks (Note [Version checks in C++])."""
    if type(checks) is dict:
        found = checks.pop(site, ())
    else:
        first = checks.check(site)
        if first is None:
            return
        found = (first,)
    for t, version, reader in found:
        raise_modified(t, version, reader)


def raise_modified(t: torch.Tensor, version: int, reader) -> None:
    """check_after_call's error for saved tensor `t`, at `version` when the graph started, if
    it was modified in place since."""
    if t._version == version:
        return
    if reader is None:
        raise RuntimeError(modified_message(t, version))
    raise RuntimeError(
        f"compiled_bw: user code run during this backward modified in place a tensor that "
        f"the traced {reader} reads: it is at version {t._version}, {version} when the "
        "backward started.  Eager autograd would read the modified tensor there; the "
        "compiled graph may have read it before.  Run this backward without "
        "compiled_bw.enable().")


def raw_saved(node, attr: str):
    return getattr(node, "_raw_saved_" + attr)


def input_metadata(node) -> tuple:
    return node._input_metadata


_ACCUMULATE_GRAD = torch_autograd.AccumulateGrad


def input_meta(node) -> tuple:
    """Per input slot of `node`: (shape, dtype, device), and where the slot's grad_dtype is not
    its dtype a 4th element, the grad_dtype: validate_outputs casts grads to it, or for None
    keeps them in their own dtype.  `_input_metadata` does not show grad_dtype; a leaf's is
    its `grad_dtype`, a custom Function's what its forward declared with
    `ctx.set_output_grad_dtype` (torch 2.14+; Note [Declared grad dtypes])."""
    meta = tuple([(tuple(m.shape), m.dtype, m.device) for m in input_metadata(node)])
    if type(node) is _ACCUMULATE_GRAD:
        gd = node.variable.grad_dtype
        if gd != meta[0][1]:
            meta = ((*meta[0], gd),)
    elif isinstance(node, _BACKWARD_CFUNCTION):
        declared = node.metadata.get(GRAD_DTYPES_KEY)
        if declared is not None:
            meta = tuple(m if k >= len(declared) or declared[k] == m[1] else (*m, declared[k])
                         for k, m in enumerate(meta))
    return meta


# Note [Declared grad dtypes]
# torch 2.14's ctx.set_output_grad_dtype(*dtypes), called in a custom Function's forward, sets
# the grad_dtype of the node's input metadata per output: the engine's validate_outputs casts
# the grad handed to its backward to that dtype (a bfloat16 output's grad given as float32),
# or for None casts nothing.  Python cannot read it there (nor on the ctx: torch consumes it),
# so graph/custom.py's wrapper of set_output_grad_dtype records it in the node's metadata.
# Before this, compiled_bw cast to the output's dtype: the backward got a bfloat16 grad where
# eager's got float32 (tests/test_custom_functions.py
# test_declared_output_grad_dtypes_reach_the_backward).


def sequence_nr(node) -> int:
    return node._sequence_nr()


def gradient_edge(t) -> tuple:
    """(node, input_nr) of a tensor, the grad accumulator for a leaf (created if needed); a
    GradientEdge (torch.autograd.graph.get_gradient_edge, or built from any node) is one
    already."""
    if type(t) is GradientEdge:
        return t.node, t.output_nr
    fn = t.grad_fn
    if fn is not None:          # what get_gradient_edge returns for a non-leaf, without its cost
        return fn, t.output_nr
    e = torch.autograd.graph.get_gradient_edge(t)
    return e.node, e.output_nr


class Slot:
    __slots__ = ("names", "placeholder", "released", "value", "version")

    def __init__(self, names=None) -> None:
        self.value = None
        self.placeholder = None
        self.released = False
        self.version = 0
        self.names = names      # Note [What eager's unpack error names]

    def pack(self, t):
        self.value = t
        self.version = t._version
        return None

    def unpack(self, _packed):
        if self.placeholder is not None:
            return self.placeholder
        if self.released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        t = self.value
        if t._version != self.version:   # unpack hooks bypass SavedVariable's own check
            raise RuntimeError(modified_message(t, self.version, self.names))
        return t

    def release(self) -> None:
        self.value = self.names = None
        self.released = True


_BACKWARD_CFUNCTION = torch.autograd.function.BackwardCFunction


def foreign_saved_hooks(node, attrs) -> bool:
    """Whether `node`'s saved tensors (a custom Function's, or a built-in node's `_raw_saved_<attr>`
    for attr in attrs) carry hooks that are not our Slots, read without unpacking them
    (SavedTensor.unpack_hook: None without hooks).  The Python walk's check while the C++
    extension (walk/cpp/_fastwalk_bindings.cpp saved_hooks_in, which also knows its C++ slots) is not
    loaded."""
    if isinstance(node, _BACKWARD_CFUNCTION):
        raws = list(node._raw_saved_tensors)
    else:
        raws = []
        for a in attrs:
            r = getattr(node, "_raw_saved_" + a)
            if isinstance(r, (list, tuple)):
                raws.extend(r)
            else:
                raws.append(r)
    for r in raws:
        if r is None:
            continue
        h = r.unpack_hook
        if h is not None and not isinstance(getattr(h, "__self__", None), Slot):
            return True
    return False


class SavedHooksInUse(Exception):
    """A saved tensor already carries hooks that are not ours (saved_tensors_hooks)."""
