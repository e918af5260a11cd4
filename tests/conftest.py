import atexit
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# One Inductor cache per test session, set before anything imports torch._inductor: identical
# graphs compiled by different tests (or steps) load the compiled artefact instead of
# recompiling, and nothing leaks in from earlier runs or other checkouts.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="compiled_bw_inductor_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# Inductor compiles in the foreground here (users get background compiles by default), so
# the Inductor-compiled callable runs from the first step of every differential test;
# tests/test_background_compile.py tests the background path.
os.environ.setdefault("COMPILED_BW_BACKGROUND_COMPILE", "0")

# The differential files run twice in one pytest session: on the eager backend and on
# Inductor (the backend is read by differential.selected_backend()).
BOTH_BACKENDS = {"test_core", "test_signature", "test_subclass", "test_leaf_delivery",
                 "test_checkpoint"}


@pytest.fixture(autouse=True)
def cbw_backend(request, monkeypatch):
    backend = getattr(request, "param", None)
    if backend is not None:
        monkeypatch.setenv("COMPILED_BW_TEST_BACKEND", backend)
    return backend


@pytest.fixture(autouse=True)
def cbw_device():
    """COMPILED_BW_TEST_DEVICE=cuda runs a suite with tensors made on that device by default
    (tools/gpu_check.sh runs the differential suites so on a GPU)."""
    dev = os.environ.get("COMPILED_BW_TEST_DEVICE")
    if not dev:
        yield None
        return
    import torch
    torch.set_default_device(dev)
    try:
        yield dev
    finally:
        torch.set_default_device(None)


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__ in BOTH_BACKENDS and "cbw_backend" in metafunc.fixturenames:
        metafunc.parametrize("cbw_backend", ["eager", "inductor"], indirect=True)


def _fastwalk_requested() -> bool:
    return os.environ.get("COMPILED_BW_FASTWALK", "1") not in ("", "0")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The C++ walk on (the default): say how many steps it did (capture/fastwalk.py)."""
    if not _fastwalk_requested():
        return
    from compiled_bw.capture import fastwalk
    c = fastwalk.counters()
    terminalreporter.write_line(
        f"C++ walk: {c['fast_walks']} steps walked in C++, {c['py_walks']} by the Python walk "
        f"(gave up: {c['gave_up']}){' UNAVAILABLE: ' + c['error'] if c['error'] else ''}")


def pytest_sessionfinish(session, exitstatus):
    if _fastwalk_requested():
        from compiled_bw.capture import fastwalk
        if fastwalk.counters()["error"]:
            session.exitstatus = 1      # the C++ walk was asked for but could not be loaded
