"""Who holds each grad in eager's engine: in-place buffer sums, copied leaf grads.

Consumes, from the trace's engine (trace.py, on fake tensors under make_fx), where eager's
engine and user code would hold each grad: the pending input buffers' slots, the outputs a
node is still handing out, and what lies outside the engine (graph inputs: the caller's root
grads and the saved tensors; what opaque calls take and return; the graph's results).
Produces a buffer slot's sum as eager makes it (`Holders.add`) and a leaf's grad as eager's
AccumulateGrad stores it (`Holders.leaf_grad`).

Note [Eager's in-place sums and copied leaf grads]
Values are equal either way; what differs is the strides of dims of size 1, which a user sees
on `.grad`, on grad()'s results and in what hooks get (found by the random-program
differential: tests/test_fuzz.py's two size-1-stride regressions).
- InputBuffer::accumulate (input_buffer.cpp) sums in place, `old.add_(g)`, when grad mode is
  off, `old` is a plain non-overlapping and dense tensor, the buffer holds the only reference
  to it and to its storage, and `g` is no subclass; the sum then keeps old's strides exactly.
  Out of place, TensorIterator orders the dims by both operands' strides, and a dim of size 1
  may come out with another stride.  Where eager sums in place and the out-of-place sum's
  strides would differ, the graph holds `add_` into old (a buffer nothing else reads, as in
  eager; Inductor's functional form of it keeps old's strides too: backends/sum_strides.py
  Note [Inductor: in-place sums keep their strides]; each such `add_` is marked BUFFER_SUM in
  its node's meta); elsewhere `add`, as before.
- AccumulateGrad (accumulate_grad.h) steals a grad only the engine holds and copies one held
  elsewhere (clone_obey_contract: the leaf's strides where the leaf is non-overlapping and
  dense, else contiguous).  A grad still waiting in another node's buffer (AddBackward0 hands
  one tensor to both inputs, and the leaf's AccumulateGrad runs first) is copied; our graph's
  results reach AccumulateGrad after the graph ran, when nothing else holds them, so it would
  steal.  Where eager copies and the stolen grad's strides would differ, the graph makes
  eager's copy itself (empty_strided + copy_).  Leaves delivered inside the graph (delivery
  points) need none of this: the graph still holds such a grad there, as eager's buffer does.
The holders mirror eager's reference counts: per tensor object, its slots in pending buffers
and in the outputs a node is still sending (eager's outputs vector); per storage, the live
tensors among those; and storages held outside the engine.  A view a formula returns (a `.t()`
of its mm, as mm's backward gives a column-major input) keeps its base, and so a second
reference to its storage, alive: never summed into in place.  User code may keep what an opaque
call takes or returns (unknown at trace time), so those count as held: sums into them stay out
of place, as before; so do sums with symbolic strides (not known to be dense).  A sum into a
formula's result computed from an opaque output that may come back `None` (defined.py) is in
place too: exact where it is defined; where eager's buffer would instead take `g` itself, the
sum into the graph's zeros has old's strides where `old + g` has TensorIterator's, neither
eager's `g`.  On the eager backend an opaque output summed in place that comes back sparse is
summed as eager sums it (backends/eager.py `_buffer_add_`).
"""
from __future__ import annotations

import collections

import torch
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, get_proxy_mode
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..calls.opaque import contiguous_strides
from ..graph import defined
from ..torchapi.autograd import storage_id
from ..torchapi.dynamo import FakeTensor


def _ints(xs) -> bool:
    return all(type(x) is int for x in xs)


def dense(shape, stride) -> bool:
    """c10's compute_non_overlapping_and_dense; False where a size or stride is symbolic."""
    if not (_ints(shape) and _ints(stride)):
        return False
    if len(shape) == 1:
        return shape[0] < 2 or stride[0] == 1
    want = 1
    for d in sorted(range(len(shape)), key=lambda d: (shape[d] < 2, stride[d])):
        if shape[d] < 2:
            return True
        if stride[d] != want:
            return False
        want *= shape[d]
    return True


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        x == y if type(x) is int and type(y) is int else statically_known_true(x == y)
        for x, y in zip(a, b, strict=True))


