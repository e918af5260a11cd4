"""Where compiled_bw keeps what it builds per machine (the C++ walk, generated node tables).

Consumes $COMPILED_BW_BUILD_DIR, else $XDG_CACHE_HOME or ~/.cache; produces the base folder.
"""
from __future__ import annotations

import os


def build_base() -> str:
    return os.environ.get("COMPILED_BW_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "compiled_bw")
