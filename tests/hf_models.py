"""Small random-init Hugging Face models shared by tests (no download).

Consumes `transformers` (the `models` extra: the calling test is skipped without it); produces
(build, step) pairs for tests/differential.py: build() makes the model and its inputs from the
seed, step() runs one training step and returns every parameter grad.
"""
import pytest
import torch
from differential import grads


def gpt2_checkpointed(pdrop: float, reentrant: bool = False, **ckpt_kwargs):
    """GPT-2 (2 layers, 16 wide) with `gradient_checkpointing_enable()`; dropout `pdrop` in
    the attention, residual and embedding dropouts; `ckpt_kwargs` more checkpoint arguments
    (e.g. a selective checkpointing context_fn)."""
    transformers = pytest.importorskip("transformers")

    def build():
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2,
                                      n_head=2, resid_pdrop=pdrop, embd_pdrop=pdrop,
                                      attn_pdrop=pdrop)
        model = transformers.GPT2LMHeadModel(cfg)
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": reentrant, **ckpt_kwargs})
        model.train()
        return [model, torch.randint(0, 50, (2, 8))]

    def step(st):
        model, ids = st
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        return grads(model)
    return build, step