def _plain(t) -> bool:
    return type(t) is FakeTensor and t.layout == torch.strided


BUFFER_SUM = "compiled_bw_buffer_sum"    # node meta: an in-place sum the holders emitted


def mark_buffer_sum() -> None:
    """Marks the `add_` just traced as a buffer sum (Note [Eager's in-place sums and copied
    leaf grads]): old is held by nothing else, so backends/sum_strides.py may write it
    functionally (Inductor) whatever op made old."""
    mode = get_proxy_mode()
    if mode is None:
        return
    for last in reversed(mode.tracer.graph.nodes):  # (torch 2.11's reversed() is no iterator)
        if last.target is torch.ops.aten.add_.Tensor:
            last.meta[BUFFER_SUM] = True
        return


class Holders:
    """Note [Eager's in-place sums and copied leaf grads]."""

    def __init__(self, grad_mode: bool) -> None:
        self.grad_mode = grad_mode
        self.outside: set = set()                      # storage ids held outside the engine
        self.refs: collections.Counter = collections.Counter()   # id(tensor) -> engine refs
        self.live: dict = {}                           # storage id -> Counter of id(tensor)

    def hold(self, ts) -> None:
        """User code, the caller or the graph's results may keep these."""
        for t in ts:
            if _plain(t):
                self.outside.add(storage_id(t))

    def take(self, t) -> None:
        """One more engine reference (a buffer slot, or an output being sent) to t."""
        if _plain(t):
            self.refs[id(t)] += 1
            self.live.setdefault(storage_id(t), collections.Counter())[id(t)] += 1

    def drop(self, t) -> None:
        if not _plain(t):
            return
        k, s = id(t), storage_id(t)
        self.refs[k] -= 1
        if not self.refs[k]:
            del self.refs[k]
        on = self.live[s]
        on[k] -= 1
        if not on[k]:
            del on[k]
            if not on:
                del self.live[s]

    def _only_slot(self, old, g) -> bool:
        """can_accumulate_inplace(old), the engine holding g as the incoming grad."""
        s = storage_id(old)
        return (self.refs[id(old)] == 1 and not old._is_view() and s not in self.outside
                and len(self.live.get(s, ())) == 1 and g is not old and storage_id(g) != s
                and dense(old.shape, old.stride()))

    def add(self, buf: list, nr: int, g, df) -> None:
        """InputBuffer::accumulate of g into buf[nr] (g already left the in-flight outputs)."""
        old = buf[nr]
        if old is None:
            buf[nr] = g
            self.take(g)
            return
        s = None
        if not self.grad_mode and _plain(old) and _plain(g) and self._only_slot(old, g):
            with disable_proxy_modes_tracing():
                apart = old + g
            if not _same(apart.stride(), old.stride()):
                s = old.add_(g)         # eager's in-place sum: old's strides, old's buffer
                mark_buffer_sum()
        if s is None:
            s = old + g
            self.drop(old)
            self.take(s)
        buf[nr] = s
        df.set(s, defined.or_(df.of(old), df.of(g)))

    def leaf_grad(self, g, leaf):
        """The grad our graph returns for `leaf`'s AccumulateGrad (run after the graph, where
        it steals what only the graph's results hold): eager's copy where eager copies and
        stealing would give other strides."""
        if (g is None or self.grad_mode or not _plain(g) or not self.refs.get(id(g))
                or not _ints((*g.shape, *g.stride())) or tuple(g.shape) != tuple(leaf.shape)):
            return g
        if dense(leaf.shape, leaf.stride()):
            want = tuple(leaf.stride())
            obeys = all(a == b if n != 1 else a != 0
                        for n, a, b in zip(g.shape, g.stride(), want, strict=True))
        else:
            want = contiguous_strides(g.shape)
            obeys = g.is_contiguous()
        if not obeys or tuple(g.stride()) == want:
            return g                    # AccumulateGrad copies it itself, or stealing is alike
        return torch.empty_strided(g.shape, want, dtype=g.dtype, device=g.device).copy_(g)
