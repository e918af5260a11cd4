"""Under compiled_bw.enable(), `loss.backward()` no longer calls the function the user (or torch)
put in `torch.autograd._engine_run_backward` (PyTorch test/dynamo/test_activation_checkpointing.py
ActivationCheckpointingNonStrictTracerTests: test_patch_engine_backward_requires_non_strict_tracing
-- AssertionError not raised; test_patch_engine_backward_does_not_leak_backward_tag -- no node
tagged autograd_backward).

torch.compiler._patch_engine_backward() replaces torch.autograd._engine_run_backward (and
torch.autograd.graph._engine_run_backward) with a wrapper that raises outside
_non_strict_tracing_context() and otherwise installs the stack-trace/seq_nr/autograd_backward
tagging hooks.  Eager: Tensor.backward -> torch.autograd.backward -> module global
_engine_run_backward -> the wrapper.  compiled_bw: torch.autograd.backward is api.py `_backward`,
whose fast path (plain real scalar, no gradient/inputs/retain_graph) calls api.py's own
`_engine_run_backward` directly, so whatever is in torch.autograd._engine_run_backward at call
time is skipped.

Cases (each run under torch eager autograd and under compiled_bw.enable(backend=...)):
  1. torch.compiler._patch_engine_backward() outside non-strict tracing: eager raises
     AssertionError ("... must be used under _non_strict_tracing_context()").
  2. A plain user monkeypatch of torch.autograd._engine_run_backward that counts calls.
  3. make_fx under _non_strict_tracing_context() + _patch_engine_backward(): number of traced
     nodes tagged autograd_backward.

Run: PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_dyn2 /tmp/v2.15.0/bin/python \
     repro_patch_engine_backward.py [eager|inductor]
"""
import sys

import torch

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "eager"


def case_patch_engine_backward():
    x = torch.randn(2, 4, requires_grad=True)
    loss = torch.sin(x).sum()
    with torch.compiler._patch_engine_backward():
        try:
            loss.backward()
            return f"no error, x.grad is None: {x.grad is None}"
        except AssertionError as e:
            return f"AssertionError: {str(e).splitlines()[0]}; x.grad is None: {x.grad is None}"


def case_user_monkeypatch():
    calls = []
    orig = torch.autograd._engine_run_backward

    def counting(*args, **kwargs):
        calls.append(1)
        return orig(*args, **kwargs)

    x = torch.randn(3, requires_grad=True)
    torch.autograd._engine_run_backward = counting
    try:
        (x * x).sum().backward()
    finally:
        torch.autograd._engine_run_backward = orig
    return f"user patch called {len(calls)}x, grad {x.grad.tolist() == (2 * x).tolist()}"


def case_make_fx_tags():
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.traceback import preserve_node_meta

    x = torch.randn(2, 4, requires_grad=True)

    def fn(x):
        y = torch.sin(x)
        y.sum().backward()
        return torch.neg(y)

    with torch.compiler._non_strict_tracing_context(), \
            torch.compiler._patch_engine_backward(), preserve_node_meta():
        gm = make_fx(fn)(x)
    n = sum(1 for node in gm.graph.nodes if node.meta.get("autograd_backward", False))
    return f"nodes tagged autograd_backward: {n}"


CASES = [case_patch_engine_backward, case_user_monkeypatch, case_make_fx_tags]

same = True
for case in CASES:
    torch.manual_seed(0)
    ref = case()
    torch.manual_seed(0)
    with compiled_bw.enable(backend=BACKEND):
        got = case()
    ok = ref == got
    same &= ok
    print(f"{case.__name__}:\n  eager:       {ref}\n  compiled_bw: {got}\n  "
          f"{'SAME' if ok else 'DIFFERENT'}")
print(f"torch {torch.__version__}, backend={BACKEND}: {'SAME' if same else 'DIFFERENT'}")
