"""Activation checkpointing: the checkpointed regions of a backward, traced instead of run.

Consumes the regions torch.utils.checkpoint (non-reentrant) leaves in the autograd graph (their
recorded forward, inputs and RNG state); produces, per region, a walk entry (the walk keys on
it), the region's recomputation traced by Dynamo (recompute.py) under guards (guarded.py), and
the run-time slots of its saved tensors.  Imports graph/ and below.
"""
