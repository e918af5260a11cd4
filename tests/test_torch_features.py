"""Features of torch itself that training code uses around the backward: parametrizations,
`torch.distributions`, GradScaler, packed RNNs, quantization-aware training, FFT spectral
layers, CTC / EmbeddingBag, sampling and resampling ops.

Consumes small programs written as a user writes them (each a build and a step); produces
eager vs compiled_bw comparisons (tests/differential.py: every grad with its dtype and
strides, buffers a forward updates, optimizer and scaler state, 3 steps, strict: no
fallback).  What each checks of eager's semantics is in its docstring.  The cases first ran as
scripts (tools/torch_suite/README.md, "Real libraries as users run them"); here they stay.
"""
import pytest
import torch
import torch.nn.functional as F
from differential import differential, grads
from torch import nn

P = nn.utils.parametrizations


def _params(m):
    return [p.detach().clone() for p in m.parameters()]


@pytest.mark.both_backends
def test_weight_norm_and_spectral_norm(cbw_backend):
    """Parametrized weights recomputed each forward; spectral_norm's power iteration updates its
    `u`/`v` buffers in the forward (compared after every step) and a step in eval mode skips it."""
    def build():
        return [nn.Sequential(P.weight_norm(nn.Linear(6, 8)), nn.Tanh(),
                              P.weight_norm(nn.Linear(8, 5), dim=None)),
                P.spectral_norm(nn.Linear(5, 5)), [0]]

    def step(st):
        wn, sn, k = st
        k[0] += 1
        wn.zero_grad(set_to_none=True)
        sn.zero_grad(set_to_none=True)
        sn.train(k[0] != 2)
        sn(wn(torch.randn(4, 6))).sin().sum().backward()
        return grads(wn) + grads(sn) + [b.clone() for b in sn.buffers()]
    differential(build, step)


def test_orthogonal_maps_and_cached_parametrization():
    """orthogonal()'s three maps (matrix_exp, cayley, householder) and a custom parametrization
    under `parametrize.cached()` (its weight computed once, used twice in the forward)."""
    import torch.nn.utils.parametrize as PZ

    class Sym(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    def build():
        sym = nn.Linear(4, 4)
        PZ.register_parametrization(sym, "weight", Sym())
        return [P.orthogonal(nn.Linear(5, 5)), P.orthogonal(nn.Linear(4, 6), orthogonal_map="cayley"),
                P.orthogonal(nn.Linear(6, 4), orthogonal_map="householder"), sym]

    def step(st):
        for m in st:
            m.zero_grad(set_to_none=True)
        a, b, c, sym = st
        with PZ.cached():
            y = sym(c(b(a(torch.randn(3, 5))[:, :4])))
            y = sym(y.tanh())
        y.sum().backward()
        return [g for m in st for g in grads(m)]
    differential(build, step)


def test_parametrization_assigned_between_steps():
    """`m.weight = X` runs right_inverse and writes the original in place under no_grad between
    two steps: the next backward reads the new original (its version moved)."""
    import torch.nn.utils.parametrize as PZ

    class Skew(nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.T

        def right_inverse(self, A):
            return A.triu(1)

    def build():
        m = nn.Linear(4, 4)
        PZ.register_parametrization(m, "weight", Skew())
        return [m, [0]]

    def step(st):
        m, k = st
        k[0] += 1
        m.zero_grad(set_to_none=True)
        if k[0] == 2:
            with torch.no_grad():
                m.weight = torch.randn(4, 4)
        (torch.linalg.matrix_exp(m.weight) @ torch.randn(4, 3)).pow(2).sum().backward()
        return grads(m) + [m.parametrizations.weight.original._version]
    differential(build, step)


@pytest.mark.both_backends
def test_distributions_reparameterized(cbw_backend):
    """A VAE-style loss: Normal rsample / log_prob / KL, Categorical entropy, and the implicit
    reparameterization grads of Gamma, Dirichlet and Beta rsample (`_standard_gamma_grad`,
    `_dirichlet_grad`)."""
    D = torch.distributions

    def build():
        return [nn.Linear(4, 6), nn.Parameter(torch.rand(3) + 0.5)]

    def step(st):
        lin, conc = st
        lin.zero_grad(set_to_none=True)
        conc.grad = None
        h = lin(torch.randn(7, 4))
        n = D.Normal(h[:, :3], h[:, 3:].exp())
        z = n.rsample()
        cat = D.Categorical(logits=h)
        loss = (n.log_prob(z).sum() + D.kl_divergence(n, D.Normal(torch.zeros(3), torch.ones(3))).sum()
                + cat.entropy().sum() + cat.log_prob(torch.tensor([0, 1, 2, 3, 4, 5, 0])).sum()
                + D.Gamma(conc, torch.ones(3)).rsample((5,)).log().sum()
                + D.Dirichlet(conc).rsample((4,)).pow(2).sum() + D.Beta(conc, conc.flip(0)).rsample().sum())
        loss.backward()
        return grads(lin) + [conc.grad]
    differential(build, step)


@pytest.mark.both_backends
def test_grad_scaler_with_overflow_and_clipping(cbw_backend):
    """GradScaler at a scale that overflows the first steps (inf/nan grads: the step is skipped
    and the scale backs off, as eager's grads decide), then clip_grad_norm_ and AdamW; the grads,
    the scale and the parameters after each step are compared."""
    def build():
        m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
        return [m, torch.optim.AdamW(m.parameters(), lr=1e-2),
                torch.amp.GradScaler("cpu", init_scale=2.0 ** 120, growth_interval=1, backoff_factor=2.0 ** -60)]

    def step(st):
        m, opt, sc = st
        opt.zero_grad(set_to_none=True)
        sc.scale(m(torch.randn(4, 5) * 3).pow(2).mean() * 1e3).backward()
        g = grads(m)
        sc.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        sc.step(opt)
        sc.update()
        return g + [norm, sc.get_scale()] + _params(m)
    differential(build, step, steps=4)


def test_packed_sequences_through_lstm_and_gru():
    """pack_padded_sequence -> a 2-layer bidirectional LSTM -> pad_packed_sequence, and a GRU:
    grads of every weight and of the final states."""
    def build():
        return [nn.LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=True), nn.GRU(4, 5)]

    def step(st):
        lstm, gru = st
        lstm.zero_grad(set_to_none=True)
        gru.zero_grad(set_to_none=True)
        x = torch.randn(3, 7, 4)
        out, (h, c) = lstm(nn.utils.rnn.pack_padded_sequence(x, torch.tensor([7, 4, 2]), batch_first=True))
        pad, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        o2, h2 = gru(x.transpose(0, 1))
        (pad.sum() + h.pow(2).sum() + c.mean() + o2.pow(2).mean() + h2.sum()).backward()
        return grads(lstm) + grads(gru)
    differential(build, step)


@pytest.mark.both_backends
def test_quantization_aware_training_fake_quant(cbw_backend):
    """FakeQuantize (straight-through, its observer buffers updated in the forward) and the
    learnable fake quantizer (grads into scale and zero point, grad scaling on)."""
    from torch.ao.quantization import FakeQuantize, MovingAverageMinMaxObserver
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize

    def build():
        return [nn.Linear(5, 5), FakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255),
                _LearnableFakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                       use_grad_scaling=True)]

    def step(st):
        lin, fq, lfq = st
        lin.zero_grad(set_to_none=True)
        lfq.zero_grad(set_to_none=True)
        y = lin(torch.randn(6, 5))
        (fq(y).sin().sum() + lfq(y.tanh()).pow(2).sum()).backward()
        return grads(lin) + grads(lfq) + [b.clone() for b in fq.buffers()]
    differential(build, step)


