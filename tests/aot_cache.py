"""Helpers for tests of torch.compile'd forwards: which AOT backward module AOTAutograd gives.

AOTAutograd makes a forward's backward module fresh (cold) or loads it from its cache (warm: a
user's second run of a script, or any compile after an eager backward of the same model saved
the entry).  The two modules differ (a cached one holds real tensor constants), so tests of the
splice (graph/aot.py) pin which one they get: `aot_cache(warm)` sets the cache,
`warm_aot_cache` fills it, `assert_aot_cache` checks what a forward got.
"""
import torch


def aot_nodes(out):
    """The CompiledFunctionBackward nodes reachable from out.grad_fn."""
    seen, todo, found = set(), [out.grad_fn], []
    while todo:
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        if hasattr(type(n), "_forward_cls"):
            found.append(n)
        todo.extend(f for f, _ in n.next_functions)
    assert found, "no torch.compile'd forward in this graph"
    return found


def assert_aot_cache(out, warm: bool):
    """Every AOT backward of `out` comes from AOTAutograd's cache (warm) or from a fresh compile,
    and a warm one holds tensor constants (what made the splice fail)."""
    from torch._dynamo.compiled_autograd import extract_bw_module
    for n in aot_nodes(out):
        cf = type(n)._forward_cls
        kind = type(cf._lazy_backward_info).__name__
        assert kind == ("CachedAutogradLazyBackwardCompileInfo" if warm
                        else "AutogradLazyBackwardCompileInfo"), kind
    if warm:
        mods = [extract_bw_module(type(n)._forward_cls) for n in aot_nodes(out)]
        assert any(nd.op == "get_attr" for gm in mods for nd in gm.graph.nodes), \
            "no tensor constant in the cached AOT backward: the test no longer tests a cached module with constants"


def aot_cache(warm: bool):
    """AOTAutograd's cache on (warm: a compile of a model whose backward AOTAutograd already
    compiled loads it) or off (cold: every compile makes a fresh backward module).  Without
    this, a differential test's compiled run is warm: its eager run compiled the backward."""
    import contextlib

    import torch._functorch.config
    import torch._inductor.config
    stack = contextlib.ExitStack()
    stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=warm))
    stack.enter_context(torch._inductor.config.patch(fx_graph_cache=True))
    return stack


def warm_aot_cache(make, loss):
    """Compile `make()`'s forward and run its backward under eager autograd: AOTAutograd
    compiles the backward and saves the cache entry a later compile of the same model loads
    (a user's second run of a script).  Needs the caches on (they are by default)."""
    torch._dynamo.reset()
    loss(torch.compile(make())).backward()
    torch._dynamo.reset()
