"""Real models people train, from Hugging Face `transformers` (the `models` extra): small
random-init GPT-2, Llama, BERT, T5, ViT and Mixtral (mixture of experts), trained a few steps under compiled_bw and compared
with eager autograd -- every parameter grad and every hook observation, every step.

Variants: plain; bf16 autocast; gradient accumulation (two backwards per step, no zero_grad
between); zero_grad(set_to_none=False); module full backward hooks (one returning a new
grad_input) plus a tensor hook on the hidden states; Hugging Face gradient checkpointing
(`gradient_checkpointing_enable`, non-reentrant and reentrant) with dropout 0.1, so the
recomputation must replay the forward's dropout masks.  Eager backend for all,
Inductor for the plain, hook and non-reentrant checkpointing variants.  Skipped cleanly without `transformers`.
Also with the forward `torch.compile`d (Inductor), its AOT backward spliced into our graph,
from a fresh AOTAutograd compile (cold) and from AOTAutograd's cache (warm: a user's second run
of a script).
(`timm` is not here: it requires torchvision, whose PyPI wheel does not load beside the CPU
build of torch this project pins.)
"""
import pytest
import torch
from aot_cache import aot_cache, assert_aot_cache, warm_aot_cache
from differential import differential

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

transformers = pytest.importorskip("transformers")

V, D = 96, 32


