"""`python -m benchmarks.hf_step`: a full training step of a Hugging Face model, per mode.

Consumes --model (llama | gpt2 | mixtral: 4 layers, d=256, random init; mixtral: 4 experts,
top-2), --ckpt (Hugging Face gradient checkpointing, non-reentrant), --vary (a sequence
length drawn from 32-128 per step, as mixtral always has), --steps, --modes,
--optim (sgd: one SGD step after the backward; adamw-in-backward: PyTorch's "fuse the
optimizer step into the backward" recipe, a per-parameter AdamW stepped by each parameter's
post-accumulate-grad hook); produces a markdown table on stdout: per mode, the median step
(forward + backward + optimizer), the
medians over steps of its step and backward time over eager's on the same batch, and the
whole run's time (compiles included; this thread's CPU: compiled_bw's background compiles run
in its worker process and are not in it).
Every mode trains its own copy of the same model on the same batches (8 x 128 tokens; for
mixtral 8 x a length drawn from 32-128 per step, the same for every mode: the tokens each
expert gets, and so the sizes in its backward, change with every step), the
modes interleaved step by step in one process, one torch thread, timed in thread CPU time
(other work on the machine shifts it less than wall clock); 3 warm-up steps are left out.
Modes: eager; cbw (compiled_bw, Inductor); tc (`torch.compile(model)`); tc+cbw (the
compiled model's backward under compiled_bw: its AOT backward spliced); tc+ca
(`torch.compile(model)` with torch's compiled autograd).  Needs the `models` extra.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time

MODES = ("eager", "cbw", "tc", "tc+cbw", "tc+ca")
WARMUP = 3


def _model(name: str, ckpt: bool):
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    if name == "llama":
        cfg = transformers.LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=688,
                                       num_hidden_layers=4, num_attention_heads=4,
                                       num_key_value_heads=4, max_position_embeddings=256)
        m = transformers.LlamaForCausalLM(cfg)
    elif name == "mixtral":
        cfg = transformers.MixtralConfig(vocab_size=2048, hidden_size=256, intermediate_size=344,
                                         num_hidden_layers=4, num_attention_heads=4,
                                         num_key_value_heads=4, max_position_embeddings=256,
                                         num_local_experts=4, num_experts_per_tok=2)
        m = transformers.MixtralForCausalLM(cfg)
    else:
        cfg = transformers.GPT2Config(vocab_size=2048, n_embd=256, n_layer=4, n_head=4,
                                      n_positions=256)
        m = transformers.GPT2LMHeadModel(cfg)
    if ckpt:
        kw = {"use_reentrant": False}
        if hasattr(m, "activation_checkpointing_enable"):   # transformers 5.x's name
            m.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
        else:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    return m.train()


def _backward_context(mode: str):
    import compiled_bw
    if "cbw" in mode:
        return compiled_bw.enable(backend="inductor")
    if mode == "tc+ca":
        from benchmarks.modes import available_modes
        return available_modes()["torch-ca"]()
    return contextlib.nullcontext()


OPTIMS = ("sgd", "adamw-in-backward")


def _optimizer(m, optim: str):
    """A step() taking the optimizer step after the backward (none where the backward took it:
    the post-accumulate-grad hooks of PyTorch's optimizer-in-backward recipe)."""
    import torch
    if optim == "sgd":
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)

        def step():
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    per_param = {p: torch.optim.AdamW([p], lr=1e-3, foreach=False) for p in m.parameters()}

    def hook(p):
        per_param[p].step()
        per_param[p].zero_grad(set_to_none=True)
    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    return lambda: None


