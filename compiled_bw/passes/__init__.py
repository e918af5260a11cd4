"""Graph passes, run in this order on every captured graph (one pass per file)."""
import torch

from .dce import dce
from .reorder_for_memory import reorder_for_memory
from .strip_detach import strip_detach

PIPELINE = (strip_detach, dce, reorder_for_memory)


def run_passes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    for p in PIPELINE:
        gm = p(gm)
    gm.graph.lint()
    gm.recompile()
    return gm
