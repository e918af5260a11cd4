"""enable(verify=...): a graph's first runs checked against eager autograd.

Consumes one backward()/grad() call that runtime/run.py is about to run on a Compiled entry
(the engine's arguments, the walk, the entry, a thunk that runs it); produces that call's
result -- eager's whenever the two differ -- and, on a difference, drops the graph (its key
becomes a Fallback naming the first differing grad) and writes a repro (runtime/repro.py).

Note [Verify]
With enable(verify=True) (or COMPILED_BW_VERIFY=1; an int N, or COMPILED_BW_VERIFY=N, sets the
count), each graph's first N runs (default 2) with each callable it is run with -- the eager
backend's while Inductor compiles in the background, then Inductor's -- are checked:
1. The same backward first runs through eager autograd's engine, on the same autograd graph
   (retain_graph=True, so the saved tensors stay for the compiled run).  backward(): the
   `.grad` of every leaf the walk reached is copied before and restored after (eager may have
   stolen a grad or accumulated into the old `.grad` in place), and what eager left there is
   kept as the reference.  grad(): the returned grads are.  The RNG state (CPU, and CUDA once
   initialised) is put back, so the compiled run draws what eager drew.
2. The compiled graph runs as usual, and every reference grad is compared with ours: `None`-
   ness, dtype, shape, strides and values within TOL of its dtype.
3. Equal: the call's result is the compiled run's.  Different: the key is stored as a Fallback
   ("verify: <the first difference> ...") so every later call of that graph runs eager
   autograd, its file leaves COMPILED_BW_CACHE_DIR (runtime/warm.py), a repro script is
   written (COMPILED_BW_REPRO_DIR, default <tmp>/compiled_bw_repros; with the step's real
   inputs beside it under COMPILED_BW_REPRO_INPUTS=full, which keeps them alive through the run),
   a warning names both, and the user gets eager's grads (backward(): each leaf's `.grad` is
   set to eager's values; a tensor of its own, where eager may have kept the old `.grad`
   object).  stats(): verified_runs, verify_mismatches.
Eager's run raising: that is eager's behaviour, so its error propagates and the compiled run is
skipped (the autograd graph then stays alive, as retain_graph=True keeps it).
Only graphs that run no user code are verified: no opaque call (hook, custom Function,
untraceable node), no delivery point, no hook anywhere, no mutated input, no tensor subclass, not create_graph,
no backward of a torch.compile'd forward (AOTAutograd's, with donated buffers, refuses to run
twice); eager's run of anything else would run user code twice (a post-accumulate-grad optimizer
step, a counter in a hook).  enable(verify_user_code=True) (COMPILED_BW_VERIFY_USER_CODE=1)
verifies graphs with hooks, custom Functions run as themselves and delivery points too: their
user code then runs twice per verified backward (a counter in a hook counts two), which the
user accepts by asking.  Never, even then: graphs with a hook on a leaf (its AccumulateGrad's:
tensor hooks, post-accumulate-grad hooks, DDP/FSDP reducers -- an optimizer step or a
reduction must not run twice), with retain_grad() (a second run accumulates into the retained
.grad), or calling saved-tensor unpack hooks.  A custom Function traced into the graph is verified: its backward
runs once, in eager's run (the graph holds its aten ops, not its Python).  A skipped graph gets a note once.  A checkpointed region that is traced
is verified: eager's run recomputes its forward once more (a side effect in that forward, such
as a BatchNorm's running statistics in a checkpointed region, happens twice).
Cost of a verified run: eager's backward + the compiled one + the copies (the benchmark models:
see RESULTS.md); nothing once a graph's N runs are done.
"""
from __future__ import annotations

import os
import warnings

import torch

from ..calls.opaque import USER_CALL_KINDS
from ..graph.nodes import AOT
from ..torchapi import autograd as torch_autograd
from . import repro, warm
from .cache import Fallback
from .compare import TOL, differs

