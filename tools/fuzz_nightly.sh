#!/usr/bin/env bash
# Nightly differential fuzzing of compiled_bw: the 2000-example run of tests/test_fuzz.py
# (CI runs the default 200; this takes ~4 min on 2 cores).  Deterministic (derandomize=True).
# Extra pytest args pass through, e.g. --hypothesis-show-statistics.
# COMPILED_BW_FUZZ_STRICT=1 also fails on the known bugs the fuzzer otherwise tolerates.
# COMPILED_BW_FUZZ_SEED=N draws other programs (hypothesis seeded with N, not derandomized).
# COMPILED_BW_FUZZ_BACKEND=inductor fuzzes the Inductor backend instead (a compile per example).
set -euo pipefail
cd "$(dirname "$0")/.."
COMPILED_BW_FUZZ_EXAMPLES=2000 exec "${PYTHON:-python}" -m pytest -q tests/test_fuzz.py "$@"
