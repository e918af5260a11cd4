"""The Slots of one step: installed on the saved tensors a graph reads (Python walk).

Consumes a walk's nodes and saved-tensor keys ((node index, attr, list position | -1), from
walk/walk.py); produces one Slot per saved tensor (graph/saved.py Slot; a checkpointed
region's RegionSlot, checkpoint/recompute.py; a traceable hook's packed tensor's slot,
graph/packed.py), reused when the graph already has ours (retain_graph=True), and PySlots,
what the trace and the run hold them by.  walk/fastwalk.py's C++ SlotList does the same for
the C++ walk.
"""
from __future__ import annotations

import torch

from ..checkpoint.recompute import RegionSlot
from ..graph.packed import packed_slot
from ..graph.saved import _BACKWARD_CFUNCTION, SLOTS_KEY, SavedHooksInUse, Slot, eager_names


def install_slots(nodes: list, saved_node: list) -> list:
    """One Slot per saved tensor (saved_node: (node index, attr, list position | -1)),
    reusing ours when this graph already has them (retain_graph=True, a second call)."""
    slots = []
    unpacked: dict = {}     # (node index, attr) -> _unpack_twice's: a list unpacks whole
    for key in saved_node:
        i, attr, pos = key
        node = nodes[i]
        if attr == "ckpt":          # a checkpoint region's input or node (recompute.py)
            slots.append(RegionSlot())
            continue
        if type(pos) is tuple:      # a tensor of a traceable hook's packed object (packed.py):
            # no Slot, nothing in node.metadata
            slots.append(packed_slot(node, attr, pos))
            continue
        meta = node.metadata
        mine = meta.get(SLOTS_KEY)
        if mine is None:
            mine = meta[SLOTS_KEY] = {}
        slot = mine.get(key[1:])
        if slot is None and attr == "novc":    # AOT's plain list: nothing to hook
            slot = mine[key[1:]] = Slot()
        if slot is None:
            raw = getattr(node, "_raw_saved_" + attr)
            if pos >= 0:
                raw = raw[pos]
            if (i, attr) not in unpacked:
                unpacked[i, attr] = _unpack_twice(node, attr)
            slot = Slot(_names_of(node, unpacked[i, attr], pos))
            try:
                raw.register_hooks(slot.pack, slot.unpack)
            except RuntimeError as e:
                raise SavedHooksInUse(str(e)) from None
            mine[key[1:]] = slot
        slots.append(slot)
    return slots


def _unpack_twice(node, attr: str):
    """Two unpacks of node's saved `attr` (a custom Function's: its saved_tensors), or None
    where it cannot be unpacked (Note [What eager's unpack error names])."""
    name = "saved_tensors" if isinstance(node, _BACKWARD_CFUNCTION) else "_saved_" + attr
    try:
        return getattr(node, name), getattr(node, name)
    except (AttributeError, RuntimeError):
        return None


def _names_of(node, pair, pos: int):
    """eager_names for element `pos` (-1: the whole) of _unpack_twice's `pair`, None where
    there is nothing to compare."""
    if pair is None:
        return None
    a, b = pair
    if pos >= 0:
        a, b = a[pos], b[pos]
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    return eager_names(a, b, node.name())


class PySlots:
    """The slots of one step (Python walk): placeholders while tracing, release after a run.
    walk/fastwalk.py's C++ SlotList has the same methods."""
    __slots__ = ("n_saved", "nodes", "opaque_nodes", "release_nodes", "slots")

    def __init__(self, slots: list, n_saved: int, nodes: list, opaque_nodes: dict | None = None,
                 release_nodes=None) -> None:
        self.slots, self.n_saved, self.nodes = slots, n_saved, nodes
        # node index -> node whose saved tensors its real node unpacks (a custom Function run
        # opaquely): no Slot (a hooked SavedVariable unpacks to a new tensor object, eager's
        # gives the saved input itself); release_nodes(nodes) frees them after a run
        self.opaque_nodes, self.release_nodes = opaque_nodes or {}, release_nodes

    def __len__(self) -> int:
        return len(self.slots)

    def set_placeholders(self, phs) -> None:
        for slot, ph in zip(self.slots[:self.n_saved], phs, strict=True):
            slot.placeholder = ph

    def clear_placeholders(self) -> None:
        for slot in self.slots:
            slot.placeholder = None

    def release(self, executed, n_nodes: int) -> None:
        executed = set(executed)
        for slot, i in zip(self.slots, self.nodes, strict=True):
            if i in executed:
                slot.release()
        if self.opaque_nodes:
            self.release_nodes([n for i, n in self.opaque_nodes.items() if i in executed])

    def release_positions(self, ks) -> None:
        """Drop the tensors at these positions (Note [Box ownership] in runtime/run.py)."""
        for k in ks:
            self.slots[k].release()
