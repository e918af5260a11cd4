"""The walk: what runs on every backward before the graph does.

Consumes the autograd graph of one backward call (its root edges); produces the walk: its
nodes in execution order, their kinds, saved tensors and leaves, and the signature the cache is
keyed on (walk.py, in Python; fastwalk.py with the C++ extension in cpp/, built on first use),
and the Slots on the saved tensors (saved_slots.py).  Imports graph/, checkpoint/, calls/.
"""