@pytest.mark.both_backends
def test_fourier_layer_with_complex_weights_and_stft(cbw_backend):
    """An FNO-style spectral layer: rfft, complex weights on the low modes written into a zero
    spectrum by slice assignment (CopySlices), irfft, then an STFT magnitude loss."""
    def build():
        return [nn.Parameter(torch.randn(2, 4, 3, dtype=torch.cfloat)), nn.Linear(16, 16)]

    def step(st):
        w, lin = st
        w.grad = None
        lin.zero_grad(set_to_none=True)
        xf = torch.fft.rfft(lin(torch.randn(2, 4, 16)))
        out_ft = torch.zeros(2, 4, 9, dtype=torch.cfloat)
        out_ft[:, :, :3] = xf[:, :, :3] * w
        y = torch.fft.irfft(out_ft, n=16)
        s = torch.stft(y.reshape(8, 16), n_fft=8, hop_length=2, window=torch.hann_window(8), return_complex=True)
        (y.pow(2).sum() + s.abs().sum()).backward()
        return grads(lin) + [w.grad]
    differential(build, step)


def test_ctc_loss_and_embedding_bags():
    """CTC loss over log-probabilities fed by EmbeddingBag(mean) + EmbeddingBag(max)."""
    def build():
        return [nn.Linear(4, 6), nn.EmbeddingBag(10, 4, mode="mean"), nn.EmbeddingBag(10, 4, mode="max")]

    def step(st):
        for m in st:
            m.zero_grad(set_to_none=True)
        lin, eb, ebm = st
        idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])
        e = eb(idx, off) + ebm(idx, off)
        lp = lin(e.unsqueeze(0).expand(12, 2, 4) + torch.randn(12, 2, 4)).log_softmax(-1)
        F.ctc_loss(lp, torch.tensor([[1, 2, 3], [2, 2, 5]]), torch.tensor([12, 10]),
                   torch.tensor([3, 3])).backward()
        return [g for m in st for g in grads(m)]
    differential(build, step)


def test_grid_sample_interpolate_fold_pixel_shuffle():
    """grid_sample (grads into the grid), antialiased bicubic interpolate, unfold/fold and
    pixel_shuffle after a convolution."""
    def build():
        return [nn.Conv2d(2, 3, 3, padding=1), nn.Parameter(torch.randn(1, 5, 5, 2) * 0.5)]

    def step(st):
        c, grid = st
        c.zero_grad(set_to_none=True)
        grid.grad = None
        x = c(torch.randn(1, 2, 8, 8))
        a = F.grid_sample(x, grid.tanh(), align_corners=False)
        b = F.interpolate(x, size=(5, 5), mode="bicubic", antialias=True)
        f = F.fold(F.unfold(x, 3, stride=2), (8, 8), 3, stride=2)
        p = F.pixel_shuffle(torch.cat([x, x[:, :1]], 1), 2)
        (a.sum() + b.pow(2).sum() + f.mean() + p.std()).backward()
        return grads(c) + [grid.grad]
    differential(build, step)
