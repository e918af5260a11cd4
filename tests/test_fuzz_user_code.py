"""Differential fuzzer for user code in the backward: random small programs mixing custom
autograd.Functions (traced, judged by Dynamo, or opted out: passing their grad on, keeping it,
returning one tensor for two inputs, writing into it), tensor hooks (logging, scaling,
keeping, writing in place), node pre/post hooks, a module full backward hook, post-accumulate
hooks that scale `.grad` in place, retain_grad, and backward() / grad() / backward(inputs=) /
two backwards through a retained graph, over leaves that keep their `.grad` across steps.

Each seed's program runs 3 steps under eager autograd and under compiled_bw (background
compile on, waited for after each step), and compares every step's leaf, retained and module
grads, grad() results, the hook log, the values of every tensor user code kept (also those of
earlier steps: a `.grad` aliasing one would change it), and which of those tensors are the same
object or share storage (eager's stealing and buffer sharing).  COMPILED_BW_USER_FUZZ_SEEDS=N
runs N seeds per backend instead of the default (tools/fuzz_nightly.sh-style runs: 500 found
none on 2026-11-28 after the fixes it found that day, tests/test_no_grad_copy.py and
tests/test_opaque_passthrough.py).
"""
from __future__ import annotations

import os
import random

import pytest
import torch
from differential import differential
from torch.autograd import Function

SEEDS = int(os.environ.get("COMPILED_BW_USER_FUZZ_SEEDS", "48"))
CHUNK = 8
KEPT: list = []
ALLKEPT: list = []
LOG: list = []


def _function(name: str, body, two: bool, traceable):
    def forward(ctx, *xs):
        return xs[0] + xs[1] if two else xs[0] * 1

    def backward(ctx, *gs):
        return body(*gs)
    attrs = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    if traceable is not None:
        attrs["compiled_bw_traceable"] = traceable
    return type(name, (Function,), attrs)


def _keep(t):
    KEPT.append(t)
    return t


def _log(g):
    LOG.append(("fn", round(float(g.sum()), 4)))
    return g + 1


_ONE = [("Pass", lambda g: g), ("PassKeep", _keep), ("Fresh", lambda g: g * 2),
        ("FreshKeep", lambda g: _keep(g * 2)), ("View", lambda g: (g * 2).view(-1).view(g.shape)),
        ("Log", _log), ("Inplace", lambda g: g.mul_(2))]
_TWO = [("Two", lambda g: (g, g)), ("TwoKeep", lambda g: (_keep(g), g)),
        ("TwoFresh", lambda g: (g * 3,) * 2)]
# each in two flavours: opted out (an opaque call always), and left to Dynamo's verdict
FUNCS = [_function(n + s, b, False, t) for n, b in _ONE for s, t in (("Out", False), ("", None))]
FUNCS2 = [_function(n + s, b, True, t) for n, b in _TWO for s, t in (("Out", False), ("", None))]


def _h_log(g):
    LOG.append(("h", round(float(g.sum()), 4)))


HOOKS = [_h_log, lambda g: g * 3, _keep, KEPT.append, lambda g: g.add_(1)]


def _post(p):
    LOG.append(("post", round(float(p.grad.sum()), 4), any(p.grad is k for k in KEPT)))
    p.grad.mul_(0.5)


def program(seed: int):
    rnd = random.Random(seed)
    n_leaves = rnd.randint(1, 3)
    plan, nvals = [], n_leaves
    for _ in range(rnd.randint(2, 7)):
        kind = rnd.choice(["unary", "bin", "fn", "fn2", "hook", "retain", "nodehook", "module"])
        plan.append((kind, rnd.randrange(nvals), rnd.randrange(nvals), rnd.randrange(100)))
        nvals += kind not in ("retain", "hook", "nodehook")
    leaf_hooks = [(rnd.randrange(n_leaves), rnd.choice(["hook", "post", "none", "none"]),
                   rnd.randrange(100)) for _ in range(rnd.randint(0, 2))]
    how = rnd.choice(["backward", "backward", "grad", "backward_inputs", "twice"])
    return n_leaves, plan, leaf_hooks, how, rnd.choice([(3,), (2, 3)])


