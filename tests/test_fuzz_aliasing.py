"""Differential fuzzer for what changes between steps without changing the graph: which of a
program's non-grad tensors are one tensor.

A random program (fixed per seed) combines leaves with constants (tensors that do not require
grad, so only saved tensors and root grads see them) through elementwise ops, broadcasts and
row sums, and runs backward() with a root grad that is a constant or none.  Each step draws
anew which constants are the same object, a view of another, or fresh; some seeds also change
the rows of every tensor per step (a dynamic graph takes over).  So a graph captured on a step
where two saved tensors (or a root grad and a saved tensor) were one tensor is reused on steps
where they are not, and the other way round: grads must stay eager's on every step (graph/
distinct.py Note [One placeholder per input]; walk/fastwalk.py Note [Node-local tensor ids]).
Found the bug those Notes fix on its first run against the commit before them.
COMPILED_BW_ALIAS_FUZZ_SEEDS=N runs N seeds per backend instead of the default.
"""
from __future__ import annotations

import os
import random

import pytest
import torch
from differential import differential

SEEDS = int(os.environ.get("COMPILED_BW_ALIAS_FUZZ_SEEDS", "32"))
CHUNK = 8
COLS = 5


def program(seed: int):
    rnd = random.Random(seed)
    n_leaves, n_consts = rnd.randint(1, 3), rnd.randint(2, 4)
    ops = []
    nvals = n_leaves
    for _ in range(rnd.randint(2, 6)):
        ops.append((rnd.choice(["mul", "mul", "add", "div", "tanh", "exp_mul", "rowsum"]),
                    rnd.randrange(nvals), rnd.randrange(n_consts), rnd.randrange(100)))
        nvals += 1
    # per step: for each constant, ("fresh",) or ("same", j) / ("view", j) for an earlier j
    steps = []
    for _ in range(4):
        pick = []
        for c in range(n_consts):
            kind = rnd.choice(["fresh", "same", "view"]) if c else "fresh"
            pick.append(("fresh",) if kind == "fresh" else (kind, rnd.randrange(c)))
        steps.append(pick)
    root = rnd.choice([None, None, rnd.randrange(n_consts)])
    rows = [4, 5, 6, 7] if rnd.random() < 0.4 else [4] * 4
    leaf_rows = [rnd.random() < 0.5 for _ in range(n_leaves)]     # (rows, COLS) or (COLS,)
    return n_leaves, n_consts, ops, steps, root, rows, leaf_rows


def _consts(pick, n):
    cs: list = []
    for p in pick:
        if p[0] == "fresh":
            cs.append(torch.randn(n, COLS))
        elif p[0] == "same":
            cs.append(cs[p[1]])
        else:
            cs.append(cs[p[1]].view(n, COLS))
    return cs


def make(prog):
    n_leaves, _, ops, steps, root, rows, leaf_rows = prog

    def build():
        # a leaf with rows is re-made per step at that step's rows (from a fixed one)
        return {"k": 0, "leaves": [torch.randn(8, COLS) if r else torch.randn(COLS)
                                   for r in leaf_rows]}

    def step(state):
        k = state["k"]
        state["k"] += 1
        n = rows[k]
        leaves = [(t[:n] if r else t).clone().requires_grad_()
                  for t, r in zip(state["leaves"], leaf_rows, strict=True)]
        cs = _consts(steps[k], n)
        vals = list(leaves)
        for kind, a, c, r in ops:
            x, y = vals[a], cs[c]
            if kind == "mul":
                vals.append(x * y)
            elif kind == "add":
                vals.append(x + y * (r % 3 + 1))
            elif kind == "div":
                vals.append(x / (y.abs() + 1))
            elif kind == "tanh":
                vals.append(torch.tanh(x * y))
            elif kind == "exp_mul":
                vals.append(torch.exp(x.clamp(-2, 2)) * y)
            else:
                vals.append((x * y).sum(0, keepdim=True).expand(n, COLS))
        out = sum(vals[n_leaves:])
        (out.sum() if root is None else out).backward(None if root is None else cs[root])
        return [t.grad for t in leaves]
    return build, step


def check(seed: int, backend: str):
    prog = program(seed)
    build, step = make(prog)
    differential(build, step, steps=4, backend=backend, captures=None)


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_random_aliasing_between_steps_eager_backend(first):
    for seed in range(first, min(first + CHUNK, SEEDS)):
        check(seed, "eager")


# In the foreground Inductor retraces the capture step's own inputs (aliased or not) in this
# process: the case backends/inductor.py's retrace met the bug in (these 8 seeds pass without
# that half of the fix; test_dynamic_shapes' aliasing test fails without it).
@pytest.mark.slow
@pytest.mark.foreground_compile
@pytest.mark.parametrize("first", range(1000, 1000 + max(SEEDS // 4, 4), 4))
def test_random_aliasing_between_steps_inductor(first):
    for seed in range(first, first + 4):
        check(seed, "inductor")
