"""Benchmark models: each a function -> (model, input) small enough for 2 CPU cores.

overhead  16 blocks of Linear(32)+tanh+LayerNorm, batch 16: per-op dispatch dominates.
gemm      pre-norm MLP blocks, D=512, 2048 tokens: matmuls dominate.
pointwise RMSNorm + SwiGLU + rotary-style elementwise ops, small D, many tokens.
cnn       conv/bn/relu/pool.
gpt2      a GPT-2-style language model from transformers (when the `models` extra is installed).
custom_hooks  custom autograd.Functions and module full backward hooks between Linear layers.
custom_ops    Linear layers joined by a torch.library custom op with register_autograd.
lora      frozen Linear layers with rank-8 adapters written as custom autograd.Functions.
ckpt_transformer  4 pre-norm transformer layers (D=256, 1024 tokens), each checkpointed
          (torch.utils.checkpoint, non-reentrant; its recomputation traced under Dynamo's
          guards); ckpt_traced the same with the layer class opted in (no Dynamo); ckpt_sac the same with selective
          checkpointing that saves the matmuls; save_on_cpu an MLP whose saved tensors go
          through torch.autograd.graph.save_on_cpu.
GPU_MODELS (`python -m benchmarks --device cuda`): GPU-sized versions, built on the device:
overhead as above; pointwise D=1024 x 16k tokens; gemm bf16 D=2048 x 8k tokens; a 4-layer
transformer encoder D=1024; custom Functions + hooks D=1024; a torch.compile'd (Inductor)
forward.
"""
import torch
from torch import nn


class OverheadBound(nn.Module):
    def __init__(self, blocks=16, d=32):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.LayerNorm(d))
                                    for _ in range(blocks))

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x


class MLPBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


class PointwiseBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = RMSNorm(d)
        self.gate = nn.Linear(d, 2 * d, bias=False)
        self.up = nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)
        half = d // 2
        self.register_buffer("cos", torch.cos(torch.arange(half) / half))
        self.register_buffer("sin", torch.sin(torch.arange(half) / half))

    def forward(self, x):
        h = self.norm(x)
        a, b = h.chunk(2, -1)
        h = torch.cat([a * self.cos - b * self.sin, a * self.sin + b * self.cos], -1)  # rotary
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def overhead():
    return OverheadBound(), torch.randn(16, 32)


def gemm():
    return nn.Sequential(*[MLPBlock(512) for _ in range(4)]), torch.randn(2048, 512)


def pointwise():
    return nn.Sequential(*[PointwiseBlock(64) for _ in range(4)]), torch.randn(8192, 64)


def cnn():
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return m, torch.randn(16, 3, 32, 32)


class _BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (torchvision itself does not load beside the CPU torch)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (out + (x if self.down is None else self.down(x))).relu()


def resnet18():
    """ResNet-18 (torchvision's layout: 2-2-2-2 BasicBlocks, 64-512 channels), 4 images of
    32x32, 100 classes."""
    layers, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
        cin = cout
    m = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                      nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(512, 100))
    return m, torch.randn(4, 3, 32, 32)


MODELS = {"overhead": overhead, "gemm": gemm, "pointwise": pointwise, "cnn": cnn,
          "resnet18": resnet18}


class _Gate(torch.autograd.Function):
    """A custom Function (opaque in compiled_bw's graph)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * torch.sigmoid(w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        s = torch.sigmoid(w)
        return g * s, (g * x * s * (1 - s)).sum(0)


class CustomAndHooks(nn.Module):
    """Custom autograd.Functions and module full backward hooks between Linear layers."""

    def __init__(self, d=128, blocks=4):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(blocks))
        self.gates = nn.ParameterList(nn.Parameter(torch.zeros(d)) for _ in range(blocks))
        self.calls = 0
        for lin in self.lins:
            lin.register_full_backward_hook(self._count)

    def _count(self, module, grad_input, grad_output):
        self.calls += 1

    def forward(self, x):
        for lin, g in zip(self.lins, self.gates, strict=True):
            x = _Gate.apply(lin(x).relu(), g)
        return x


def custom_hooks():
    return CustomAndHooks(), torch.randn(256, 128)


def compiled_forward():
    """A torch.compile'd forward (aot_eager): its backward is spliced into compiled_bw's graph."""
    m = nn.Sequential(*[MLPBlock(256) for _ in range(2)])
    return torch.compile(m, backend="aot_eager"), torch.randn(512, 256)


@torch.library.custom_op("cbw_bench::gated_gelu", mutates_args=())
def _gated_gelu(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * torch.sigmoid(g)


@_gated_gelu.register_fake
def _(x, g):
    return torch.empty_like(x)


def _gated_gelu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gated_gelu_backward(ctx, grad):
    x, g = ctx.saved_tensors
    s = torch.sigmoid(g)
    cdf = 0.5 * (1 + torch.erf(x * 0.7071067811865476))
    pdf = torch.exp(-0.5 * x * x) * 0.3989422804014327
    gelu = x * cdf
    return grad * s * (cdf + x * pdf), (grad * gelu * s * (1 - s)).sum(0)


_gated_gelu.register_autograd(_gated_gelu_backward, setup_context=_gated_gelu_setup)


class CustomOps(nn.Module):
    """Linear layers joined by a torch.library custom op with register_autograd (its backward
    is traced by compiled_bw; the op stays an op call in the forward)."""

    def __init__(self, d=128, blocks=4):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(blocks))
        self.gates = nn.ParameterList(nn.Parameter(torch.zeros(d)) for _ in range(blocks))

    def forward(self, x):
        for lin, g in zip(self.lins, self.gates, strict=True):
            x = _gated_gelu(lin(x), g)
        return x


class _LoRA(torch.autograd.Function):
    """A LoRA adapter as a custom Function (as adapter libraries write them): x @ A^T @ B^T *
    scale, saving x and the low-rank activation; opaque in compiled_bw's graph."""

    @staticmethod
    def forward(ctx, x, a, b, scale):
        h = x @ a.t()
        ctx.save_for_backward(x, a, b, h)
        ctx.scale = scale
        return h @ b.t() * scale

    @staticmethod
    def backward(ctx, g):
        x, a, b, h = ctx.saved_tensors
        gs = g * ctx.scale
        gh = gs @ b
        return gh @ a, gh.t() @ x, gs.t() @ h, None


