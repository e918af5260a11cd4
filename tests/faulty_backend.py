"""A backend with a wrong kernel, for tests/test_verify.py: it compiles nothing and adds 1e-2
to the graph's first output (a module of its own, so a repro script in a fresh process can
import it by file)."""


def off_by_a_bit(gm, example_inputs):
    def run(*args):
        out = list(gm(*args))
        out[0] = out[0] + 1e-2
        return out
    return run


def raises(gm, example_inputs):
    raise RuntimeError("this backend cannot compile anything")


def mm_off_by_a_bit(gm, example_inputs):
    """Adds 1e-2 to the graph's first matmul (a wrong kernel inside the graph, where a graph
    with delivery points has no grad output to perturb)."""
    import torch
    mm = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.mm.default)
    with gm.graph.inserting_after(mm):
        bumped = gm.graph.call_function(torch.ops.aten.add.Tensor, (mm, 1e-2))
    mm.replace_all_uses_with(bumped, delete_user_cb=lambda user: user is not bumped)
    gm.recompile()
    return lambda *args: list(gm(*args))
