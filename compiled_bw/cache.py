"""`python -m compiled_bw.cache ls|size|clear`: the graphs kept for warm starts.

Consumes COMPILED_BW_CACHE_DIR (runtime/warm.py Note [Warm start]); prints each stored graph
(ls: path, size, age), the total (size), or removes them all (clear).  Nothing to do when the
variable is unset: warm start is off then.
"""
from __future__ import annotations

import sys
import time

from .runtime import warm


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[0] if argv else "ls"
    if cmd not in ("ls", "size", "clear"):
        print("usage: python -m compiled_bw.cache ls|size|clear")
        return 2
    if warm.root() is None:
        print("COMPILED_BW_CACHE_DIR is not set: warm start is off, nothing is stored")
        return 0
    found = warm.entries()
    if cmd == "clear":
        print(f"removed {warm.clear()} stored graphs from {warm.root()}")
        return 0
    if cmd == "ls":
        now = time.time()
        for path, size, mtime in sorted(found, key=lambda e: -e[2]):
            print(f"{size / 2**10:9.1f} KiB  {(now - mtime) / 60:8.1f} min ago  {path}")
    total = sum(e[1] for e in found)
    print(f"{len(found)} stored graphs, {total / 2**20:.1f} MiB of {warm.limit_bytes() / 2**20:.0f} "
          f"MiB (COMPILED_BW_CACHE_MB) in {warm.root()}; this release's folder: {warm.release()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
