"""A small U-Net trained over varying image sizes: eager vs compiled_bw (Inductor, background
compile on, the default), interleaved step by step in one process.

Consumes nothing; prints, per mode, the main thread's CPU time of every step (zero_grad +
forward + backward, one torch thread), the ratio to eager over all steps and over the second
half, and compiled_bw's captures / dynamic graphs / Inductor compiles; checks every grad against
eager's at every step.  `python -m benchmarks.unet_sizes [steps]` (default 24): batch 8, random
H and W in 48-128 (seed 0); two convs whose input needs a grad and a bilinear upsample to the
skip connection's size, the parts of a segmentation decoder whose sizes vary with the image.
"""
from __future__ import annotations

import copy
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import compiled_bw


class UNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e1 = nn.Conv2d(3, 16, 3, padding=1)
        self.e2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.m = nn.Conv2d(32, 32, 3, padding=1)
        self.d1 = nn.Conv2d(48, 16, 3, padding=1)
        self.out = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        a = F.relu(self.e1(x))
        b = F.relu(self.m(F.relu(self.e2(a))))
        u = F.interpolate(b, size=a.shape[-2:], mode="bilinear", align_corners=False)
        return self.out(F.relu(self.d1(torch.cat([u, a], 1))))


def main(steps: int = 24) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = random.Random(0)
    sizes = [(2 * rng.randint(24, 64), 2 * rng.randint(24, 64)) for _ in range(steps)]
    m_e = UNet()
    m_c = copy.deepcopy(m_e)
    te, tc = [], []
    for h, w in sizes:
        x = torch.randn(8, 3, h, w)
        y = torch.randn(8, 1, h, w)
        for mode, m, ts in (("eager", m_e, te), ("cbw", m_c, tc)):
            m.zero_grad()
            t0 = time.thread_time()
            loss = F.mse_loss(m(x), y)
            if mode == "cbw":
                with compiled_bw.enable(backend="inductor"):
                    loss.backward()
            else:
                loss.backward()
            ts.append(time.thread_time() - t0)
        for p, q in zip(m_e.parameters(), m_c.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
    st = compiled_bw.stats()
    half = steps // 2
    print(f"torch {torch.__version__}, {steps} steps, sizes {sizes}")
    print(f"main-thread CPU: eager {sum(te):.2f} s, compiled_bw {sum(tc):.2f} s "
          f"({sum(tc) / sum(te):.2f}x); second half {sum(tc[half:]) / sum(te[half:]):.2f}x")
    print(f"captures {st.captures}, dynamic {st.dynamic_captures}, dynamic hits "
          f"{st.dynamic_hits}, Inductor compiles {st.inductor_compiles}, fallbacks "
          f"{st.fallbacks}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 24)