def _cfg(name):
    small = {"vocab_size": V, "hidden_size": D, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64}
    if name == "gpt2":
        return transformers.GPT2Config(vocab_size=V, n_embd=D, n_layer=2, n_head=2, n_positions=64,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if name == "llama":
        return transformers.LlamaConfig(**small, num_key_value_heads=1, max_position_embeddings=64)
    if name == "bert":
        return transformers.BertConfig(**small, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0, max_position_embeddings=64)
    if name == "t5":
        return transformers.T5Config(vocab_size=V, d_model=D, d_kv=16, d_ff=64, num_layers=2,
                                     num_heads=2, dropout_rate=0.0, decoder_start_token_id=0)
    if name == "vit":
        return transformers.ViTConfig(hidden_size=D, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, image_size=16, patch_size=4,
                                      num_channels=3, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    if name == "mixtral":   # a mixture of experts: top-2 routing, experts via torch._grouped_mm
        return transformers.MixtralConfig(**small, num_key_value_heads=1, num_local_experts=4,
                                          num_experts_per_tok=2, output_router_logits=True)
    raise KeyError(name)


def _model(name, layers=2):
    cfg = _cfg(name)
    for attr in ("n_layer", "num_hidden_layers"):   # gpt2 / the others (not t5)
        if hasattr(cfg, attr) and layers != 2:
            setattr(cfg, attr, layers)
    cls = {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
           "bert": transformers.BertForMaskedLM, "t5": transformers.T5ForConditionalGeneration,
           "vit": transformers.ViTForImageClassification,
           "mixtral": transformers.MixtralForCausalLM}[name]
    return cls(cfg).train()


def _loss(name, m):
    if name == "vit":
        return m(pixel_values=torch.randn(2, 3, 16, 16)).logits.float().pow(2).mean()
    ids = torch.randint(0, V, (2, 12))
    if name == "t5":
        return m(input_ids=ids, labels=torch.randint(0, V, (2, 6))).loss
    if name == "bert":
        return m(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
    return m(input_ids=ids, labels=ids).loss


def _blocks(m):
    """The transformer blocks (module lists named layer/layers/h/block)."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == 2:
            return list(mod)
    raise AssertionError("no block list found")


_DROPOUTS = ("resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout_prob",
             "attention_probs_dropout_prob", "dropout_rate", "attention_dropout")


def _checkpointed(name, reentrant: bool):
    cfg = _cfg(name)
    for attr in _DROPOUTS:
        if hasattr(cfg, attr):
            setattr(cfg, attr, 0.1)
    m = type(_model(name))(cfg).train()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    return m


def _build(name, variant):
    def build():
        m = _checkpointed(name, variant == "ckpt_reentrant") if variant.startswith("ckpt") \
            else _model(name)
        log = []
        if variant == "hooks":
            b0, b1 = _blocks(m)[:2]
            b0.register_full_backward_hook(
                lambda mod, gin, gout: log.append(("b0", [None if g is None else round(g.float().norm().item(), 4) for g in gout])))
            b1.register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 1.0, *gin[1:]))
        return m, log
    return build


def _step(name, variant):
    def step(state):
        m, log = state
        if variant != "accumulate":
            m.zero_grad(set_to_none=variant != "zeros")
        if variant == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = _loss(name, m)
        else:
            loss = _loss(name, m)
        loss.backward()
        if variant == "accumulate":
            _loss(name, m).backward()
        out = [None if p.grad is None else p.grad.clone() for p in m.parameters()]
        if variant == "bf16":       # Inductor keeps a fused bf16 chain in float32 (one rounding)
            out = [None if g is None else g.to(torch.bfloat16) for g in out]
        return [out, list(log)]
    return step


MODELS = ["gpt2", "llama", "bert", "t5", "vit"]


@pytest.mark.parametrize("variant", ["plain", "bf16", "accumulate", "zeros", "hooks", "ckpt",
                                     "ckpt_reentrant"])
@pytest.mark.parametrize("name", MODELS)
def test_real_model_eager_backend(name, variant):
    # reentrant checkpoint: each inner backward is a capture of its own
    differential(_build(name, variant), _step(name, variant), steps=3, backend="eager",
                 captures=None if variant == "ckpt_reentrant" else 1, fallbacks=0)


@pytest.mark.parametrize("variant", ["plain", "hooks", "ckpt"])
@pytest.mark.parametrize("name", MODELS)
def test_real_model_inductor(name, variant):
    differential(_build(name, variant), _step(name, variant), steps=3, backend="inductor",
                 captures=1, fallbacks=0)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_real_moe_model(backend):
    """Mixtral (random init): each step routes tokens differently; the experts' grouped
    matmul backward (GroupedMmBackward0, whose meta kernel refuses float32 on CPU) is traced
    by our copy of its formula (trace/grouped_mm.py) -- the whole backward fell back before
    (trace.py Note [Built-in formulas fake tensors reject]), then it ran as the real node."""
    differential(_build("mixtral", "plain"), _step("mixtral", "plain"), steps=3,
                 backend=backend, captures=1, fallbacks=0)


def _over_lengths(name, lengths):
    """build/step of a causal LM trained one step per sequence length (batch 2)."""
    def build():
        return _model(name), iter(lengths)

    def step(state):
        m, it = state
        m.zero_grad(set_to_none=True)
        ids = torch.randint(0, V, (2, next(it)))
        m(input_ids=ids, labels=ids).loss.backward()
        return [None if p.grad is None else p.grad.clone() for p in m.parameters()]
    return build, step


@pytest.mark.both_backends
def test_moe_over_varying_lengths(cbw_backend):
    """Mixtral over steps of varying sequence length: the tokens each expert gets change
    every step (top-2 routing), and with them the sizes of the experts' grouped matmuls
    (GroupedMmBackward0, traced by our copy of its formula: trace/grouped_mm.py) and
    TopkBackward0's saved sizes.  A static graph, then one dynamic graph for every later
    length (#37: at most 4 captures over 20 steps)."""
    lengths = [12, 7, 10, 16, 5, 9, 14, 11, 6, 13]

    build, step = _over_lengths("mixtral", lengths)
    st = differential(build, step, steps=len(lengths), captures=None, fallbacks=0)
    assert st.captures <= 3 and st.dynamic_hits >= len(lengths) - 3, st.recompile_reasons


def _compiled(name, warm):
    def build():
        torch._dynamo.reset()
        m = _model(name, layers=1)
        return m, torch.compile(m)

    def step(state):
        m, cm = state
        m.zero_grad(set_to_none=True)
        loss = _loss(name, cm)
        assert_aot_cache(loss, warm)
        loss.backward()
        return [None if p.grad is None else p.grad.clone() for p in m.parameters()]
    return build, step


# each model on both backends and both caches, in 4 runs (compiling forwards is slow)
@pytest.mark.parametrize("name,backend,cache", [
    ("gpt2", "inductor", "cold"), ("gpt2", "eager", "warm"),
    ("llama", "eager", "cold"), ("llama", "inductor", "warm")])
@pytest.mark.needs_feature("AOT backward splicing")
def test_real_model_compiled_forward(name, backend, cache):
    """The forward torch.compile'd: every AOT backward spliced (strict: no fallback, no opaque
    CompiledFunctionBackward call), grads equal eager autograd's running the same compiled
    forward.  Warm failed before the splice handled them (tensor constants in the cached module)."""
    warm = cache == "warm"
    build, step = _compiled(name, warm)
    with aot_cache(warm):
        if warm:
            warm_aot_cache(lambda: _model(name, layers=1), lambda cm: _loss(name, cm))
        differential(build, step, steps=2, backend=backend, captures=1, fallbacks=0)
    import compiled_bw
    code = compiled_bw.last_graph().code
    assert "aot0_" in code and "custom CompiledFunctionBackward" not in code


@pytest.mark.parametrize("name,backend", [("gpt2", "inductor"), ("llama", "eager")])
def test_real_model_sequence_lengths_one_dynamic_graph(name, backend):
    """Causal LMs over changing sequence lengths: one static capture, then one dynamic graph
    for the rest.  Their KV cache concatenates an empty no-grad cache before each layer's new
    keys even in training (a CatBackward0 with an input that needs no grad: nodes.py Note
    [Hidden saved state]); that node ran opaque, kept the graph static, and every length was
    a new capture (8 for 8 lengths)."""
    lengths = [12, 20, 9, 33, 17, 40]

    build, step = _over_lengths(name, lengths)
    st = differential(build, step, steps=len(lengths), backend=backend, captures=2, fallbacks=0)
    assert st.dynamic_captures == 1, st.recompile_reasons


def _family(name):
    """Llama-family (and other) decoder configs, 2 layers, 32 wide, attention dropout 0.1."""
    small = {"vocab_size": V, "hidden_size": D, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64}
    t = transformers
    made = {
        "mistral": lambda: t.MistralForCausalLM(t.MistralConfig(**small, num_key_value_heads=1)),
        "qwen3": lambda: t.Qwen3ForCausalLM(t.Qwen3Config(**small, num_key_value_heads=1)),
        "gemma2": lambda: t.Gemma2ForCausalLM(t.Gemma2Config(**small, num_key_value_heads=1,
                                                             head_dim=16)),
        "phi3": lambda: t.Phi3ForCausalLM(t.Phi3Config(**small, num_key_value_heads=1,
                                                       pad_token_id=0)),
        "olmo": lambda: t.OlmoForCausalLM(t.OlmoConfig(**small, num_key_value_heads=1)),
        "gpt_neox": lambda: t.GPTNeoXForCausalLM(t.GPTNeoXConfig(**small)),
        "falcon": lambda: t.FalconForCausalLM(t.FalconConfig(
            vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=2)),
        "deberta_v2": lambda: t.DebertaV2ForMaskedLM(t.DebertaV2Config(
            **small, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)),
        "t5": lambda: t.T5ForConditionalGeneration(t.T5Config(
            vocab_size=V, d_model=D, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
            dropout_rate=0.1, decoder_start_token_id=0)),
        "modernbert": lambda: t.ModernBertForMaskedLM(t.ModernBertConfig(
            **small, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
            sep_token_id=2)),
        # experts via torch._grouped_mm (graph/fake_ops.py Note [Grouped mm on fake tensors]);
        # Mixtral's router logits are recorded by hooks (checkpoint/inert.py Note [Inert hooks])
        "mixtral": lambda: t.MixtralForCausalLM(_cfg("mixtral")),
        "qwen2_moe": lambda: t.Qwen2MoeForCausalLM(t.Qwen2MoeConfig(
            **small, num_key_value_heads=1, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=32)),
    }
    if name == "llama":
        cfg = _cfg("llama")
        cfg.attention_dropout = 0.1
        return transformers.LlamaForCausalLM(cfg)
    m = made[name]()
    if hasattr(m.config, "attention_dropout"):
        m = type(m)(type(m.config)(**{**m.config.to_dict(), "attention_dropout": 0.1}))
    return m


@pytest.mark.both_backends
@pytest.mark.parametrize("name", ["llama", "mistral", "qwen3", "gemma2", "phi3", "olmo",
                                  "gpt_neox", "falcon", "deberta_v2", "modernbert", "t5",
                                  "mixtral", "qwen2_moe"])
def test_checkpointed_blocks_are_traced(name):
    """Hugging Face gradient checkpointing (non-reentrant) of these families: every block's
    recomputation is traced into the graph (no hooked opaque call: recompute.py Note [Traced
    recomputation]; their partial passes rotary embeddings as `position_embeddings=(cos,
    sin)`, guarded.partial_tensors; DeBERTa and Falcon make tensors from Python values in the
    region; T5's first decoder block sets requires_grad on a tensor it makes, torchapi/dynamo.py
    Note [requires_grad set on a tensor the region makes]), one capture, eager's grads with
    the forward's dropout."""
    import compiled_bw

    def build():
        m = _family(name)
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return m.train()

    def step(m):
        m.zero_grad(set_to_none=True)
        ids = torch.randint(3, V, (2, 12))
        m(input_ids=ids, labels=ids).loss.backward()
        return [None if p.grad is None else p.grad.clone() for p in m.parameters()]

    differential(build, step)
    code = compiled_bw.last_graph().code
    assert "hooked " not in code, [ln for ln in code.splitlines() if "hooked " in ln][:3]


@pytest.mark.both_backends
@pytest.mark.parametrize("collecting", [False, True], ids=["inert", "collecting"])
def test_checkpointed_blocks_with_output_recording_hooks(collecting):
    """Asked once for hidden states, a Hugging Face model keeps output-recording hooks on its
    layers; with no collector at the backward they do nothing in eager's recomputation, so
    the checkpointed blocks are traced (checkpoint/inert.py Note [Inert hooks]).  A backward
    run while a collector is active (`collecting`) records the recomputed layers' outputs in
    eager: there the blocks run hooked, and record as many."""
    from transformers.utils import output_capturing

    import compiled_bw

    def build():
        m = _family("llama")
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return m.train()

    def step(m):
        m.zero_grad(set_to_none=True)
        ids = torch.randint(3, V, (2, 12))
        out = m(input_ids=ids, labels=ids, output_hidden_states=True)
        loss = out.loss + 0.1 * out.hidden_states[1].pow(2).mean()
        collected = {"hidden_states": []}
        token = output_capturing._active_collector.set(collected) if collecting else None
        try:
            loss.backward()
        finally:
            if token is not None:
                output_capturing._active_collector.reset(token)
        grads = [None if p.grad is None else p.grad.clone() for p in m.parameters()]
        return [grads, len(collected["hidden_states"])]

    differential(build, step)
    code = compiled_bw.last_graph().code
    assert ("hooked " in code) == collecting, [ln for ln in code.splitlines() if "hooked " in ln][:3]


class _LoRA(torch.nn.Module):
    """A low-rank adapter around a frozen Linear (what LoRA fine-tuning adds: peft's
    lora.Linear computes base(x) + B(A(x)))."""

    def __init__(self, base, r=4):
        super().__init__()
        self.base = base
        self.a = torch.nn.Parameter(torch.randn(r, base.in_features) * 0.1)
        self.b = torch.nn.Parameter(torch.randn(base.out_features, r) * 0.1)

    def forward(self, x):
        return self.base(x) + (x @ self.a.t()) @ self.b.t()


@pytest.mark.parametrize("ckpt", ["none", "ckpt", "ckpt_reentrant"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_lora_fine_tuning_of_a_frozen_llama(backend, ckpt):
    """Every base weight frozen, adapters on the attention's q and v projections (LoRA
    fine-tuning), with and without Hugging Face gradient checkpointing (reentrant needs
    `enable_input_require_grads`, which registers a forward hook on the embedding): the frozen
    weights' grads stay None, the adapters' are eager's."""
    def build():
        m = _checkpointed("llama", ckpt == "ckpt_reentrant") if ckpt != "none" else _model("llama")
        m.requires_grad_(False)
        for mod in list(m.modules()):
            for cn in ("q_proj", "v_proj"):
                if isinstance(getattr(mod, cn, None), torch.nn.Linear):
                    setattr(mod, cn, _LoRA(getattr(mod, cn)))
        if ckpt == "ckpt_reentrant":
            m.enable_input_require_grads()
        return m

    def step(m):
        m.zero_grad(set_to_none=True)
        _loss("llama", m).backward()
        return [None if p.grad is None else p.grad.clone() for p in m.parameters()]
    # reentrant checkpoint: each inner backward is a capture of its own
    differential(build, step, steps=3, backend=backend,
                 captures=None if ckpt == "ckpt_reentrant" else 1, fallbacks=0)


@pytest.mark.both_backends
@pytest.mark.foreground_compile
@pytest.mark.needs_feature("traced checkpoint recomputation")
@pytest.mark.parametrize("name", ["llama", "mistral", "gpt2", "falcon", "mixtral", "qwen2_moe",
                                  "gpt2_dropout", "bert_dropout", "deberta_v2_dropout"])
def test_checkpointed_blocks_over_varying_lengths(name):
    """Hugging Face gradient checkpointing (non-reentrant) over a new sequence length at every
    step: after two static captures (the blocks' Dynamo guards are static at the first
    length, symbolic from the second: checkpoint/guarded.py Note [Guarded recomputation over
    varying sizes]) one dynamic graph, with every block's recomputation traced in it
    (checkpoint/recompute.py Note [Symbolic recomputation]), serves every later length:
    eager's grads at each step.  `_dropout`: Hugging Face's default dropout (0.1; fine-tuning
    with dynamic padding): each block's recomputation draws the forward's masks from the
    forward's RNG state inside the graph (graph/rng.py Note [Functional RNG in a symbolic
    recomputation]), and the numbers drawn after each backward are eager's; else dropout 0.
    Falcon and the mixtures of experts index with tensors the region makes (IndexBackward0's
    saved index list comes from the recomputation) and write in place into tensors it makes
    (the experts' `index_add_`)."""
    import compiled_bw
    lengths = [12, 17, 23, 9, 30, 14]
    family, dropout = name.removesuffix("_dropout"), name.endswith("_dropout")

    def build():
        torch.manual_seed(0)
        if family == "gpt2":
            m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
                vocab_size=V, n_embd=D, n_layer=2, n_head=2, n_positions=64)) if dropout \
                else transformers.GPT2LMHeadModel(_cfg("gpt2"))
        elif family == "bert":
            m = transformers.BertForMaskedLM(transformers.BertConfig(
                vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64))
        else:
            m = _family(family)
            if not dropout:
                m = type(m)(type(m.config)(**{**m.config.to_dict(), "attention_dropout": 0.0}))
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return [m.train(), 0]

    def step(st):
        m, k = st
        st[1] += 1
        m.zero_grad(set_to_none=True)
        ids = torch.randint(3, V, (2, lengths[k]))
        m(input_ids=ids, labels=ids).loss.backward()
        return [None if p.grad is None else p.grad.clone() for p in m.parameters()] + \
            [torch.rand(2)]

    st = differential(build, step, steps=len(lengths), captures=3, strict=True)
    assert st.dynamic_captures == 1 and st.dynamic_hits == len(lengths) - 3, \
        st.recompile_reasons
    code = compiled_bw.last_graph().code
    assert "hooked " not in code, [ln for ln in code.splitlines() if "hooked " in ln][:3]
    assert ("compiled_bw.rng_draw.default(" in code) == dropout
