"""`python -m compiled_bw.build`: compile the C++ walk now instead of on the first backward.

Consumes nothing; produces the extension in the build dir (walk/fastwalk.py build_dir(),
once per machine, torch version and source) and prints where it is and how long it took, or
why it could not be built (compiled_bw then uses the Python walk).
"""
from __future__ import annotations

import sys
import time

from .walk import fastwalk


def main() -> int:
    t0 = time.perf_counter()
    ok = fastwalk.enable_fastwalk(True)
    took = time.perf_counter() - t0
    if not ok:
        print(f"compiled_bw: the C++ walk could not be built: {fastwalk.counters()['error']}")
        return 1
    print(f"compiled_bw: C++ walk ready in {fastwalk.build_dir()} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
