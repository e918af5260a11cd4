#!/usr/bin/env bash
# Run PyTorch's test/test_autograd.py (+ test/autograd/{test_complex,test_functional,test_logging}.py)
# (or the PyTorch test files named in SUITE_FILES) under eager autograd and under compiled_bw,
# and diff the outcomes.
#
# Consumes: this directory (test_autograd.py, autograd/, conftest.py), a compiled_bw checkout
#   (CBW_ROOT, default: this repository), the Python environment (VENV: a venv to activate,
#   default: the current one), optional pylib/ with pytest_timeout.py
#   (pip install --target pytorch/pylib pytest-timeout).
# Produces: out/<mode>.xml (junit), out/<mode>.jsonl (per test: outcome + compiled_bw.stats()
#   delta), out/<mode>.log, and out/diff.txt (python diff_suite.py).
#
# Usage: ./run_suite.sh [eager|cbw|cbw_nolimit|inductor|all] [extra pytest args, e.g. -k test_hooks]
#   eager        COMPILED_BW_SUITE unset: plain eager autograd (the reference)
#   cbw          every test inside compiled_bw.enable(backend="eager")
#   cbw_nolimit  same with cache_size_limit=100000 (no cross-test cache-limit fallbacks)
#   inductor     enable(backend="inductor"), background compile off (so Inductor's code runs on
#                the first backward), on the tests listed in $SUITE_NODEIDS (default: those that
#                captured a graph in the cbw run, out/cbw_eager_captured.txt). Any run honours
#                COMPILED_BW_SUITE_CACHE_LIMIT=N (e.g. 100000: no cross-test cache-limit fallbacks).
# Procedure used for the report (2 cores, ~35 min):
#   ./run_suite.sh all                      # eager (2.5 min) + compiled_bw eager backend (7.5 min)
#   ./run_suite.sh cbw_nolimit              # 5.5 min; writes out/cbw_eager_nolimit_captured.txt via
#   python diff_suite.py eager cbw_eager_nolimit > out/diff_cbw_eager_nolimit.txt
#   COMPILED_BW_SUITE_CACHE_LIMIT=100000 SUITE_NODEIDS=out/cbw_eager_nolimit_captured.txt \
#       PER_TEST_TIMEOUT=240 ./run_suite.sh inductor      # ~30 min for 293 tests
#   all          eager then cbw
# Other PyTorch test files: SUITE_FILES (default test_autograd.py) lists pytest targets relative to
#   pytorch/, SUITE_NAME (default none) prefixes every out/ name so runs of different files do not
#   overwrite each other, e.g.
#   SUITE_NAME=hooks SUITE_FILES="nn/test_module_hooks.py test_utils.py::TestCheckpoint" \
#       COMPILED_BW_SUITE_CACHE_LIMIT=100000 ./run_suite.sh all      # out/hooks_eager.jsonl, ...
set -u
SUITE_DIR=${SUITE_DIR:-pytorch}    # the directory of the test files (aot/: ./aot/run_aot.sh)
cd "$(dirname "$0")/$SUITE_DIR"    # PyTorch's test files, with our conftest.py beside them
CBW_ROOT=${CBW_ROOT:-$(cd ../../.. && pwd)}
if [ -n "${VENV:-}" ]; then . "$VENV/bin/activate"; fi
export COMPILED_BW_BUILD_DIR=${COMPILED_BW_BUILD_DIR:-/tmp/cbw_build_suite}
export PYTHONPATH="$CBW_ROOT:$PWD/pylib"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p out
what=${1:-all}; shift || true
TIMEOUT_ARGS=()
if python -c "import pytest_timeout" 2>/dev/null; then TIMEOUT_ARGS=(--timeout "${PER_TEST_TIMEOUT:-300}"); fi

P=${SUITE_NAME:+${SUITE_NAME}_}    # prefix of every out/ name
run() {  # run <mode> <env...>
    local mode=$P$1; shift
    rm -f "out/$mode.jsonl"
    env "$@" COMPILED_BW_SUITE_LOG="out/$mode.jsonl" timeout "${SUITE_TIMEOUT:-2400}" \
        python -m pytest "${TARGETS[@]}" -p no:cacheprovider -q -n 0 -rfE "${TIMEOUT_ARGS[@]}" \
        --junitxml="out/$mode.xml" "${EXTRA[@]}" > "out/$mode.log" 2>&1
    echo "$mode: rc=$? $(tail -1 "out/$mode.log")"
}
EXTRA=("$@")
# SUITE_NODEIDS=file: run only those node ids (e.g. out/cbw_eager_captured.txt for the Inductor run)
read -r -a TARGETS <<< "${SUITE_FILES:-test_autograd.py}"
# (node ids as diff_suite.py writes them, relative to the repository root, made relative to pytorch/)
nodeids() { mapfile -t TARGETS < <(sed "s#^tools/torch_suite/$SUITE_DIR/##" "$1" | grep .); }
if [ -n "${SUITE_NODEIDS:-}" ]; then nodeids "$SUITE_NODEIDS"; fi
# -n 0 needs pytest-xdist; drop it when xdist is absent.
python -c "import xdist" 2>/dev/null || run() {  # same as above without -n 0
    local mode=$P$1; shift
    rm -f "out/$mode.jsonl"
    env "$@" COMPILED_BW_SUITE_LOG="out/$mode.jsonl" timeout "${SUITE_TIMEOUT:-2400}" \
        python -m pytest "${TARGETS[@]}" -p no:cacheprovider -q -rfE "${TIMEOUT_ARGS[@]}" \
        --junitxml="out/$mode.xml" "${EXTRA[@]}" > "out/$mode.log" 2>&1
    echo "$mode: rc=$? $(tail -1 "out/$mode.log")"
}

case $what in
  eager)    run eager COMPILED_BW_SUITE=0 ;;
  cbw)      run cbw_eager COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=eager ;;
  inductor) SUITE_NODEIDS=${SUITE_NODEIDS:-out/${P}cbw_eager_captured.txt}
            nodeids "$SUITE_NODEIDS"
            run cbw_inductor COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=inductor \
                COMPILED_BW_BACKGROUND_COMPILE=0 ;;
  cbw_nolimit) run cbw_eager_nolimit COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=eager \
                COMPILED_BW_SUITE_CACHE_LIMIT=100000 ;;
  all)      run eager COMPILED_BW_SUITE=0
            run cbw_eager COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=eager ;;
  *) echo "usage: $0 [eager|cbw|cbw_nolimit|inductor|all] [pytest args]"; exit 2 ;;
esac
for m in cbw_eager cbw_eager_nolimit cbw_inductor; do
    [ -f "out/$P$m.jsonl" ] && python ../diff_suite.py "${P}eager" "$P$m" > "out/${P}diff_$m.txt" 2>&1 \
        && echo "diff: out/${P}diff_$m.txt"
done
