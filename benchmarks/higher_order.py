"""Higher-order training steps (`create_graph=True`), a full step per mode, interleaved.

Consumes --model (pinn | gradient_penalty), --steps, --modes; produces a markdown table per
model (`python -m benchmarks` prints it in its full run).  Each step: forward, the grads taken
with create_graph=True, the loss built from them, loss.backward(), Adam's step.  Modes: eager
autograd; torch's compiled autograd (compiled_autograd._enable around every backward of the
step); compiled_bw on the eager backend; compiled_bw on Inductor (background compile; the
create_graph graphs themselves run on the eager backend there: trace/differentiable.py Note
[create_graph]).  Each mode trains its own copy from the same weights on the same batches;
one torch thread, thread CPU time, the median over steps of each mode's time / eager's.
`--device cuda`: the models and batches on the GPU, wall-clock time of each step with the device
synchronized around it, peak memory as torch.cuda.max_memory_allocated over one step.
`--floor` (CPU): instead of the modes, the step's floor for any backward compiler that calls
the same matmul and convolution kernels (floor() below).

pinn              Burgers' equation residual u_t + u u_x - nu u_xx on a 4 x 64 tanh MLP u(x, t),
                  2048 collocation points: grad(create_graph=True) twice per step.
gradient_penalty  a WGAN-GP critic step on a small conv critic (batch 64 of 1 x 28 x 28):
                  the penalty's grad(create_graph=True) through the critic, then backward.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time

import torch
from torch import nn

WARMUP = 3
MODES = ("eager", "torch-ca", "cbw-eager", "cbw-inductor")


def _pinn():
    net = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), *[m for _ in range(3) for m in (
        nn.Linear(64, 64), nn.Tanh())], nn.Linear(64, 1))

    def batch(g):
        return (torch.rand(2048, 2, generator=g),)

    def loss(net, xt):
        xt = xt.clone().requires_grad_()
        u = net(xt)
        du, = torch.autograd.grad(u.sum(), xt, create_graph=True)
        u_x, u_t = du[:, 0], du[:, 1]
        u_xx = torch.autograd.grad(u_x.sum(), xt, create_graph=True)[0][:, 0]
        return (u_t + u.squeeze(1) * u_x - 0.01 / torch.pi * u_xx).pow(2).mean()
    return net, batch, loss


def _gradient_penalty():
    critic = nn.Sequential(
        nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 4, 2, 1),
        nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(32 * 7 * 7, 1))

    def batch(g):
        return (torch.randn(64, 1, 28, 28, generator=g), torch.randn(64, 1, 28, 28, generator=g),
                torch.rand(64, 1, 1, 1, generator=g))

    def loss(critic, real, fake, eps):
        mix = (eps * real + (1 - eps) * fake).requires_grad_()
        g, = torch.autograd.grad(critic(mix).sum(), mix, create_graph=True)
        gp = (g.flatten(1).norm(dim=1) - 1).pow(2).mean()
        return critic(fake).mean() - critic(real).mean() + 10 * gp
    return critic, batch, loss


MODELS = {"pinn": _pinn, "gradient_penalty": _gradient_penalty}


def _context(mode: str):
    from benchmarks.modes import available_modes
    if mode == "eager":
        return None
    return available_modes()[mode]


def _clock(device: str):
    """The step's clock: thread CPU time on the CPU, wall clock with the GPU synchronized."""
    if device == "cpu":
        return time.thread_time

    def clock() -> float:
        torch.cuda.synchronize()
        return time.perf_counter()
    return clock


