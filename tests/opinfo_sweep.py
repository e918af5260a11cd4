"""OpInfo conformance sweep: every autograd-supporting op of torch's op_db, eager vs compiled_bw.

Consumes `torch.testing._internal.common_methods_invocations.op_db`; for each op, dtype
(float32, float64) and up to `max_samples` sample inputs: runs the forward, then
`torch.autograd.grad` under eager autograd and again (same seed, same inputs) under
`compiled_bw.enable(backend="eager")`, and classifies the op by its worst sample:
  MISMATCH  grads differ (fails the test)       CRASH   we raise where eager does not, or
  FALLBACK  equal, but ran eager (reason kept)          raise differently (fails the test)
  COMPILED  equal and compiled                  SKIP    eager itself raises / no grads
Full sweep and report:  python tests/opinfo_sweep.py            (writes tests/OPINFO.md)
On the Inductor backend (compiled in the backward itself, no background compile; float32, 1
sample per op by default -- Inductor compiles take seconds each):
    COMPILED_BW_OPINFO_BACKEND=inductor python tests/opinfo_sweep.py
writes the "Inductor backend" section of tests/OPINFO.md (the eager report is kept, and the
other way round).  COMPILED_BW_OPINFO_EVERY=N runs every N-th op only, COMPILED_BW_OPINFO_SAMPLES
and COMPILED_BW_OPINFO_DTYPES (e.g. float32,float64) override the defaults, OPINFO_ONLY=a,b
runs named ops (no report written).
CI runs a deterministic subset through tests/test_opinfo.py (every op on the eager backend,
every 24th op on Inductor).
"""
from __future__ import annotations

import collections
import os
import sys
import time

import torch
import torch.utils._pytree as pytree

import compiled_bw

ORDER = ["COMPILED", "SKIP", "FALLBACK", "STRIDE", "CRASH", "MISMATCH"]
TOL = {torch.float32: {"rtol": 1e-4, "atol": 1e-5}, torch.float64: {"rtol": 1e-7, "atol": 1e-7}}


def autograd_ops():
    from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if op.supports_autograd]


def op_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _fresh(sample):
    """The sample's tensors as fresh leaves (aliasing kept), so two runs see equal graphs."""
    memo: dict = {}

    def conv(x):
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                y = x.detach().clone()
                memo[id(x)] = y.requires_grad_(x.requires_grad) if x.is_floating_point() or x.is_complex() else y
            return memo[id(x)]
        return x
    inp = pytree.tree_map(conv, sample.input)
    args = pytree.tree_map(conv, sample.args)
    kwargs = pytree.tree_map(conv, sample.kwargs)
    leaves = [t for t in memo.values() if t.requires_grad]
    return inp, args, kwargs, leaves


