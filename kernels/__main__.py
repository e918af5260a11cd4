"""`python -m kernels test [--device cpu|cuda]`: every kernel's test (on CPU set
TRITON_INTERPRET=1, else the ops run their torch reference and the test compares it with
itself); `python -m kernels bench [--device cuda]`: every kernel's benchmark, one line a row."""
from __future__ import annotations

import argparse
import sys

from . import dequantize_absmax, path_for, quantize_absmax

KERNELS = (quantize_absmax, dequantize_absmax)


def main(argv=None) -> int:
    import torch
    ap = argparse.ArgumentParser(prog="python -m kernels")
    ap.add_argument("what", choices=("test", "bench"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    print(f"path: {path_for(torch.device(a.device))}", flush=True)
    for k in KERNELS:
        if a.what == "test":
            k.test(a.device)
            print(f"{k.__name__}: ok", flush=True)
        else:
            for row in k.bench(a.device):
                print("{:20} {:7} {:6} {:22} {:8.3f} ms {:8.1f} GB/s".format(*row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