def run(model: str, steps: int, modes: list, device: str = "cpu") -> dict:
    import compiled_bw
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base, batch, loss_fn = MODELS[model]()
    base.to(device)
    runs = {}
    for mode in modes:
        m = copy.deepcopy(base)
        runs[mode] = (m, torch.optim.Adam(m.parameters(), lr=1e-3))
    g = torch.Generator().manual_seed(1)
    batches = [tuple(t.to(device) for t in batch(g)) for _ in range(steps + WARMUP)]
    clock = _clock(device)
    step_t = {m: [] for m in modes}
    total = dict.fromkeys(modes, 0.0)
    losses = {m: [] for m in modes}
    compiled_bw.reset()
    failed: dict = {}

    def one_step(mode, b):
        m, opt = runs[mode]
        ctx = _context(mode)
        with ctx() if ctx is not None else contextlib.nullcontext():
            loss = loss_fn(m, *b)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for s, b in enumerate(batches):
        for mode in modes:
            if mode in failed:
                continue
            t0 = clock()
            try:
                loss = one_step(mode, b)
            except Exception as e:  # noqa: BLE001 -- a mode that cannot run it is reported
                failed[mode] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                continue
            dt = clock() - t0
            total[mode] += dt
            losses[mode].append(loss.item())
            if s >= WARMUP:
                step_t[mode].append(dt)
        compiled_bw.wait_for_compiles()
    st = compiled_bw.stats()
    ok = [m for m in modes if m not in failed]
    peak = {m: _peak_bytes(lambda m=m: one_step(m, batches[-1]), device) for m in ok}
    ratio = {m: statistics.median(a / b for a, b in zip(step_t[m], step_t["eager"], strict=True))
             for m in ok}
    drift = {m: max(abs(a - b) / max(abs(b), 1e-12) for a, b in
                    zip(losses[m], losses["eager"], strict=True)) for m in ok}
    return {"step": {m: statistics.median(step_t[m]) for m in ok}, "step_ratio": ratio,
            "total": total, "loss_drift": drift, "failed": failed, "peak": peak, "captures": st.captures,
            "fallbacks": st.fallbacks, "reasons": sorted(set(st.fallback_reasons)),
            "device": device}


# The kernels a backward compiler calls as they are (Inductor's extern kernels on the CPU).
EXTERN = ("aten::mm", "aten::addmm", "aten::bmm", "aten::convolution", "aten::convolution_backward")


def _has_ancestor(e, pred) -> bool:
    """Whether a profiler event above e (its cpu_parent chain) satisfies pred."""
    e = e.cpu_parent
    while e is not None:
        if pred(e):
            return True
        e = e.cpu_parent
    return False


def _replay(e):
    """A call of e's op on fresh tensors of its input shapes (contiguous) and its scalars."""
    args = [c if c is not None or not shape else torch.randn(shape)
            for shape, c in zip(e.input_shapes, e.concrete_inputs, strict=True)]
    return lambda: getattr(torch.ops.aten, e.name.split("::")[1])(*args)


def floor(model: str, steps: int = 15) -> dict:
    """What no backward compiler can take off the eager step on this CPU: the forward and the
    loss (user code), Adam, and the matmul and convolution kernels every backward of the step
    runs (the create_graph grads' and the final one's; Inductor calls the same kernels).  One
    eager step profiled with shapes gives those calls (outermost ones only); each step then
    runs eagerly with its phases timed (the time inside torch.autograd.grad counts as backward)
    and the calls are replayed on fresh tensors of their shapes.  Returns the median over
    steps of floor / step (paired, as the modes' ratios) and the phases' medians in ms."""
    from torch.profiler import profile
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net, batch, loss_fn = MODELS[model]()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    b = batch(torch.Generator().manual_seed(1))
    in_grad = [0.0]
    real_grad = torch.autograd.grad

    def timed_grad(*args, **kwargs):
        t0 = time.thread_time()
        try:
            return real_grad(*args, **kwargs)
        finally:
            in_grad[0] += time.thread_time() - t0

    def step() -> tuple:
        in_grad[0] = 0.0
        t0 = time.thread_time()
        loss = loss_fn(net, *b)
        t1 = time.thread_time()
        loss.backward()
        t2 = time.thread_time()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.thread_time()
        return t1 - t0 - in_grad[0], in_grad[0] + t2 - t1, t3 - t2

    torch.autograd.grad = timed_grad
    try:
        for _ in range(WARMUP):
            step()
        with profile(record_shapes=True) as prof:
            step()
        calls = [_replay(e) for e in prof.events() if e.name in EXTERN
                 and _has_ancestor(e, lambda a: a.name.startswith(
                     "autograd::engine::evaluate_function"))
                 and not _has_ancestor(e, lambda a: a.name in EXTERN)]
        phases, kernels = [], []
        for _ in range(steps):
            phases.append(step())
            t0 = time.thread_time()
            for c in calls:
                c()
            kernels.append(time.thread_time() - t0)
    finally:
        torch.autograd.grad = real_grad
    ms = lambda xs: 1e3 * statistics.median(xs)    # noqa: E731
    return {"ratio": statistics.median((f + o + k) / (f + bw + o) for (f, bw, o), k
                                       in zip(phases, kernels, strict=True)),
            "step": ms(sum(p) for p in phases), "forward": ms(p[0] for p in phases),
            "backwards": ms(p[1] for p in phases), "adam": ms(p[2] for p in phases),
            "kernels": ms(kernels), "calls": len(calls)}


