"""Graph passes, run in this order on every captured graph (one pass per file)."""
import torch

from .dce import dce
from .prune_output_mask import prune_output_mask
from .reorder_for_memory import reorder_for_memory
from .strip_detach import strip_detach

PIPELINE = (strip_detach, dce, prune_output_mask, reorder_for_memory)


def run_passes(gm: torch.fx.GraphModule, create_graph: bool = False) -> torch.fx.GraphModule:
    """create_graph: the graph runs with grad mode on (strip_detach keeps formulas' detaches)."""
    for p in PIPELINE:
        gm = p(gm, create_graph) if p is strip_detach else p(gm)
    gm.graph.lint()
    gm.recompile()
    return gm