class LoRA(nn.Module):
    """Frozen Linear layers with trainable rank-8 adapters (custom Functions) and GELU."""

    def __init__(self, d=256, blocks=4, rank=8):
        super().__init__()
        self.base = nn.ModuleList(nn.Linear(d, d).requires_grad_(False) for _ in range(blocks))
        self.a = nn.ParameterList(nn.Parameter(torch.randn(rank, d) * 0.01) for _ in range(blocks))
        self.b = nn.ParameterList(nn.Parameter(torch.zeros(d, rank)) for _ in range(blocks))

    def forward(self, x):
        for base, a, b in zip(self.base, self.a, self.b, strict=True):
            x = torch.nn.functional.gelu(base(x) + _LoRA.apply(x, a, b, 2.0))
        return x


def custom_ops():
    return CustomOps(), torch.randn(256, 128)


def lora():
    return LoRA(), torch.randn(256, 256)


MODELS.update({"custom_hooks": custom_hooks, "compiled_forward": compiled_forward,
               "custom_ops": custom_ops, "lora": lora})


class PreNormLayer(nn.Module):
    """LayerNorm -> self-attention (SDPA) -> residual; LayerNorm -> MLP (4x, GELU) -> residual."""

    def __init__(self, d: int, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(nn.functional.gelu(self.up(self.n2(x))))


def _sac_policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy
    save = op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                  torch.ops.aten.bmm.default)
    return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE


class Checkpointed(nn.Module):
    """Each layer under torch.utils.checkpoint (use_reentrant=False); selective=True saves the
    matmuls (create_selective_checkpoint_contexts) and recomputes the rest."""

    def __init__(self, layers, selective: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.selective = selective

    def forward(self, x):
        import functools

        import torch.utils.checkpoint as cp
        kw = {}
        if self.selective:
            kw["context_fn"] = functools.partial(cp.create_selective_checkpoint_contexts,
                                                 _sac_policy)
        for layer in self.layers:
            x = cp.checkpoint(layer, x, use_reentrant=False, **kw)
        return x


class TracedPreNormLayer(PreNormLayer):
    """PreNormLayer opted in to traced recomputation (checkpoint/recompute.py): its forward reads
    only its input, parameters and plain attributes."""
    compiled_bw_traceable = True


def ckpt_transformer(selective: bool = False, traced: bool = False):
    torch.manual_seed(0)
    layers = [(TracedPreNormLayer if traced else PreNormLayer)(256) for _ in range(4)]
    return Checkpointed(layers, selective), torch.randn(4, 256, 256)


class SaveOnCpu(nn.Module):
    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with torch.autograd.graph.save_on_cpu():
            return self.inner(x)


def save_on_cpu():
    return SaveOnCpu(nn.Sequential(*[MLPBlock(256) for _ in range(4)])), torch.randn(1024, 256)


MODELS.update({"ckpt_transformer": ckpt_transformer,
               "ckpt_sac": lambda: ckpt_transformer(selective=True),
               "ckpt_traced": lambda: ckpt_transformer(traced=True),
               "save_on_cpu": save_on_cpu})


class _Logits(nn.Module):
    """A Hugging Face model called on token ids, returning its logits."""

    def __init__(self, m) -> None:
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids).logits


def gpt2():
    """A GPT-2-style language model (Hugging Face transformers, random init): 4 layers, D=256,
    8 sequences of 128 tokens, eager attention."""
    import transformers
    cfg = transformers.GPT2Config(vocab_size=2048, n_embd=256, n_layer=4, n_head=4,
                                  n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0)
    return _Logits(transformers.GPT2LMHeadModel(cfg).train()), torch.randint(0, 2048, (8, 128))


try:        # the `models` extra
    import transformers  # noqa: F401
    MODELS["gpt2"] = gpt2
except ImportError:
    pass


def _gpu_transformer():
    layer = nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), torch.randn(8, 1024, 1024)


def _gpu_gemm():
    m = nn.Sequential(*[MLPBlock(2048) for _ in range(4)]).to(torch.bfloat16)
    return m, torch.randn(8192, 2048, dtype=torch.bfloat16)


def _gpu_compiled_forward():
    m = nn.Sequential(*[MLPBlock(1024) for _ in range(4)])
    return m, torch.randn(8192, 1024)


GPU_MODELS = {
    "overhead": overhead,
    "pointwise": lambda: (nn.Sequential(*[PointwiseBlock(1024) for _ in range(4)]),
                          torch.randn(16384, 1024)),
    "gemm": _gpu_gemm,
    "transformer": _gpu_transformer,
    "custom_hooks": lambda: (CustomAndHooks(d=1024), torch.randn(8192, 1024)),
    "compiled_forward": _gpu_compiled_forward,
}
COMPILED = {"compiled_forward"}     # on a GPU: torch.compile(backend="inductor") after .to(device)


def on_device(factory, device: str, name: str):
    """factory() -> (model, x), moved to device (GPU_MODELS's compiled forward compiled there)."""
    def build():
        model, x = factory()
        if device == "cpu":
            return model, x
        model, x = model.to(device), x.to(device)
        if name in COMPILED:
            model = torch.compile(model, backend="inductor")
        return model, x
    return build