def run(model: str, ckpt: bool, steps: int, modes: list, optim: str = "sgd",
        vary: bool = False) -> dict:
    import torch

    import compiled_bw
    torch.set_num_threads(1)
    # Each compiled mode compiles its own copy of the model: without this the first one's
    # AOTAutograd cache entries serve the others (their whole-run column would not count the
    # compile), and torch's compiled autograd fails on a dynamic-shape backward loaded from
    # that cache ("aten::full() Expected a value of type 'List[int]' ... Proxy(primals_1)",
    # torch 2.13: FX cannot re-trace the cached module; compiled_bw rebuilds it itself,
    # torchapi/dynamo.py Note [AOT backward modules from the cache]).
    import torch._functorch.config
    torch._functorch.config.enable_autograd_cache = False
    base = _model(model, ckpt)
    runs = {}
    for mode in modes:
        m = copy.deepcopy(base)
        runs[mode] = (torch.compile(m) if mode.startswith("tc") else m, _optimizer(m, optim))
    g = torch.Generator().manual_seed(1)
    lengths = [128] * (steps + WARMUP)
    if model == "mixtral" or vary:
        lengths = torch.randint(32, 129, (steps + WARMUP,), generator=g).tolist()
    batches = [torch.randint(0, 2048, (8, n), generator=g) for n in lengths]
    step_t = {m: [] for m in modes}
    total = dict.fromkeys(modes, 0.0)
    bw_t = {m: [] for m in modes}
    compiled_bw.reset()
    for s, ids in enumerate(batches):
        for mode in modes:
            m, opt = runs[mode]
            t0 = time.thread_time()
            loss = m(input_ids=ids, labels=ids).loss
            t1 = time.thread_time()
            with _backward_context(mode):
                loss.backward()
            t2 = time.thread_time()
            opt()
            t3 = time.thread_time()
            total[mode] += t3 - t0
            if s >= WARMUP:
                step_t[mode].append(t3 - t0)
                bw_t[mode].append(t2 - t1)
        # compiled_bw's background compiles (a dynamic graph's takes ~30 s of the worker's
        # CPU here) land before the next step: the medians are of compiled code, as for
        # torch.compile, which compiles in the step (outside this thread's time: the worker's)
        compiled_bw.wait_for_compiles()
    st = compiled_bw.stats()
    def paired(t: dict) -> dict:
        """Per mode, the median over steps of its time / eager's on the same batch (the
        lengths vary for mixtral: a median of times would compare different steps)."""
        return {m: statistics.median(a / b for a, b in zip(v, t["eager"], strict=True))
                for m, v in t.items()}
    return {"step": {m: statistics.median(v) for m, v in step_t.items()},
            "step_ratio": paired(step_t), "backward_ratio": paired(bw_t),
            "total": total, "fallbacks": st.fallbacks, "captures": st.captures,
            "opaque": sum("opaque call" in n for n in st.notes)}


# `python -m benchmarks --models ...` names for the rows of this harness: (model, ckpt)
BENCH_MODELS = {"hf_gpt2": ("gpt2", False), "hf_llama": ("llama", False),
                "hf_llama_ckpt": ("llama", True), "hf_mixtral": ("mixtral", False)}


def header(model: str, ckpt: bool, steps: int, r: dict, seconds: float,
           optim: str = "sgd", vary: bool = False) -> str:
    batch = "8x(32-128)" if model == "mixtral" or vary else "8x128"
    opt = "SGD" if optim == "sgd" else "AdamW stepped in post-accumulate-grad hooks"
    return (f"{model}{' (gradient checkpointing)' if ckpt else ''}, 4 layers, d=256, batch "
            f"{batch}, {opt}; 1 thread, thread CPU time, medians of {steps} steps after {WARMUP} "
            f"warm-up; compiled_bw: {r['captures']} captures, {r['fallbacks']} fallbacks, "
            f"{r['opaque']} opaque-call notes; run took {seconds:.0f} s.")


def table(r: dict, modes: list) -> list:
    """run()'s result as markdown rows."""
    lines = ["| mode | step s | step vs eager | backward vs eager | whole run vs eager |",
             "|---|---:|---:|---:|---:|"]
    for m in modes:
        lines.append(f"| {m} | {r['step'][m]:.3f} | {r['step_ratio'][m]:.2f}x | "
                     f"{r['backward_ratio'][m]:.2f}x | {r['total'][m] / r['total']['eager']:.2f}x |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hf_step",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("llama", "gpt2", "mixtral"), default="llama")
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--optim", choices=OPTIMS, default="sgd")
    ap.add_argument("--vary", action="store_true",
                    help="a sequence length drawn from 32-128 per step (always for mixtral)")
    a = ap.parse_args(argv)
    modes = a.modes.split(",")
    if modes[0] != "eager":
        modes = ["eager", *[m for m in modes if m != "eager"]]
    t0 = time.perf_counter()
    r = run(a.model, a.ckpt, a.steps, modes, a.optim, a.vary)
    print(header(a.model, a.ckpt, a.steps, r, time.perf_counter() - t0, a.optim, a.vary) + "\n")
    print("\n".join(table(r, modes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
