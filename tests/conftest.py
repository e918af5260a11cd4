import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# One Inductor cache per test session, set before anything imports torch._inductor: identical
# graphs compiled by different tests (or steps) load the compiled artefact instead of
# recompiling, and nothing leaks in from earlier runs or other checkouts.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="compiled_bw_inductor_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
