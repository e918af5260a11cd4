"""Engine-state queries answered as eager would, while a compiled backward runs (ENGINE.md 9.2).

Consumes the Step being run (core/thread.py THREAD.running, set by runtime/run.py); produces replacements for
`torch._C._current_autograd_node`, `torch._C._will_engine_execute_node`,
`torch._C._current_graph_task_execution_order` and `torch.autograd._is_checkpoint_valid`,
installed once at import.  Outside a compiled run they are the originals.  Inside one, the real
engine is running our `_Deliver` node, so the originals would name it and know nothing of the
user's graph:
  _current_autograd_node()      -> the user node whose hook / custom backward / AccumulateGrad
                                   (delivery point) is running;
  _will_engine_execute_node(n)  -> whether our plan runs (or captures) n, as eager's exec_info;
                                   during grad(), a captured leaf-like node raises eager's error.
  _current_graph_task_execution_order() -> eager's list (engine.cpp
                                   get_current_graph_task_execution_order: from the roots, pop
                                   the largest sequence_nr, libstdc++ ties, each node once,
                                   children pushed only if they execute when `inputs=` prunes).
  torch.autograd._is_checkpoint_valid() -> also false inside a Deliver task run for grad() or
                                   backward(inputs=...) (`task`): eager's CheckpointValidGuard
                                   makes it false while a task with a non-empty exec_info runs,
                                   which our Deliver task cannot have (runtime/run.py _deliver).
`_current_graph_task_id()` and `queue_callback` need nothing: the Deliver task is a real task
that spans the whole compiled backward (register_multi_grad_hook and FSDP rely on both); its
keep_graph is the user's retain_graph, so `_get_current_graph_task_keep_graph()` needs nothing.
Also `legacy_vmap_level()`, for runtime/run.py's precheck.
"""
from __future__ import annotations

import torch

from ..core.thread import THREAD, flag
from ..graph.heap import StdHeap
from ..graph.saved import sequence_nr
from ..torchapi import autograd as torch_autograd

_orig_current_node = torch_autograd.current_autograd_node
_orig_will_execute = torch_autograd.will_engine_execute_node
_orig_execution_order = torch_autograd.current_graph_task_execution_order
_orig_checkpoint_valid = torch_autograd.is_checkpoint_valid
ERR_LEAF = ("A leaf node was passed to _will_engine_execute_node but we are currently running "
            "autograd.grad(). This is currently not supported.")


def _current_autograd_node():
    step = THREAD.running
    if step is None or step.current is None:
        return _orig_current_node()
    return step.nodes[step.current]     # the index of the node whose user code runs


def _will_engine_execute_node(node):
    step = THREAD.running
    if step is None:
        return _orig_will_execute(node)
    if isinstance(node, torch.autograd.graph.GradientEdge):
        node = node.node
    if id(node) not in step.will_execute_ids():
        return False
    if id(node) in step.captured_ids and not any(f is not None for f, _ in node.next_functions):
        # eager (torch/csrc/autograd/init.cpp): a captured node of topological_nr 0
        raise RuntimeError(ERR_LEAF)
    return True


def task(has_inputs: bool) -> flag:
    """Context: run.py's Deliver task runs a user call with inputs (grad(), backward(inputs=))
    or without, on this thread (where the engine runs a CPU task and our graph).  Nested (a
    reentrant backward inside a compiled one), checkpoints stay invalid once an outer task
    made them so (engine.cpp: valid = outer valid and exec_info empty)."""
    return flag("has_inputs", has_inputs or THREAD.has_inputs)


def _is_checkpoint_valid():
    # eager (engine.cpp CheckpointValidGuard): valid = outer valid and exec_info.empty()
    return _orig_checkpoint_valid() and not THREAD.has_inputs


def legacy_vmap_level() -> int:
    """The nesting level of the legacy vmap (torch._vmap_internals._vmap, which gradcheck's
    check_batched_grad uses): python_engine.cpp reads it (`VmapMode::current_vmap_level()`)
    and torch exposes no getter, only increment/decrement, which return the new level."""
    level = torch_autograd.vmapmode_increment_nesting() - 1
    torch_autograd.vmapmode_decrement_nesting()
    return level


def _current_graph_task_execution_order():
    """engine.cpp get_current_graph_task_execution_order, on the graph's initial dependency
    counts: the answer eager gives before any node ran (from a hook on the root, FSDP's use;
    later, eager's copy of the half-consumed counts trips an internal assert there)."""
    step = THREAD.running
    if step is None:
        return _orig_execution_order()
    if torch.autograd.is_multithreading_enabled():   # eager's check, its message
        _orig_execution_order()
    w, will = step.walk, set(step.plan.will_execute)    # every node unless `inputs=` prunes
    deps = [0] * len(w.nodes)
    for es in w.edges:
        for c, _ in es:
            if c >= 0:
                deps[c] += 1
    if len(w.root_edges) > 1:       # the GraphRoot's edges count too (never run here)
        for c, _ in w.root_edges:
            deps[c] += 1
    seq = [sequence_nr(n) for n in w.nodes]
    heap = StdHeap()
    for c, _ in w.root_edges:
        heap.push(seq[c], c)
    out = []
    while len(heap):
        i = heap.pop()
        out.append(w.nodes[i])
        for c, _ in w.edges[i]:
            if c >= 0 and c in will:
                deps[c] -= 1
                if deps[c] == 0:
                    heap.push(seq[c], c)
    return out


def install() -> None:
    torch_autograd.patch("current_autograd_node", _current_autograd_node)
    torch_autograd.patch("will_engine_execute_node", _will_engine_execute_node)
    torch_autograd.patch("current_graph_task_execution_order", _current_graph_task_execution_order)
    torch_autograd.patch("is_checkpoint_valid", _is_checkpoint_valid)
