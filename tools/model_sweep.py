"""Real models from `transformers` and `timm`, a few training steps each, eager autograd vs
compiled_bw, per family, variant and backend (tests/differential.py: every parameter grad and
every hook observation, every step).  A sweep for a torch or library release, not a test: it
prints one line per run (OK with stats and the opaque calls of the last step's graph, DIFF with
the first difference, ERR, SKIP).

Consumes the installed torch, transformers and/or timm (a family whose library is missing is
skipped); produces lines on stdout.

    python tools/model_sweep.py hf all                  # 34 transformers families
    python tools/model_sweep.py timm all                # 25 timm families
    python tools/model_sweep.py hf llama,t5 "eager:plain,ckpt;inductor:plain"

Variants (transformers): plain, bf16 (autocast), hooks (a module full backward hook logging the
first block's grad_output norms, a tensor hook scaling the input embedding's grad), ckpt /
ckpt_reentrant (gradient_checkpointing_enable), ckpt_vary (ckpt over a new sequence length at
every step, VARY_LENGTHS: the line adds the dynamic captures and hits), accumulate (two
backwards per step);
(timm): plain, hooks, ckpt (set_grad_checkpointing), channels_last, droppath (drop_path_rate
and drop_rate 0.1), bf16; (both) compiled (`model.compile()`: eager autograd runs AOTAutograd's
backward, compiled_bw splices it; not in the default plan, ~30 s of compiling per run).
Default plan: every variant but compiled on the eager backend, plain and ckpt on Inductor.
Results of 2026-12-02 (torch 2.15.0): tools/torch_suite/README.md.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]

import torch  # noqa: E402
from differential import differential  # noqa: E402

torch.set_num_threads(1)


class SkipRun(Exception):
    pass


def hf_families():
    import transformers as t

    V, D = 96, 32
    small = {
        "vocab_size": V,
        "hidden_size": D,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    FAM = {
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(**small, num_key_value_heads=1)),
        "mistral": lambda: t.MistralForCausalLM(t.MistralConfig(**small, num_key_value_heads=1)),
        "qwen2": lambda: t.Qwen2ForCausalLM(t.Qwen2Config(**small, num_key_value_heads=1)),
        "qwen3": lambda: t.Qwen3ForCausalLM(t.Qwen3Config(**small, num_key_value_heads=1)),
        "gemma": lambda: t.GemmaForCausalLM(t.GemmaConfig(**small, num_key_value_heads=1, head_dim=16)),
        "gemma2": lambda: t.Gemma2ForCausalLM(t.Gemma2Config(**small, num_key_value_heads=1, head_dim=16)),
        "gemma3": lambda: t.Gemma3ForCausalLM(
            t.Gemma3TextConfig(**small, num_key_value_heads=1, head_dim=16)
        ),
        "phi3": lambda: t.Phi3ForCausalLM(t.Phi3Config(**small, num_key_value_heads=1, pad_token_id=0)),
        "phi": lambda: t.PhiForCausalLM(t.PhiConfig(**small)),
        "olmo": lambda: t.OlmoForCausalLM(t.OlmoConfig(**small, num_key_value_heads=1)),
        "olmo2": lambda: t.Olmo2ForCausalLM(t.Olmo2Config(**small, num_key_value_heads=1)),
        "gpt_neox": lambda: t.GPTNeoXForCausalLM(t.GPTNeoXConfig(**small)),
        "falcon": lambda: t.FalconForCausalLM(
            t.FalconConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=2)
        ),
        "gpt2": lambda: t.GPT2LMHeadModel(
            t.GPT2Config(vocab_size=V, n_embd=D, n_layer=2, n_head=2, n_positions=64)
        ),
        "gpt_neo": lambda: t.GPTNeoForCausalLM(
            t.GPTNeoConfig(
                vocab_size=V,
                hidden_size=D,
                num_layers=2,
                num_heads=2,
                attention_types=[[["global", "local"], 1]],
                max_position_embeddings=64,
            )
        ),
        "gptj": lambda: t.GPTJForCausalLM(
            t.GPTJConfig(vocab_size=V, n_embd=D, n_layer=2, n_head=2, rotary_dim=8, n_positions=64)
        ),
        "opt": lambda: t.OPTForCausalLM(
            t.OPTConfig(
                vocab_size=V,
                hidden_size=D,
                num_hidden_layers=2,
                num_attention_heads=2,
                ffn_dim=64,
                word_embed_proj_dim=D,
                max_position_embeddings=64,
            )
        ),
        "bloom": lambda: t.BloomForCausalLM(t.BloomConfig(vocab_size=V, hidden_size=D, n_layer=2, n_head=2)),
        "stablelm": lambda: t.StableLmForCausalLM(t.StableLmConfig(**small, num_key_value_heads=1)),
        "starcoder2": lambda: t.Starcoder2ForCausalLM(t.Starcoder2Config(**small, num_key_value_heads=1)),
        "cohere": lambda: t.CohereForCausalLM(t.CohereConfig(**small, num_key_value_heads=1)),
        "granite": lambda: t.GraniteForCausalLM(t.GraniteConfig(**small, num_key_value_heads=1)),
        "mixtral": lambda: t.MixtralForCausalLM(
            t.MixtralConfig(
                **small,
                num_key_value_heads=1,
                num_local_experts=4,
                num_experts_per_tok=2,
                output_router_logits=True,
            )
        ),
        "qwen2_moe": lambda: t.Qwen2MoeForCausalLM(
            t.Qwen2MoeConfig(
                **small,
                num_key_value_heads=1,
                num_experts=4,
                num_experts_per_tok=2,
                moe_intermediate_size=32,
                shared_expert_intermediate_size=32,
            )
        ),
        "bert": lambda: t.BertForMaskedLM(t.BertConfig(**small, max_position_embeddings=64)),
        "roberta": lambda: t.RobertaForMaskedLM(
            t.RobertaConfig(**small, max_position_embeddings=64, pad_token_id=1)
        ),
        "distilbert": lambda: t.DistilBertForMaskedLM(
            t.DistilBertConfig(vocab_size=V, dim=D, n_layers=2, n_heads=2, hidden_dim=64)
        ),
        "albert": lambda: t.AlbertForMaskedLM(t.AlbertConfig(**small, embedding_size=16)),
        "electra": lambda: t.ElectraForMaskedLM(t.ElectraConfig(**small, embedding_size=16)),
        "deberta_v2": lambda: t.DebertaV2ForMaskedLM(t.DebertaV2Config(**small)),
        "modernbert": lambda: t.ModernBertForMaskedLM(
            t.ModernBertConfig(
                **small, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2
            )
        ),
        "t5": lambda: t.T5ForConditionalGeneration(
            t.T5Config(
                vocab_size=V, d_model=D, d_kv=16, d_ff=64, num_layers=2, num_heads=2, decoder_start_token_id=0
            )
        ),
        "bart": lambda: t.BartForConditionalGeneration(
            t.BartConfig(
                vocab_size=V,
                d_model=D,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_position_embeddings=64,
            )
        ),
        "mamba": lambda: t.MambaForCausalLM(
            t.MambaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2, state_size=8)
        ),
    }
    ENCDEC = {"t5", "bart"}

    def loss_of(name, m, ids):
        if name in ENCDEC:
            return m(input_ids=ids, labels=torch.randint(3, V, (2, 6))).loss
        return m(input_ids=ids, labels=ids).loss

    return FAM, ENCDEC, V


def timm_families():
    FAM = {
        "resnet10t": {"name": "resnet10t", "size": 32},
        "resnet18": {"name": "resnet18", "size": 32},
        "efficientnet_b0": {"name": "efficientnet_b0", "size": 32},
        "mobilenetv3": {"name": "mobilenetv3_small_050", "size": 32},
        "convnext_atto": {"name": "convnext_atto", "size": 32},
        "regnetx_002": {"name": "regnetx_002", "size": 32},
        "vit_tiny": {"name": "vit_tiny_patch16_224", "size": 32, "kw": {"img_size": 32, "patch_size": 8}},
        "deit_tiny": {"name": "deit_tiny_patch16_224", "size": 32, "kw": {"img_size": 32, "patch_size": 8}},
        "mixer": {
            "name": "mixer_s16_224",
            "size": 32,
            "kw": {"img_size": 32},
        },
        "swin_tiny": {
            "name": "swin_tiny_patch4_window7_224",
            "size": 56,
            "kw": {
                "img_size": 56,
                "window_size": 7,
                "depths": (1, 1, 1, 1),
                "embed_dim": 32,
                "num_heads": (1, 2, 2, 4),
            },
        },
        "levit": {"name": "levit_128s", "size": 64, "kw": {"img_size": 64}},
        "densenet": {"name": "densenet121", "size": 32},
        "ghostnet": {"name": "ghostnet_050", "size": 32},
        "rexnet": {"name": "rexnet_100", "size": 32},
        "dla": {"name": "dla34", "size": 32},
        "poolformer": {"name": "poolformer_s12", "size": 32},
        "edgenext": {"name": "edgenext_xx_small", "size": 64},
        "efficientformer": {"name": "efficientformer_l1", "size": 64},
        "beit": {
            "name": "beit_base_patch16_224",
            "size": 32,
            "kw": {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 64, "num_heads": 2},
        },
        "eva": {
            "name": "eva02_tiny_patch14_224",
            "size": 28,
            "kw": {"img_size": 28, "patch_size": 7, "depth": 2},
        },
        "coatnet": {"name": "coatnet_nano_rw_224", "size": 64, "kw": {"img_size": 64}},
        "maxvit": {"name": "maxvit_nano_rw_256", "size": 64, "kw": {"img_size": 64}},
        "nfnet": {"name": "nf_resnet26", "size": 32},
        "repvgg": {"name": "repvgg_a0", "size": 32},
        "hrnet": {"name": "hrnet_w18_small", "size": 64},
    }
    return FAM


# ckpt_vary's sequence lengths, one per step (checkpoint/recompute.py Note [Symbolic
# recomputation]: 3 captures, 1 dynamic, then dynamic hits, where every block is traced)
VARY_LENGTHS = [12, 17, 23, 9, 30, 14]


def _hf_loss(name, m, ids, encdec, vocab):
    if name in encdec:
        return m(input_ids=ids, labels=torch.randint(3, vocab, (2, 6))).loss
    return m(input_ids=ids, labels=ids).loss


def hf_run(fam, name, variant, encdec, vocab):
    """(build, step) of a transformers family."""

    steps = [0]

    def build():
        m = fam[name]()
        if variant.startswith("ckpt"):
            if not m.supports_gradient_checkpointing:
                raise SkipRun("no gradient checkpointing")
            m.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": variant == "ckpt_reentrant"}
            )
        log = []
        steps[0] = 0
        if variant == "hooks":
            blocks = [b for b in m.modules() if isinstance(b, torch.nn.ModuleList) and len(b) == 2]
            if not blocks:
                raise SkipRun("no 2-block ModuleList to hook")
            blocks[0][0].register_full_backward_hook(
                lambda mod, gin, gout: log.append(
                    [None if g is None else round(g.float().norm().item(), 3) for g in gout]
                )
            )
            m.get_input_embeddings().weight.register_hook(lambda g: g * 1.5)
        if variant == "compiled":
            torch._dynamo.reset()  # each run compiles afresh, below Dynamo's recompile limit
            m.compile()
        return [m.train(), log]

    def step(st):
        m, log = st
        if variant != "accumulate":
            m.zero_grad(set_to_none=True)
        n = VARY_LENGTHS[steps[0] % len(VARY_LENGTHS)] if variant == "ckpt_vary" else 12
        steps[0] += 1
        ids = torch.randint(3, vocab, (2, n))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant == "bf16"):
            loss = _hf_loss(name, m, ids, encdec, vocab)
        loss.backward()
        if variant == "accumulate":
            _hf_loss(name, m, ids, encdec, vocab).backward()
        return [_grads(m, variant), list(log)]

    return build, step


def timm_run(fam, name, variant):
    """(build, step) of a timm family."""
    import timm

    spec = fam[name]

    def build():
        kw = dict(spec.get("kw", {}))
        if variant == "droppath":
            kw.update(drop_path_rate=0.1, drop_rate=0.1)
        m = timm.create_model(spec["name"], pretrained=False, num_classes=10, **kw)
        if variant == "ckpt":
            m.set_grad_checkpointing(True)
        if variant == "channels_last":
            m = m.to(memory_format=torch.channels_last)
        log = []
        if variant == "hooks":
            mods = [x for x in m.modules() if isinstance(x, (torch.nn.Conv2d, torch.nn.Linear))]
            mods[1].register_full_backward_hook(
                lambda mod, gi, go: log.append(round(go[0].float().norm().item(), 3))
            )
            mods[-1].weight.register_hook(lambda g: g * 0.5)
        if variant == "compiled":
            torch._dynamo.reset()  # each run compiles afresh, below Dynamo's recompile limit
            m.compile()
        return [m.train(), log]

    def step(st):
        m, log = st
        m.zero_grad(set_to_none=True)
        x = torch.randn(2, 3, spec["size"], spec["size"])
        if variant == "channels_last":
            x = x.to(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant == "bf16"):
            loss = m(x).float().logsumexp(-1).mean()
        loss.backward()
        return [_grads(m, variant), list(log)]

    return build, step


def _grads(m, variant):
    out = [None if p.grad is None else p.grad.clone() for p in m.parameters()]
    if variant == "bf16":  # Inductor keeps a fused bf16 chain in float32 (one rounding)
        out = [None if g is None else g.to(torch.bfloat16) for g in out]
    return out


def _opaque_count() -> int:
    """Opaque calls in the last graph compiled_bw ran (explain()'s "opaque nodes" line)."""
    import compiled_bw

    for ln in compiled_bw.explain().splitlines():
        if ln.strip().startswith("opaque nodes:"):
            return ln.count("(")
    return 0


PLANS = {
    "hf": "eager:plain,bf16,hooks,ckpt,ckpt_reentrant,accumulate;inductor:plain,ckpt",
    "timm": "eager:plain,hooks,ckpt,channels_last,droppath,bf16;inductor:plain,ckpt",
}


def main(argv) -> int:
    lib = argv[0]
    if lib == "hf":
        fam, encdec, vocab = hf_families()
        make = lambda n, v: hf_run(fam, n, v, encdec, vocab)  # noqa: E731
    else:
        fam = timm_families()
        make = lambda n, v: timm_run(fam, n, v)  # noqa: E731
    names = list(fam) if len(argv) < 2 or argv[1] == "all" else argv[1].split(",")
    plan = (argv[2] if len(argv) > 2 else PLANS[lib]).split(";")
    print("torch", torch.__version__, flush=True)
    bad = 0
    for name in names:
        for part in plan:
            backend, variants = part.split(":")
            for variant in variants.split(","):
                t0 = time.time()
                try:
                    build, step = make(name, variant)
                    n = len(VARY_LENGTHS) if variant == "ckpt_vary" else 3
                    st = differential(
                        build, step, steps=n, backend=backend, captures=None, fallbacks=None, strict=False
                    )
                    dyn = f"dynamic={st.dynamic_captures}/{st.dynamic_hits} " if variant == "ckpt_vary" else ""
                    res = (
                        f"OK captures={st.captures} hits={st.cache_hits} {dyn}"
                        f"fallbacks={st.fallbacks} opaque={_opaque_count()} "
                        f"{sorted(set(st.fallback_reasons))[:3]}"
                    )
                except SkipRun as e:
                    res = f"SKIP {e}"
                except AssertionError as e:
                    bad += 1
                    res = "DIFF " + str(e)[:600].replace("\n", " | ")
                except Exception as e:  # noqa: BLE001 -- a sweep reports and goes on
                    bad += 1
                    res = f"ERR {type(e).__name__}: " + str(e)[:400].replace("\n", " | ")
                print(f"{name:16s} {backend:8s} {variant:15s} {time.time() - t0:6.1f}s {res}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
