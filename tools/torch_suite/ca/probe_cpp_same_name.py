"""Probe: test_compiled_autograd.py's test_autograd_cpp_node_* tests build several C++ extensions
that each define `struct CustomOpAutogradFunction` (same C++ name, different libraries).  Under
compiled_bw some of them captured nothing and only hit graphs captured by an earlier test
(e.g. test_autograd_cpp_node_saved_basic_is_traceable_True: captures=0, cache_hits=5) -- harmless
there, as the backwards are the same formulas.  This checks that two same-named C++ Functions
with *different* backwards do not share a graph: eager vs compiled_bw grads.

Usage: PYTHONPATH=<repo> python probe_cpp_same_name.py [eager|inductor]
"""
import sys
import tempfile

import torch
from torch.utils.cpp_extension import load_inline

import compiled_bw

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "eager"

SRC = """
struct CustomOpAutogradFunction : public torch::autograd::Function<CustomOpAutogradFunction> {
  static constexpr bool is_traceable = TRACEABLE;
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    return {grad_output[0] * FACTOR};
  }
};
torch::Tensor fn(torch::Tensor x) { return CustomOpAutogradFunction::apply(x); }
"""


def build(name, factor, traceable):
    src = SRC.replace("FACTOR", str(factor)).replace("TRACEABLE", traceable)
    return load_inline(name=name, cpp_sources=src, functions="fn",
                       build_directory=tempfile.mkdtemp(), verbose=False)


def grad(mod):
    x = torch.ones(3, 3, requires_grad=True)
    mod.fn(x).sum().backward()
    return x.grad[0, 0].item()


if __name__ == "__main__":
    traceable = sys.argv[2] if len(sys.argv) > 2 else "false"
    a = build(f"cbw_probe_same_name_a_{traceable}", 2, traceable)
    b = build(f"cbw_probe_same_name_b_{traceable}", 3, traceable)
    eager = [grad(m) for m in (a, b, a, b)]
    with compiled_bw.enable(backend=BACKEND):
        ours = [grad(m) for m in (a, b, a, b)]
    s = compiled_bw.stats()
    print(f"is_traceable={traceable} backend={BACKEND}\n  eager       {eager}\n"
          f"  compiled_bw {ours}\n  {'SAME' if eager == ours else 'DIFFERENT'}  "
          f"captures={s.captures} hits={s.cache_hits} fallbacks={s.fallbacks} "
          f"notes={[str(n)[:80] for n in s.notes]}")