DEFAULT_RUNS = 2
# values within rtol/atol of eager's, per dtype (other dtypes: equal)
def runs_from(verify) -> int:
    """enable(verify=...) as a run count: None reads COMPILED_BW_VERIFY (unset/0: off; 1 or
    true: DEFAULT_RUNS; N > 1: N), True is DEFAULT_RUNS, False 0, an int itself."""
    if verify is None:
        env = os.environ.get("COMPILED_BW_VERIFY", "").strip().lower()
        if env in ("", "0", "false", "no", "off"):
            return 0
        if env in ("1", "true", "yes", "on"):
            return DEFAULT_RUNS
        try:
            return max(0, int(env))
        except ValueError:
            raise ValueError(f"COMPILED_BW_VERIFY={env!r}: use 0, 1 or a run count") from None
    if verify is True:
        return DEFAULT_RUNS
    if verify is False:
        return 0
    if isinstance(verify, int) and verify >= 0:
        return verify
    raise ValueError(f"enable(verify=...) takes True, False or a run count, not {verify!r}")


def unverifiable(entry, w, opts, user_code: bool = False) -> str | None:
    """Why eager's reference run of this graph would run user code twice, or code that must not
    run twice (Note [Verify]); None: it would not.  user_code: enable(verify_user_code=True)."""
    plan = entry.plan
    if opts.create_graph:
        return "a create_graph=True backward"
    if user_code:
        why = _refused_user_code(plan, w, opts)
        if why is not None:
            return why
    elif plan.opaque_sites:
        return (f"user code runs inside ({', '.join(plan.opaque_names) or 'opaque calls'}); "
                "enable(verify_user_code=True) verifies it, running that code twice")
    elif plan.delivers or w.hooks:
        return "hooks observe it; enable(verify_user_code=True) verifies it, running them twice"
    if plan.mutated_inputs:
        return "it mutates an input"
    if plan.in_layouts is not None or plan.out_layouts is not None:
        return "tensor subclasses among its inputs or outputs"
    if any(w.kinds[i].how == AOT for i in plan.executed):
        # AOTAutograd's backward with donated buffers raises under retain_graph=True
        return "it splices torch.compile'd backwards, which run only once"
    return None


def _refused_user_code(plan, w, opts) -> str | None:
    """What never runs twice, even with verify_user_code (Note [Verify])."""
    if w.leaf_observed() is not False:    # (None: unknown, without the C++ walk)
        return ("hooks on leaves (an optimizer step or a reduction across ranks there must "
                "not run twice)")
    if any(getattr(h, "retains", None) for h in w.hooks.values()):
        return "retain_grad() (a second run would accumulate into the retained .grad)"
    odd = sorted({s.name for s in plan.opaque_sites if s.kind not in USER_CALL_KINDS})
    if odd:
        return f"saved-tensor hooks' unpack calls ({', '.join(odd)})"
    return None


def due(state, entry, w, opts) -> bool:
    """Whether this run of `entry` is verified (counts per callable: Note [Verify])."""
    if entry.verify_fn is not entry.fn:
        entry.verify_fn, entry.verify_left = entry.fn, state.verify
    skip = entry.verify_skip
    if skip is None or skip[0] != state.verify_user_code:
        why = unverifiable(entry, w, opts, state.verify_user_code) or ""
        entry.verify_skip = skip = (state.verify_user_code, why)
        if why:
            state.note(f"verify: a graph is not verified: {why}")
    return entry.verify_left > 0 and not skip[1]


def checked(state, entry, w, opts, t_outputs, grad_tensors, inputs, key, root_key, run):
    """Run the call with eager's reference first and compare (Note [Verify])."""
    entry.verify_left -= 1
    leaves = list(w.leaves.values()) if opts.accumulate else []
    olds = [v.grad for v in leaves]
    before = _Values(olds)                  # eager may accumulate into them in place
    versions = [None if g is None else g._version for g in olds]
    rng = _rng_state()
    ref = torch_autograd.ENGINE.run_backward(
        tuple(t_outputs), tuple(grad_tensors), True, False, tuple(inputs), opts.allow_unused,
        opts.accumulate)
    if opts.accumulate:
        news = [v.grad for v in leaves]
        ref = _Values(news, only=[g is not None and g is old
                                  for g, old in zip(news, olds, strict=True)])
        for i, (v, g) in enumerate(zip(leaves, olds, strict=True)):
            if g is not None and g._version != versions[i]:
                with torch.no_grad():
                    g.copy_(before.value(i))
            v.grad = g
    else:
        ref = _Values(list(ref), only=[False] * len(ref))
    _set_rng_state(rng)
    real = ([g for g in grad_tensors if g is not None] + list(w.saved)) if repro.full() else None
    result = run()
    ours = [v.grad for v in leaves] if opts.accumulate else list(result)
    what = "the .grad of leaf" if opts.accumulate else "grad() result"
    state.stats.verified_runs += 1
    diff = ref.first_difference(ours, what)
    if diff is None:
        return result
    state.stats.verify_mismatches += 1
    path = repro.write(entry.graph_module(), state.backend, f"verify: {diff}", real)
    reason = (f"verify: compiled, {diff}; this graph runs eager autograd from now on "
              f"(repro: {path or 'not written, see the log'})")
    state.cache.put(root_key, key, Fallback(reason))
    if entry.warm is not None:      # nor does a later process load it (runtime/warm.py)
        warm.forget(entry)
    state.note(reason)
    warnings.warn(f"compiled_bw {reason}", stacklevel=6)
    if not opts.accumulate:
        return tuple(ref.tensor(i) for i in range(len(ours)))
    for i, v in enumerate(leaves):
        v.grad = ref.tensor(i)
    return result


