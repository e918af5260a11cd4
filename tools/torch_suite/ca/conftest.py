"""pytest plugin: run PyTorch's test/inductor/test_compiled_autograd.py with torch's compiled
autograd replaced, and record what happened per test.

Consumes: environment variables
  CA_MODE=noop|cbw            noop: torch._dynamo.compiled_autograd._enable / _disable do nothing,
                              so every backward the tests route through compiled autograd runs
                              plain eager autograd (the reference).  cbw: _enable(...) enters
                              compiled_bw.enable(backend=$CA_BACKEND, cache_size_limit=100000)
                              instead (strict stays False); _disable does nothing.
                              Unset/"torch": nothing patched (torch's own compiled autograd).
  CA_BACKEND=eager|inductor   compiled_bw backend in cbw mode (default eager)
  CA_LOG=path.jsonl           one JSON line per test (default out/<mode>.jsonl)
  CA_TEST_TIMEOUT=seconds     per-test alarm (SIGALRM, main thread; default 600, 0 = none)
  CA_REAL_TEST_AUTOGRAD=1     load ../pytorch/test_autograd.py for the file's
                              load_test_module("test_autograd") instead of the empty stub
Produces: the JSON lines (same fields as ../pytorch/conftest.py, so ../diff_suite.py reads them,
  plus "ca_enters": how often the test entered the patched _enable).

Every entry point the test file uses goes through the module attribute
torch._dynamo.compiled_autograd._enable: the test's own `compiled_autograd._enable(fn)`, and
`torch._dynamo.config.compiled_autograd = True` + torch.compile (eval_frame.py's
OptimizeContext enters torch._dynamo.compiled_autograd._enable(...) around the compiled frame).
The file defines no public `enable` use; `_disable` is patched too.

The test file loads three sibling test modules at import through its load_test_module()
(importlib.machinery.SourceFileLoader on <test dir>/<name>.py).  Those were not fetched (or, for
test_autograd.py, are covered by ../run_suite.sh): importlib.machinery.SourceFileLoader is
replaced, while the test module is collected, by a subclass that redirects those paths to
stubs/ (empty TestCase classes), so their wrapped *WithCompiledAutograd classes hold no tests.

compiled_bw is imported here, before the test module, because it observes hook registrations
and custom autograd.Function forwards only from its import on.
"""
import contextlib
import importlib.machinery
import os
import signal
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("CA_MODE", "torch")
BACKEND = os.environ.get("CA_BACKEND", "eager")
TAG = {"noop": "noop", "cbw": f"cbw_{BACKEND}"}.get(MODE, "torch")
LOG_PATH = os.environ.get("CA_LOG", str(HERE / "out" / f"{TAG}.jsonl"))
TIMEOUT = int(os.environ.get("CA_TEST_TIMEOUT", "600"))

if MODE == "cbw":
    import compiled_bw

import torch._dynamo.compiled_autograd as _ca  # noqa: E402 -- after compiled_bw, in cbw mode

sys.path.insert(0, str(HERE.parent))
import suite_log  # noqa: E402 -- tools/torch_suite/suite_log.py

_ENTERS = [0]
_ORIG = {"_enable": _ca._enable, "_disable": _ca._disable}


def _noop_enable(compiler_fn=None, dynamic=True, ignore_active_disable_ctx=True):
    _ENTERS[0] += 1
    return contextlib.nullcontext()


def _cbw_enable(compiler_fn=None, dynamic=True, ignore_active_disable_ctx=True):
    _ENTERS[0] += 1
    return compiled_bw.enable(backend=BACKEND, cache_size_limit=100000)


def _noop_disable():
    return contextlib.nullcontext()


if MODE == "noop":
    _ca._enable = _noop_enable
    _ca._disable = _noop_disable
elif MODE == "cbw":
    _ca._enable = _cbw_enable
    _ca._disable = _noop_disable


# --- sibling test modules: redirect to stubs ---------------------------------------------
_TESTDIR = HERE.parent            # Path(test file).parent.parent, as load_test_module computes it
_REDIRECT = {
    _TESTDIR / "test_autograd.py": (
        _TESTDIR / "pytorch" / "test_autograd.py"
        if os.environ.get("CA_REAL_TEST_AUTOGRAD") else HERE / "stubs" / "test_autograd.py"),
    _TESTDIR / "test_custom_ops.py": HERE / "stubs" / "test_custom_ops.py",
    _TESTDIR / "dynamo" / "test_higher_order_ops.py": HERE / "stubs" / "dynamo" / "test_higher_order_ops.py",
}
_OrigLoader = importlib.machinery.SourceFileLoader
if os.environ.get("CA_REAL_TEST_AUTOGRAD"):     # its `from autograd.test_complex import ...`
    sys.path.append(str(_TESTDIR / "pytorch"))


class _RedirectingLoader(_OrigLoader):
    def __init__(self, fullname, path):
        p = Path(path)
        super().__init__(fullname, str(_REDIRECT.get(p, p)))


def pytest_collectstart(collector):
    importlib.machinery.SourceFileLoader = _RedirectingLoader


def pytest_collection_finish(session):
    importlib.machinery.SourceFileLoader = _OrigLoader


# --- per-test record ----------------------------------------------------------------------
_current = {}
_LOG = suite_log.SuiteLog(LOG_PATH)


class CATestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CATestTimeout(f"test exceeded CA_TEST_TIMEOUT={TIMEOUT}s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    enters0 = _ENTERS[0]
    before = suite_log.snapshot() if MODE == "cbw" else None
    old = None
    if TIMEOUT:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(TIMEOUT)
    try:
        outcome = yield
    finally:
        if TIMEOUT:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    st = suite_log.delta(before) if MODE == "cbw" else {}
    st["ca_enters"] = _ENTERS[0] - enters0
    _current[item.nodeid] = st
    del outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" and not rep.failed and not rep.skipped:
        return
    if rep.when != "call" and rep.skipped and rep.when != "setup":
        return
    err = ""
    tb_lines = []
    if rep.failed and call.excinfo is not None:
        msg = str(call.excinfo.value)
        err = f"{call.excinfo.typename}: {msg.splitlines()[0] if msg else ''}"
        # where in the test file it failed: a test that fails at its counter assertion under
        # both modes fails at a different line when compiled_bw's grads differ
        tb_lines = [e.lineno + 1 for e in call.excinfo.traceback
                    if str(e.path).endswith("test_compiled_autograd.py")]
    outcome_name = rep.outcome
    if hasattr(rep, "wasxfail"):
        outcome_name = "xfailed" if rep.skipped else "xpassed"
    if rep.when != "call" and rep.failed:
        outcome_name = "error"
    rec = {"nodeid": item.nodeid, "when": rep.when, "mode": TAG, "outcome": outcome_name,
           "duration": round(rep.duration, 3), "error": err[:500], "err_lines": tb_lines, "time": time.time()}
    if rep.when == "call":
        rec["stats"] = _current.pop(item.nodeid, None)
    _LOG.write(rec)
