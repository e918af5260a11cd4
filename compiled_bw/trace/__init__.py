"""The tracer: what runs once per new signature.

Consumes a walk and the step's grads; produces one FX graph of the whole backward (trace.py:
built-in nodes' formulas as aten ops under make_fx, opaque calls and delivery points for the rest,
unpack calls placed by unpack_probes.py) and its Plan, the symbolic sizes of a dynamic graph
(dynamic.py, grouped_mm.py), and which outputs are differentiable (differentiable.py).
Imports every stage below it.
"""
