"""pytest plugin: run PyTorch's own test files under compiled_bw and record what happened.

Consumes: environment variables
  COMPILED_BW_SUITE=1                 run every test inside compiled_bw.enable(...) (unset: eager autograd)
  COMPILED_BW_SUITE_BACKEND=eager     backend passed to enable() ("eager" | "inductor")
  COMPILED_BW_SUITE_LOG=path.jsonl    where to write one JSON line per test (default: suite_<mode>.jsonl)
  COMPILED_BW_SUITE_CACHE_LIMIT=N     enable(cache_size_limit=N) (default: compiled_bw's, 8); the
                                      limit counts graphs per root signature across the whole
                                      process, so in a 600-test run it trips on unrelated tests
Produces: one JSON line per test phase "call" (and per failed setup/teardown) with
  nodeid, outcome (passed/failed/skipped/error), duration, the error's first line, and under
  compiled_bw the per-test delta of compiled_bw.stats(): captures, cache_hits, fallbacks,
  fallback_reasons, notes.

compiled_bw is imported here, before pytest imports any test module, because it observes hook
registrations and custom autograd.Function forwards only from its import on.
"""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import suite_log

SUITE = os.environ.get("COMPILED_BW_SUITE", "") not in ("", "0")
BACKEND = os.environ.get("COMPILED_BW_SUITE_BACKEND", "eager")
CACHE_LIMIT = os.environ.get("COMPILED_BW_SUITE_CACHE_LIMIT", "")
MODE = f"compiled_bw-{BACKEND}" if SUITE else "eager"
LOG_PATH = os.environ.get("COMPILED_BW_SUITE_LOG", f"suite_{MODE}.jsonl")

if SUITE:
    import compiled_bw

_current = {}
_LOG = suite_log.SuiteLog(LOG_PATH)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not SUITE:
        _current[item.nodeid] = None
        yield
        return
    before = suite_log.snapshot()
    kw = {"cache_size_limit": int(CACHE_LIMIT)} if CACHE_LIMIT else {}
    with compiled_bw.enable(backend=BACKEND, **kw):
        outcome = yield
    _current[item.nodeid] = suite_log.delta(before)
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
    if rep.failed and call.excinfo is not None:
        err = f"{call.excinfo.typename}: {str(call.excinfo.value).splitlines()[0] if str(call.excinfo.value) else ''}"
    outcome_name = rep.outcome
    if hasattr(rep, "wasxfail"):
        outcome_name = "xfailed" if rep.skipped else "xpassed"
    if rep.when != "call" and rep.failed:
        outcome_name = "error"
    rec = {"nodeid": item.nodeid, "when": rep.when, "mode": MODE, "outcome": outcome_name,
           "duration": round(rep.duration, 3), "error": err[:500], "time": time.time()}
    if rep.when == "call":
        rec["stats"] = _current.pop(item.nodeid, None)
    _LOG.write(rec)
