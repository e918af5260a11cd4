"""Undefined grads through a captured graph: which values eager would leave undefined.

Consumes, at trace time, the values each opaque call returns (user code may return `None` for
any of them at run time: a custom backward, a hook) and how each traced node maps the
definedness of its grads to its outputs; produces, per value the graph passes on, a formula
over those opaque outputs.  At run time `Step.undefined` holds the opaque outputs that came
back `None` (the graph got zeros in their place, see Note [Undefined grads]); `evaluate` says
whether a value is defined, so that opaque calls receive `None` and leaves and grad() results
stay `None` exactly where eager's engine would have an undefined grad.

Note [Undefined grads]
engine.cpp keeps an undefined grad undefined: C++ nodes return undefined grads for it (most
formulas: all outputs undefined when every incoming grad is; some depend on which one),
InputBuffer sums skip it, hooks get `None`, custom backwards get `None` or zeros
(materialize_grads), AccumulateGrad leaves `.grad` alone.  A captured graph is one fixed
program, so an opaque output that comes back `None` is passed on as zeros: every backward
formula is linear in its incoming grads, so every value computed from it is what eager
computes wherever eager's is defined.  Which values eager leaves undefined is decided by the
formulas here, traced once per graph:
  - an opaque output is one bit (defined unless it came back `None`);
  - a sum of two grads (input buffer) is defined if either is;
  - a traced node's outputs: its real formula run on fake tensors, once per pattern of which
    of its non-constant inputs are undefined (a truth table, usually the input's own formula);
  - a traced custom Function (or AOT backward) is exact only where eager materializes zeros
    for an undefined grad; elsewhere it runs as an opaque call (trace.py).
"""
from __future__ import annotations

import dataclasses

import torch
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

MAX_VARIABLE_INPUTS = 6      # a node with more distinct variable inputs: the capture falls back


@dataclasses.dataclass(frozen=True)
class Any:
    """Defined unless every one of these opaque outputs ((site, output position)) was None."""
    bits: frozenset


@dataclasses.dataclass(frozen=True)
class Table:
    """Defined per the column, indexed by which inputs are defined (bit i: inputs[i])."""
    inputs: tuple
    column: tuple


def or_(a, b):
    if a is True or b is True:
        return True
    if a == b:
        return a
    if type(a) is Any and type(b) is Any:
        return Any(a.bits | b.bits)
    return Table((a, b), (False, True, True, True))


def evaluate(f, undefined: set, memo: dict) -> bool:
    if f is True:
        return True
    if type(f) is Any:
        return not f.bits <= undefined
    r = memo.get(f)
    if r is None:
        idx = sum(1 << i for i, x in enumerate(f.inputs) if evaluate(x, undefined, memo))
        r = memo[f] = f.column[idx]
    return r


class Tracker:
    """Trace time: the formula of each fake tensor (keeps them alive; absent = defined)."""

    def __init__(self) -> None:
        self._of: dict = {}

    def of(self, t):
        if t is None:
            return False
        e = self._of.get(id(t))
        return True if e is None else e[1]

    def set(self, t, f) -> None:
        if t is not None and f is not True:
            self._of[id(t)] = (t, f)

    def carry(self, before: list, after: list) -> None:
        """validate_outputs made new tensors (cast, sum_to): they keep their source's formula."""
        for a, b in zip(before, after, strict=True):
            if a is not None and b is not None and b is not a:
                self.set(b, self.of(a))

    def variable(self, grads: list) -> bool:
        return any(g is not None and self.of(g) is not True for g in grads)


# Note [Nodes defined where any grad is]
# The backward nodes of ops returning a list of views (unbind, split, split_with_sizes and the
# unsafe_ forms) get one grad per piece: a bidirectional GRU's unbind over 16 time steps under
# a checkpoint Dynamo refuses (its nodes opaque, each grad one bit) has 16 variable inputs, past
# what a truth table holds.  Their derivatives.yaml formula is a single one for `self`, which
# torchgen wraps as `any_grad_defined ? (formula) : Tensor()` (gen_autograd_functions.py
# emit_derivative), and the formula (unbind_backward, split_with_sizes_backward in
# FunctionsManual.cpp) puts zeros in for every undefined piece: the grad is defined exactly
# where any piece's is, an OR of their formulas, without a table (tests/test_wrong_values.py
# checks it against the real nodes).
ANY_DEFINED = frozenset({"UnbindBackward0", "SplitBackward0", "SplitWithSizesBackward0",
                         "UnsafeSplitBackward0", "UnsafeSplitWithSizesBackward0"})


def node_outputs(tracker: Tracker, call, grads: list, outs: list, name: str = "") -> None:
    """Formulas of a traced node's outputs `outs` (its call on `grads`, all treated as defined).
    `call(grads)` runs the node again on fake tensors, outside the graph; raises
    NotRepresentable if the node has too many variable inputs or fails on a pattern.  name:
    the node's class name (Note [Nodes defined where any grad is])."""
    forms = [tracker.of(g) for g in grads]
    variables: list = []
    for f in forms:
        if f is not True and f is not False and f not in variables:
            variables.append(f)
    if not variables:
        return
    if name in ANY_DEFINED and len(variables) > MAX_VARIABLE_INPUTS:
        f = True if any(x is True for x in forms) else _any_of(variables)
        for o in outs:
            tracker.set(o, f)
        return
    if len(variables) > MAX_VARIABLE_INPUTS:
        raise NotRepresentable(f"{len(variables)} inputs whose definedness depends on user code")
    full = (1 << len(variables)) - 1
    columns: list = [[None] * (full + 1) for _ in outs]
    for j, o in enumerate(outs):
        columns[j][full] = o is not None
    for idx in range(full):
        pattern = [g if g is None or forms[k] is True or
                   idx >> variables.index(forms[k]) & 1 else None
                   for k, g in enumerate(grads)]
        try:
            with disable_proxy_modes_tracing(), torch.no_grad():
                res = call(pattern)
        except Exception as e:  # noqa: BLE001 -- eager would raise it at run time; we cannot
            raise NotRepresentable(f"it raises with an undefined grad: {type(e).__name__}: "
                                   f"{e}") from None
        if len(res) != len(outs):
            raise NotRepresentable("its output count depends on which grads are defined")
        for j, r in enumerate(res):
            columns[j][idx] = r is not None
    any_col = tuple(idx != 0 for idx in range(full + 1))
    for o, col in zip(outs, columns, strict=True):
        if o is None:
            continue
        col = tuple(col)
        if all(col):
            f = True
        elif col == any_col:
            f = _any_of(variables)
        else:
            f = next((v for i, v in enumerate(variables)
                      if col == tuple(bool(idx >> i & 1) for idx in range(full + 1))), None)
            if f is None:
                f = Table(tuple(variables), col)
        tracker.set(o, f)


def _any_of(variables: list):
    """Defined where any of these formulas is."""
    f = variables[0]
    for v in variables[1:]:
        f = or_(f, v)
    return f


class NotRepresentable(Exception):
    """Which of a node's outputs eager leaves undefined cannot be expressed here."""