def _run(op, sample, seed, ctx, accumulate=False):
    inp, args, kwargs, leaves = _fresh(sample)
    torch.manual_seed(seed)
    out = op(inp, *args, **kwargs)
    outs = [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
    if not outs or not leaves:
        return None
    torch.manual_seed(seed + 1)
    gos = [torch.randn_like(o) for o in outs]
    with ctx():
        if not accumulate:
            return torch.autograd.grad(outs, leaves, gos, allow_unused=True)
        torch.autograd.backward(outs, gos)
    return tuple(t.grad for t in leaves)


def selected_backend() -> str:
    """COMPILED_BW_OPINFO_BACKEND: "eager" (default) or "inductor"."""
    b = os.environ.get("COMPILED_BW_OPINFO_BACKEND", "eager")
    if b not in ("eager", "inductor"):
        raise ValueError(f"COMPILED_BW_OPINFO_BACKEND={b!r}: expected 'eager' or 'inductor'")
    return b


def dynamic_mode() -> bool:
    """COMPILED_BW_OPINFO_DYNAMIC=1: every graph symbolic from its first capture
    (`enable(dynamic=True)`), and an op's samples run one after the other without a reset, so
    a sample whose autograd graph has the structure of an earlier one (another size) is served
    by that sample's dynamic graph: our symbolic copies of formulas (trace/dynamic.py FORMULAS)
    and the shape guards are what is under test.  No report is written."""
    return os.environ.get("COMPILED_BW_OPINFO_DYNAMIC", "") == "1"


class _Enable:
    """Inductor compiles in the backward itself (no background compile): the run under test
    is Inductor's code, not the eager backend that a background compile starts on."""

    def __init__(self, backend: str = "eager", dynamic: bool = False) -> None:
        self.backend = backend
        self.options = {"dynamic": True} if dynamic else {}

    def __call__(self):
        if self.backend == "inductor":
            return compiled_bw.enable(backend="inductor", background_compile=False,
                                      **self.options)
        return compiled_bw.enable(backend="eager", **self.options)


def check_sample(op, sample, seed=0, accumulate=False, backend="eager", dynamic=False):
    """-> (class, detail).  accumulate: compare backward()'s .grad instead of grad()'s result.
    dynamic: dynamic_mode()'s run (no reset: the caller resets per op and dtype)."""
    import contextlib
    try:
        ref = _run(op, sample, seed, contextlib.nullcontext, accumulate)
    except Exception as e:  # noqa: BLE001 -- eager rejects the sample: nothing to compare
        return "SKIP", f"eager raised {type(e).__name__}"
    if ref is None:
        return "SKIP", "no differentiable output"
    if not dynamic:
        compiled_bw.reset()
    live = compiled_bw.stats()       # (one live object: its counts before this sample)
    fallbacks_before, hits_before = live.fallbacks, live.dynamic_hits
    try:
        got = _run(op, sample, seed, _Enable(backend, dynamic), accumulate)
    except Exception as e:  # noqa: BLE001 -- our failure is the finding
        return "CRASH", f"{type(e).__name__}: {str(e)[:200]}"
    st = compiled_bw.stats()
    stride_diff = False
    for r, g in zip(ref, got, strict=True):
        if (r is None) != (g is None):
            return "MISMATCH", f"None vs tensor: eager {r is None}, ours {g is None}"
        if r is None:
            continue
        if r.shape != g.shape or r.dtype != g.dtype or r.layout != g.layout:
            return "MISMATCH", f"shape/dtype/layout {r.shape} {r.dtype} {r.layout} vs {g.shape} {g.dtype} {g.layout}"
        if r.layout != torch.strided:
            r, g = r.to_dense(), g.to_dense()
        try:
            torch.testing.assert_close(g, r, equal_nan=True, **TOL.get(r.dtype, {}))
        except AssertionError as e:
            return "MISMATCH", str(e).splitlines()[0] + " | " + " ".join(str(e).split())[:200]
        if r.stride() != g.stride() and r.numel() > 1:
            stride_diff = True
    if st.fallbacks > fallbacks_before:
        return "FALLBACK", st.fallback_reasons[-1][:160]
    if not dynamic and st.captures != 1:     # (unreset, a dynamic run counts earlier ones)
        return "CRASH", f"captures={st.captures}"
    if stride_diff:
        return "STRIDE", f"{'.grad' if accumulate else 'grad() result'} strides differ from eager's"
    return "COMPILED", "dynamic hit" if dynamic and st.dynamic_hits > hits_before else ""


def check_op(op, dtypes=(torch.float32, torch.float64), max_samples=3, backend="eager",
             backward=True, dynamic=None):
    """-> (worst class, {class: [details]}).  backward: also backward() on the first sample.
    dynamic: dynamic_mode()'s run (None: as the environment says)."""
    found: dict = collections.defaultdict(list)
    dynamic = dynamic_mode() if dynamic is None else dynamic
    for dtype in dtypes:
        if dtype not in op.supported_backward_dtypes("cpu"):
            continue
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:max_samples]
        except Exception as e:  # noqa: BLE001
            found["SKIP"].append(f"sample_inputs raised {type(e).__name__}")
            continue
        if dynamic:
            compiled_bw.reset()
        for k, s in enumerate(samples):
            cls, detail = check_sample(op, s, seed=k, backend=backend, dynamic=dynamic)
            found[cls].append(f"{dtype} sample {k}: {detail}")
            if k == 0 and backward and not dynamic:   # backward(): AccumulateGrad, layout
                cls, detail = check_sample(op, s, seed=k, accumulate=True, backend=backend)
                found[cls].append(f"{dtype} sample {k} backward(): {detail}")
    if not found:
        return "SKIP", {"SKIP": ["no float32/float64 backward support"]}
    worst = max(found, key=ORDER.index)
    # An op that compiled on some samples and only skipped on others counts as compiled.
    real = [c for c in found if c != "SKIP"]
    if real:
        worst = max(real, key=ORDER.index)
    return worst, dict(found)


def subset(ops, every: int = 8):
    """Deterministic CI subset: every `every`-th op by name order."""
    ops = sorted(ops, key=op_id)
    return ops[::every]


INDUCTOR_MARKER = "<!-- opinfo_sweep: inductor section (COMPILED_BW_OPINFO_BACKEND=inductor) -->"


def settings(backend: str) -> tuple:
    """(dtypes, max_samples, backward) for a backend, with the environment's overrides."""
    dt = os.environ.get("COMPILED_BW_OPINFO_DTYPES")
    if dt:
        dtypes = tuple(getattr(torch, d.strip()) for d in dt.split(","))
    else:
        dtypes = (torch.float32,) if backend == "inductor" else (torch.float32, torch.float64)
    samples = int(os.environ.get("COMPILED_BW_OPINFO_SAMPLES", "1" if backend == "inductor" else "3"))
    return dtypes, samples, True


