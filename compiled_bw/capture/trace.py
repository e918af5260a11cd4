"""Trace: our engine, run once per signature under make_fx(tracing_mode="fake").

Consumes a Walk and the call options; produces an FX GraphModule of aten ops (plus
`compiled_bw::opaque` calls) and a Plan saying what its inputs and outputs mean.  The
engine follows torch/csrc/autograd/engine.cpp as specified in shared/ENGINE.md:
dependency counting (1.2), ready-queue order with libstdc++ tie breaking (1.5), input
buffers summed in arrival order (2), validate_outputs (3), pruning for `inputs=` (1.6).
Graph inputs: the defined root grads, then every saved tensor, in walk order.
"""
from __future__ import annotations

import dataclasses

import torch
from torch._subclasses import fake_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .heap import StdHeap
from .nodes import LEAF, OPAQUE
from .opaque import OpaqueSite, opaque, register_site
from .saved import sequence_nr
from .validate import validate_outputs

# Failures of fake tensors on a node's formula: that node becomes an opaque call instead.
_FAKE_FAILURES = (
    fake_tensor.DataDependentOutputException,
    fake_tensor.DynamicOutputShapeException,
    fake_tensor.UnsupportedOperatorException,
    GuardOnDataDependentSymNode,
)


class TraceFailed(Exception):
    """The trace met something eager would reject or we cannot express; message = reason."""


@dataclasses.dataclass
class Options:
    accumulate: bool                 # backward() (True) or grad() (False)
    retain_graph: bool
    inputs: tuple                    # per input: (node index | -1, input_nr)
    allow_unused: bool


@dataclasses.dataclass
class Plan:
    root_defined: tuple              # per root grad: passed as a graph input?
    leaf_outputs: tuple              # (leaf node index, output position | None), to deliver
    capture_outputs: tuple           # per grad() input: output position | None
    executed: tuple                  # node indices whose saved tensors a run consumes
    opaque_sites: tuple              # site ids registered for this graph
    opaque_names: tuple              # node class names run opaquely


def _needed_and_captured(w, opts):
    n = len(w.nodes)
    if not opts.inputs:
        return [True] * n, {}
    parents: list = [[] for _ in range(n)]
    for p, es in enumerate(w.edges):
        for c, _ in es:
            if c >= 0:
                parents[c].append(p)
    needed = [False] * n
    captures: dict = {}
    queue = []
    for pos, (c, nr) in enumerate(opts.inputs):
        if c < 0:
            continue
        if opts.accumulate:
            needed[c] = True
        else:
            captures.setdefault(c, []).append((pos, nr))
        queue.append(c)
    seen = set(queue)
    while queue:
        t = queue.pop()
        for p in parents[t]:
            needed[p] = True
            if p not in seen:
                seen.add(p)
                queue.append(p)
    if len(w.root_edges) == 1:
        needed[w.root_edges[0][0]] = True   # the start node always runs (ENGINE.md 1.6)
    return needed, captures


def _add(buf: list, nr: int, g) -> None:
    if g is None:
        return
    old = buf[nr]
    buf[nr] = g if old is None else old + g


