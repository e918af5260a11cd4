"""Where compiled_bw keeps what it builds per machine (the C++ walk, generated node tables),
how it writes files other processes may read at the same time, and how it imports a built
extension module by its path.

Consumes $COMPILED_BW_BUILD_DIR, else $XDG_CACHE_HOME or ~/.cache; produces the base folder.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from types import ModuleType


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


def import_extension(name: str, path: str) -> ModuleType:
    """The CPython extension module at `path` (its init function: PyInit_<last part of name>),
    imported under `name` as importlib imports a file, without torch's build machinery."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