def _node_hook(fn, r):
    if r % 3 == 0:
        fn.register_hook(lambda gi, go: LOG.append(("post", len(gi), len(go))))
    elif r % 3 == 1:
        fn.register_prehook(lambda go: LOG.append(
            ("pre", None if go[0] is None else round(float(go[0].sum()), 4))))
    else:
        fn.register_hook(lambda gi, go: tuple(None if g is None else g * 2 for g in gi))


def _step(prog, state):
    _, plan, leaf_hooks, how, shape = prog
    leaves, module = state
    vals, retained, handles = list(leaves), [], []
    for li, kind, r in leaf_hooks:
        if kind == "hook":
            handles.append(leaves[li].register_hook(HOOKS[r % len(HOOKS)]))
        elif kind == "post":
            handles.append(leaves[li].register_post_accumulate_grad_hook(_post))
    for kind, a, b, r in plan:
        x, y = vals[a], vals[b]
        if kind == "unary":
            vals.append([torch.tanh, lambda t: t * 2, torch.exp, torch.sin][r % 4](x))
        elif kind == "bin":
            vals.append(x * y if r % 2 else x + y)
        elif kind == "fn":
            vals.append(FUNCS[r % len(FUNCS)].apply(x))
        elif kind == "fn2":
            vals.append(FUNCS2[r % len(FUNCS2)].apply(x, y))
        elif kind == "hook" and not x.is_leaf:
            x.register_hook(HOOKS[r % len(HOOKS)])
        elif kind == "nodehook" and x.grad_fn is not None:
            _node_hook(x.grad_fn, r)
        elif kind == "module":
            vals.append(module(x))
        elif kind == "retain" and not x.is_leaf:
            x.retain_grad()
            retained.append(x)
    out = vals[-1]
    loss = (out * torch.arange(1.0, 1 + out.numel()).view(shape)).sum()
    KEPT.clear()
    LOG.clear()
    got = []
    if how == "backward":
        loss.backward()
    elif how == "twice":
        loss.backward(retain_graph=True)
        loss.backward()
    elif how == "backward_inputs":
        loss.backward(inputs=leaves[:1])
    else:
        got = list(torch.autograd.grad(loss, leaves, allow_unused=True))
    for h in handles:
        h.remove()
    ALLKEPT.extend(KEPT)
    ts = [t for t in [*(v.grad for v in leaves), *(t.grad for t in retained), *KEPT, *got]
          if t is not None]
    return {"grads": [None if v.grad is None else v.grad.clone() for v in leaves],
            "module": [None if p.grad is None else p.grad.clone() for p in module.parameters()],
            "retained": [None if t.grad is None else t.grad.clone() for t in retained],
            "got": [None if g is None else g.clone() for g in got],
            "log": list(LOG), "kept": [k.clone() for k in ALLKEPT],
            "same": [[x is y for y in ts] for x in ts],
            "storage": [[x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
                         for y in ts] for x in ts]}


def _check(seed: int, backend: str) -> None:
    prog = program(seed)

    def build():
        ALLKEPT.clear()
        torch.manual_seed(seed)
        module = torch.nn.Linear(3, 3)
        module.register_full_backward_hook(
            lambda m, gi, go: LOG.append(("module", round(float(go[0].sum()), 4))))
        return [torch.randn(*prog[4], requires_grad=True) for _ in range(prog[0])], module
    differential(build, lambda state: _step(prog, state), backend=backend, captures=None,
                 fallbacks=None, strict=False)


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_random_programs_with_user_code_eager_backend(first):
    for seed in range(first, min(first + CHUNK, SEEDS)):
        _check(seed, "eager")


@pytest.mark.slow
@pytest.mark.parametrize("first", range(1000, 1000 + max(SEEDS // 6, 4), 4))
def test_random_programs_with_user_code_inductor(first):
    for seed in range(first, first + 4):
        _check(seed, "inductor")
