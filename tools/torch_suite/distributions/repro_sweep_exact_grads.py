"""Sweep: every example distribution of PyTorch's test_distributions.py (`_get_examples()`), its
rsample / log_prob / entropy backward run under eager autograd and under
compiled_bw.enable(backend=..., cache_size_limit=100000), grads compared bit for bit (NaN == NaN, None-ness, errors).

test_distributions.py's own checks compare grads with tolerances (gradcheck, scipy references);
this sweep asks the stricter question compiled_bw promises: exactly eager's grads.  It prints one
line per case that differs and SAME/DIFFERENT at the end.

Cases per example (params built from the same seed in both modes):
  rsample   x = d.rsample((2,)); (x * w).sum().backward()       (only where has_rsample)
  log_prob  s = d.sample() (requires_grad_ when continuous); d.log_prob(s).sum().backward()
  entropy   d.entropy().sum().backward()                        (where implemented and differentiable)
Grads are read from every leaf reachable from the loss (AccumulateGrad nodes, in graph order).

Run: PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_dist /tmp/v2.15.0/bin/python \
     repro_sweep_exact_grads.py [eager|inductor] [rsample,log_prob,entropy]
"""
import os
import sys

import torch

import compiled_bw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributions import _get_examples

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "eager"
KINDS = sys.argv[2].split(",") if len(sys.argv) > 2 else ("rsample", "log_prob", "entropy")
torch.distributions.Distribution.set_default_validate_args(True)


def leaves(t):
    out, seen, stack = [], set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, "variable"):
            out.append(fn.variable)
        stack.extend(n for n, _ in reversed(fn.next_functions))
    return out


def run_case(kind, Dist, idx, seed):
    torch.manual_seed(seed)  # fresh parameter tensors (leaves), the same values in both modes
    params = next(e.params for e in _get_examples() if e.Dist is Dist)
    d = Dist(**params[idx])
    torch.manual_seed(seed + 1)
    try:
        if kind == "rsample":
            if not d.has_rsample:
                return None
            x = d.rsample((2,))
            if not x.requires_grad:
                return None
            w = torch.linspace(0.5, 1.5, x.numel()).reshape(x.shape).to(x.dtype)
            loss = (x * w).sum()
        elif kind == "log_prob":
            s = d.sample()
            if not d.support.is_discrete:
                s = s.detach().requires_grad_()
            loss = d.log_prob(s).sum()
            if not loss.requires_grad:
                return None
        else:
            try:
                e = d.entropy()
            except NotImplementedError:
                return None
            if not e.requires_grad:
                return None
            loss = e.sum()
        ls = leaves(loss)
        loss.backward()
        return [(tuple(v.shape), None if v.grad is None else v.grad.clone()) for v in ls]
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def same(a, b):
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return a == b
    if len(a) != len(b):
        return False
    for (sa, ga), (sb, gb) in zip(a, b, strict=False):
        if sa != sb or (ga is None) != (gb is None):
            return False
        if ga is not None and not (ga.dtype == gb.dtype and ga.shape == gb.shape and
                                   torch.equal(torch.nan_to_num(ga, nan=1234.5),
                                               torch.nan_to_num(gb, nan=1234.5)) and
                                   torch.equal(ga.isnan(), gb.isnan())):
            return False
    return True


ndiff = ncases = 0
torch.manual_seed(0)
for n, (Dist, params) in enumerate(_get_examples()):
    for idx in range(len(params)):
        for kind in KINDS:
            seed = 1000 * n + 10 * idx
            ref = run_case(kind, Dist, idx, seed)
            nfb = len(compiled_bw.stats().fallback_reasons)
            with compiled_bw.enable(backend=BACKEND, cache_size_limit=100000):
                got = run_case(kind, Dist, idx, seed)
            for r in compiled_bw.stats().fallback_reasons[nfb:]:
                print(f"(fallback) {Dist.__name__} example {idx} {kind}: {r[:400]}")
            if ref is None and got is None:
                continue
            ncases += 1
            if isinstance(ref, str):
                print(f"(both modes error?) {Dist.__name__} example {idx} {kind}: eager {ref[:100]!r}")
            if not same(ref, got):
                ndiff += 1
                def maxdiff(a, b):
                    if isinstance(a, (str, type(None))) or isinstance(b, (str, type(None))):
                        return ""
                    rel = 0.0
                    for (_, ga), (_, gb) in zip(a, b, strict=False):
                        if ga is None or gb is None or ga.shape != gb.shape:
                            return ""
                        fin = ga.isfinite() & gb.isfinite()
                        d = (ga - gb).abs()[fin]
                        scale = ga.abs()[fin].max() if fin.any() else torch.tensor(1.0)
                        if d.numel():
                            rel = max(rel, float(d.max() / max(float(scale), 1e-30)))
                        if not torch.equal(fin, gb.isfinite() & ga.isfinite()) or \
                                not torch.equal(ga[~fin].nan_to_num(1234.5), gb[~fin].nan_to_num(1234.5)):
                            return " (non-finite entries differ)"
                    return f" (max |diff| / max |grad| = {rel:.3g})"
                print(f"DIFFERENT {Dist.__name__} example {idx} {kind}{maxdiff(ref, got)}")

                def show(r):
                    if isinstance(r, (str, type(None))):
                        return repr(r)
                    return [None if g is None else g.flatten()[:4].tolist() for _, g in r]
                print(f"  eager:       {show(ref)}"
                      f"\n  compiled_bw: {show(got)}")
st = compiled_bw.stats()
print(f"compiled_bw: captures={st.captures} cache_hits={st.cache_hits} fallbacks={st.fallbacks} "
      f"{sorted({r[:90] for r in st.fallback_reasons})}")
print(f"torch {torch.__version__}, backend={BACKEND}: {ncases} cases, {ndiff} different: "
      f"{'SAME' if ndiff == 0 else 'DIFFERENT'}")