def report(results: dict, seconds: float, backend: str = "eager", every: int = 1) -> str:
    dtypes, samples, _ = settings(backend)
    h = "#" if backend == "eager" else "##"     # the Inductor report is a section of the file
    counts = collections.Counter(c for c, _ in results.values())
    tested = sum(v for k, v in counts.items() if k != "SKIP")
    ok = counts["COMPILED"] + counts["STRIDE"]
    cmd = ("python tests/opinfo_sweep.py" if backend == "eager"
           else "COMPILED_BW_OPINFO_BACKEND=inductor python tests/opinfo_sweep.py")
    if every > 1:
        cmd = f"COMPILED_BW_OPINFO_EVERY={every} " + cmd
    title = "OpInfo conformance sweep" if backend == "eager" else "Inductor backend"
    lines = [
        f"{h} {title}",
        "",
        (f"torch {torch.__version__}, CPU, {' + '.join(str(d).split('.')[-1] for d in dtypes)}, "
         f"up to {samples} sample{'s' if samples > 1 else ''} per dtype, "
         f"`torch.autograd.grad` with random grad_outputs (and `backward()` on the first sample: "
         f"`.grad` values and strides), compiled_bw backend `{backend}`"
         + (" (compiled in the backward, no background compile)" if backend == "inductor" else "")
         + (f", every {every}th op only" if every > 1 else "") + ". "
         f"Generated by `{cmd}` in {seconds:.0f} s on {time.strftime('%Y-%m-%d')}."),
        "",
        f"- ops with autograd: {len(results)}; tested (not skipped): {tested}",
        (f"- compiled and equal: {ok} ({100 * ok / max(tested, 1):.1f}% of tested)"
         f" (of which grad() strides differ: {counts['STRIDE']})"),
        f"- fell back (equal, eager ran): {counts['FALLBACK']}",
        f"- MISMATCH: {counts['MISMATCH']}",
        f"- CRASH: {counts['CRASH']}",
        f"- skipped (eager rejects every sample or no differentiable output): {counts['SKIP']}",
        "",
    ]
    reasons = collections.Counter()
    for c, found in results.values():
        if c == "FALLBACK":
            for d in found["FALLBACK"]:
                reasons[d.split(": ", 1)[1]] += 1
    if reasons:
        lines += [f"{h}# Fallback reasons (samples)", "", "| count | reason |", "|---:|---|"]
        lines += [f"| {n} | {r.replace('|', '/')} |" for r, n in reasons.most_common()]
        lines.append("")
    for cls in ("MISMATCH", "CRASH", "FALLBACK", "STRIDE", "SKIP"):
        names = sorted(k for k, (c, _) in results.items() if c == cls)
        if names:
            lines += [f"{h}# {cls} ({len(names)})", ""]
            for n in names:
                detail = results[n][1].get(cls, [""])[0]
                lines.append(f"- `{n}`: {detail}")
            lines.append("")
    return "\n".join(lines)


def write_report(backend: str, text: str, path: str | None = None) -> None:
    """tests/OPINFO.md: the eager report, then the Inductor section after INDUCTOR_MARKER; each
    backend's run replaces its own part and keeps the other's."""
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "OPINFO.md")
    old = open(path).read() if os.path.exists(path) else ""
    eager_part, _, inductor_part = old.partition(INDUCTOR_MARKER)
    if backend == "eager":
        eager_part = text + "\n"
    else:
        inductor_part = "\n" + text + "\n"
    out = eager_part.rstrip("\n") + "\n"
    if inductor_part.strip():
        out += "\n" + INDUCTOR_MARKER + "\n" + inductor_part.lstrip("\n")
    with open(path, "w") as f:
        f.write(out)


def main() -> int:
    torch.set_num_threads(1)
    backend = selected_backend()
    dtypes, samples, backward = settings(backend)
    every = int(os.environ.get("COMPILED_BW_OPINFO_EVERY", "1"))
    ops = subset(autograd_ops(), every)
    only = os.environ.get("OPINFO_ONLY")
    if only:
        ops = [o for o in autograd_ops() if op_id(o) in only.split(",")]
    t0 = time.time()
    results = {}
    for k, op in enumerate(sorted(ops, key=op_id)):
        t = time.time()
        results[op_id(op)] = check_op(op, dtypes, samples, backend, backward)
        c = results[op_id(op)][0]
        print(f"[{k + 1}/{len(ops)}] {op_id(op)}: {c} ({time.time() - t:.1f} s)", file=sys.stderr,
              flush=True)
    text = report(results, time.time() - t0, backend, every)
    if not only and not dynamic_mode():
        write_report(backend, text)
    if dynamic_mode():
        hits = sum(1 for _, found in results.values() for d in found.get("COMPILED", ())
                   if d.endswith("dynamic hit"))
        print(f"dynamic mode: {hits} samples served by a dynamic graph captured at another size")
    print(text)
    bad = [k for k, (c, _) in results.items() if c in ("MISMATCH", "CRASH")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