def _run_engine(w, opts, root_grads: list, sites: list, opaque_names: list):
    """Runs on fake tensors under make_fx; returns (outputs list, plan parts)."""
    n = len(w.nodes)
    needed, captures = _needed_and_captured(w, opts)
    captured = [False] * n
    for c in captures:
        captured[c] = True
    deps = [0] * n
    for es in w.edges:
        for c, _ in es:
            if c >= 0:
                deps[c] += 1
    buffers: dict = {}
    heap = StdHeap()
    seq = [sequence_nr(node) for node in w.nodes]
    root_meta_edges = tuple(w.root_edges)

    def send(edges, grads) -> None:
        # ENGINE.md 1.4: every valid edge counts down; pruned nodes get nothing.
        for (c, nr), g in zip(edges, grads):
            if c < 0:
                continue
            deps[c] -= 1
            if not (needed[c] or captured[c]):
                continue
            b = buffers.get(c)
            if b is None:
                b = buffers[c] = [None] * len(w.in_meta[c])
            _add(b, nr, g)
            if deps[c] == 0:
                heap.push((0, seq[c]), c)
    grads = validate_outputs("", root_grads, root_meta_edges, w.in_meta)
    if len(w.root_edges) == 1:
        (c, nr), = w.root_edges
        buf = buffers[c] = [None] * len(w.in_meta[c])
        _add(buf, nr, grads[0])
        heap.push((0, seq[c]), c)
    else:
        grads = validate_outputs("GraphRoot", grads, root_meta_edges, w.in_meta)
        for c, _ in w.root_edges:
            deps[c] += 1
        send(w.root_edges, grads)

    outputs: list = []
    leaf_outputs: list = []
    capture_pos = [None] * len(opts.inputs)
    executed: list = []

    def emit(t) -> int | None:
        if t is None:
            return None
        outputs.append(t)
        return len(outputs) - 1

    while len(heap):
        i = heap.pop()
        node, kind = w.nodes[i], w.kinds[i]
        buf = buffers.pop(i, None) or [None] * len(w.in_meta[i])
        if captured[i]:
            for pos, nr in captures[i]:
                capture_pos[pos] = emit(buf[nr])
        if not needed[i]:
            continue
        executed.append(i)
        if kind.how == LEAF:
            if opts.accumulate:
                leaf_outputs.append((i, emit(buf[0])))
            continue
        outs = None
        if kind.how != OPAQUE:
            try:
                with torch.no_grad():
                    outs = node(*buf)
                outs = [outs] if isinstance(outs, torch.Tensor) or outs is None else list(outs)
            except _FAKE_FAILURES:
                outs = None
        if outs is None:
            outs = _opaque_call(w, i, kind.name, buf, sites)
            opaque_names.append(kind.name)
        try:
            outs = validate_outputs(kind.name, outs, w.edges[i], w.in_meta)
        except RuntimeError as e:
            raise TraceFailed(f"validate_outputs of {kind.name}: {e}") from None
        send(w.edges[i], outs)
    if buffers:
        raise TraceFailed("could not compute gradients for some functions")
    return outputs, tuple(leaf_outputs), tuple(capture_pos), tuple(executed)


def _opaque_call(w, i: int, name: str, buf: list, sites: list) -> list:
    specs = []
    for c, nr in w.edges[i]:
        if c < 0:
            specs.append(None)
        else:
            shape, dtype, device = w.in_meta[c][nr]
            specs.append((tuple(shape), dtype, device))
    site = OpaqueSite(i, name, w.edges[i], tuple(specs))
    sid = register_site(site)
    sites.append(sid)
    res = iter(opaque(sid, list(buf)))
    return [None if s is None else next(res) for s in specs]


def trace_backward(w, opts: Options, root_grads: list, slots: list):
    """Returns (GraphModule, Plan).  `slots` are installed on w.saved (same order)."""
    root_defined = tuple(g is not None for g in root_grads)
    example = [g for g in root_grads if g is not None] + list(w.saved)
    n_roots = len(example) - len(w.saved)
    sites: list = []
    opaque_names: list = []
    result: dict = {}

    def program(*flat):
        it = iter(flat[:n_roots])
        grads = [next(it) if d else None for d in root_defined]
        for slot, ph in zip(slots, flat[n_roots:], strict=True):
            slot.placeholder = ph
        try:
            outs, leaf_outputs, capture_outputs, executed = _run_engine(
                w, opts, grads, sites, opaque_names)
        finally:
            for slot in slots:
                slot.placeholder = None
        result.update(leaf_outputs=leaf_outputs, capture_outputs=capture_outputs,
                      executed=executed)
        return outs

    try:
        gm = make_fx(program, tracing_mode="fake")(*example)
    except TraceFailed:
        raise
    except Exception as e:  # anything else: eager runs and shows the real behaviour
        raise TraceFailed(f"trace failed: {type(e).__name__}: {e}") from e
    plan = Plan(root_defined, result["leaf_outputs"], result["capture_outputs"],
                result["executed"], tuple(sites), tuple(opaque_names))
    return gm, plan
