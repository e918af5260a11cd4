"""Per-test records of the suite harnesses (pytorch/conftest.py, ca/conftest.py).

Consumes compiled_bw.stats() before and after a test; produces JSON lines appended to a log
file: `SuiteLog(path).write(record)`, and `snapshot()` / `delta(before)` for the per-test change
of captures, cache hits, fallbacks (with reasons) and notes.
"""
import json
import os


class SuiteLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._file = None

    def write(self, rec: dict) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = open(self.path, "a", buffering=1)
        self._file.write(json.dumps(rec, default=str) + "\n")


def snapshot():
    import compiled_bw  # here: a reference (eager) run never imports it
    s = compiled_bw.stats()
    return (s, s.captures, s.cache_hits, s.fallbacks, len(s.fallback_reasons), len(s.notes))


def delta(before) -> dict:
    import compiled_bw
    s0, cap, hits, fb, nreasons, nnotes = before
    s = compiled_bw.stats()
    if s is not s0:     # a test called compiled_bw.reset(): count from zero
        cap = hits = fb = nreasons = nnotes = 0
    return {
        "captures": s.captures - cap,
        "cache_hits": s.cache_hits - hits,
        "fallbacks": s.fallbacks - fb,
        "fallback_reasons": [str(r) for r in s.fallback_reasons[nreasons:]],
        "notes": [str(n) for n in s.notes[nnotes:]],
    }
