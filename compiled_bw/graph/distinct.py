"""Example inputs for make_fx: consumes a list of a graph's example inputs (real or fake
tensors, SymInts); produces the same list with each repeated tensor object replaced by an alias
of its own (Note [One placeholder per input]).

Note [One placeholder per input]
A graph's inputs (root grads, then saved tensors, one per SavedVariable) may hold one tensor
more than once on the step it is captured or compiled: two nodes that saved the same input
(x * c1 and y * c2 with c2 = c1), a root grad that is also saved (y = w * c; y.backward(c)).
make_fx gives one tensor object one proxy, the last placeholder's, so every use of the others
reads that placeholder: a graph that is right only while the inputs stay aliased, reused on a
later step where they are not (neither walk keys aliasing: walk/fastwalk.py Note [Node-local
tensor ids]; nor do dynamic graphs' guards) -- a silent wrong gradient.  Each repeat is traced
from an object of its own (`detach`: same storage, version counter and sizes, requires_grad
kept; no copy), so each placeholder is read where its own input is, and the graph is right for
aliased and distinct inputs alike: it never writes into a saved tensor, and a root grad it
writes in place is in Plan.mutated_inputs.  Both of our make_fx calls on a whole graph use it:
the trace (trace/trace.py) and Inductor's functionalizing retrace (backends/inductor.py).
"""
from __future__ import annotations

import torch


def one_object_per_input(example: list) -> list:
    seen: set = set()
    out = []
    for t in example:
        if isinstance(t, torch.Tensor):
            if id(t) in seen:
                t = t.detach().requires_grad_(t.requires_grad)
            else:
                seen.add(id(t))
        out.append(t)
    return out
