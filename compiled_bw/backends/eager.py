"""The `eager` backend: runs the captured FX graph op by op.  The reference for the others.

Consumes a GraphModule and example inputs; produces a boxed callable `f(box) -> list`
that empties the box before running (it owns the inputs from then on).
"""
import torch


def compile_eager(gm: torch.fx.GraphModule, example_inputs: list):
    def run(box: list) -> list:
        args = list(box)
        box.clear()
        return gm(*args)

    return run