class _Values:
    """Grads as eager left them: the tensors themselves, or (where `only[i]`, default all: it
    may change before the comparison) a copy of their values, made with one torch.cat per
    dtype and device -- a backward of many small leaves would otherwise spend more on copies
    than on itself."""

    def __init__(self, ts: list, only: list | None = None) -> None:
        self.ts = list(ts)
        self.copied: dict = {}      # i -> (group key, offset in its flat copy)
        self.flat: dict = {}
        groups: dict = {}
        for i, t in enumerate(ts):
            if t is None or (only is not None and not only[i]):
                continue
            if t.layout != torch.strided or type(t) is not torch.Tensor:
                self.ts[i] = t.clone()
                continue
            groups.setdefault((t.dtype, t.device), []).append(i)
        with torch.no_grad():
            for k, idx in groups.items():
                self.flat[k] = torch.cat([ts[i].reshape(-1) for i in idx])
                off = 0
                for i in idx:
                    self.copied[i] = (k, off)
                    off += ts[i].numel()

    def value(self, i: int) -> torch.Tensor:
        """Grad i's values (copied: a contiguous view of the copy, of its shape)."""
        if i not in self.copied:
            return self.ts[i]
        k, off = self.copied[i]
        return self.flat[k][off:off + self.ts[i].numel()].view(self.ts[i].shape)

    def tensor(self, i: int) -> torch.Tensor | None:
        """Grad i as a tensor of its own, with eager's strides."""
        if i not in self.copied:
            return self.ts[i]
        t = self.ts[i]
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        with torch.no_grad():
            return out.copy_(self.value(i))

    def first_difference(self, ours: list, what: str) -> str | None:
        """The first grad of `ours` that differs from these, in words; None: all equal (one
        allclose per dtype and device when only values could differ)."""
        if len(ours) == len(self.ts) and self._close_together(ours):
            return None
        for i, (r, o) in enumerate(zip(self.ts, ours, strict=True)):
            d = differs(None if r is None else self.value(i), o, f"{what} {i}", meta=r)
            if d is not None:
                return d
        return None

    def _close_together(self, ours: list) -> bool:
        groups: dict = {}
        for i, (r, o) in enumerate(zip(self.ts, ours, strict=True)):
            if (r is None) != (o is None):
                return False
            if r is None:
                continue
            if type(r) is not torch.Tensor or type(o) is not torch.Tensor or \
                    r.layout != torch.strided or o.layout != torch.strided or \
                    not (r.dtype.is_floating_point or r.dtype.is_complex) or \
                    (r.dtype, r.shape, r.stride(), r.device) != \
                    (o.dtype, o.shape, o.stride(), o.device):
                return False
            # a copied grad: its group's flat copy holds it, in index order
            g = groups.setdefault((i in self.copied, r.dtype, r.device), ([], []))
            if i not in self.copied:
                g[0].append(r.reshape(-1))
            g[1].append(o.reshape(-1))
        with torch.no_grad():
            for (copied, dt, dev), (rs, os_) in groups.items():
                rtol, atol = TOL.get(dt, (0.0, 0.0))
                ref = self.flat[(dt, dev)] if copied else torch.cat(rs)
                if not torch.allclose(torch.cat(os_), ref, rtol=rtol, atol=atol,
                                      equal_nan=True):
                    return False
        return True


def _rng_state() -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])
