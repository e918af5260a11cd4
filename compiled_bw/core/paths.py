"""Where compiled_bw keeps what it builds per machine (the C++ walk, generated node tables),
and how it writes files other processes may read at the same time.

Consumes $COMPILED_BW_BUILD_DIR, else $XDG_CACHE_HOME or ~/.cache; produces the base folder.
"""
from __future__ import annotations

import contextlib
import os
import tempfile


def build_base() -> str:
    return os.environ.get("COMPILED_BW_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "compiled_bw")


def write_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in its folder, renamed over it: a reader
    sees the whole old file or the whole new one (several processes may write it at once: the
    last one wins).  Creates the folder."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