def _peak_bytes(step, device: str = "cpu") -> int:
    """Peak live tensor bytes during one step (forward, grads, backward, optimizer), above
    what was live before it (benchmarks/memory.py's method; on a GPU, the allocator's
    peak)."""
    from torch.profiler import ProfilerActivity, profile

    import compiled_bw
    if device != "cpu":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with compiled_bw.profile_compiled():
            step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before

    from .memory import _allocations, _quiet_stderr
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        with compiled_bw.profile_compiled():    # else it runs eager autograd (run.py Note)
            step()
    finally:
        with _quiet_stderr():
            prof.stop()
    events = _allocations(prof)
    return max(total for _, _, total in events)    # 0 where the profile began


def header(model: str, steps: int, r: dict, seconds: float) -> str:
    clock = "1 thread, thread CPU time" if r.get("device", "cpu") == "cpu" else \
        f"{r['device']}, wall clock (device synchronized)"
    return (f"{model} (create_graph=True), Adam; {clock}, medians of {steps} "
            f"steps after {WARMUP} warm-up; compiled_bw: {r['captures']} captures, "
            f"{r['fallbacks']} fallbacks{': ' + '; '.join(r['reasons']) if r['reasons'] else ''};"
            f" run took {seconds:.0f} s.")


def table(r: dict, modes: list) -> list:
    lines = [("| mode | step s | step vs eager | whole run vs eager | peak memory vs eager | "
              "loss drift vs eager |"), "|---|---:|---:|---:|---:|---:|"]
    for m in modes:
        if m in r["failed"]:
            lines.append(f"| {m} | fails: {r['failed'][m]} | | | | |")
            continue
        lines.append(f"| {m} | {r['step'][m]:.4f} | {r['step_ratio'][m]:.2f}x | "
                     f"{r['total'][m] / r['total']['eager']:.2f}x | "
                     f"{r['peak'][m] / r['peak']['eager']:.2f}x | {r['loss_drift'][m]:.1e} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.higher_order",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="pinn")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--floor", action="store_true", help="the step's floor (CPU), not the modes")
    a = ap.parse_args(argv)
    if a.floor:
        f = floor(a.model, a.steps)
        print(f"{a.model}: eager step {f['step']:.2f} ms = forward and loss {f['forward']:.2f} + "
              f"backwards {f['backwards']:.2f} + Adam {f['adam']:.2f}; the backwards' "
              f"{f['calls']} matmul/convolution calls {f['kernels']:.2f}; floor (forward, loss, "
              f"Adam and those calls) {f['ratio']:.2f}x of the step (median of {a.steps}, paired)")
        return 0
    modes = ["eager", *[m for m in a.modes.split(",") if m != "eager"]]
    t0 = time.perf_counter()
    r = run(a.model, a.steps, modes, a.device)
    print(header(a.model, a.steps, r, time.perf_counter() - t0) + "\n")
    print("\n".join(table(r, modes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
