#!/usr/bin/env bash
# Run (the kept part of) PyTorch's test/functorch/test_aotdispatch.py under eager autograd and
# under compiled_bw, with ../pytorch/conftest.py's logging (copied here as conftest.py), then
# diff with ../diff_suite.py.  Same modes as ../run_suite.sh (which is cd'd to ../pytorch/).
# Usage: ./run_aot.sh eager|cbw_nolimit|inductor|all [pytest args]   (env SUITE_K, SUITE_TIMEOUT)
#   all = eager, then cbw_nolimit.  inductor runs the node ids in $SUITE_NODEIDS
#   (default out/cbw_eager_nolimit_captured.txt, written by diff_suite.py).
set -u
cd "$(dirname "$0")"
. "${VENV:-/tmp/v2.15.0}/bin/activate"
export COMPILED_BW_BUILD_DIR=${COMPILED_BW_BUILD_DIR:-/tmp/cbw_build_aot}
export PYTHONPATH=$(cd ../../.. && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p out
what=${1:-all}; shift || true
# SUITE_K: pytest -k expression; default leaves out the OpInfo/ModuleInfo classes (2768 + 252
# parametrized tests whose expected-failure lists need functorch/common_utils.py, not fetched)
K=${SUITE_K-not TestEagerFusion}
EXTRA=(${K:+-k "$K"} "$@")
TARGETS=(test_aotdispatch.py)
# SUITE_NODEIDS=file (any mode): run only those node ids (repository-relative, as diff_suite.py
# writes them), e.g. the OpInfo sample: SUITE_K= SUITE_NAME=opinfo SUITE_NODEIDS=out/opinfo_sample.txt
nodeids() { mapfile -t TARGETS < <(sed 's#^tools/torch_suite/aot/##' "$1" | grep .); }
if [ -n "${SUITE_NODEIDS:-}" ]; then nodeids "$SUITE_NODEIDS"; fi
P=${SUITE_NAME:+${SUITE_NAME}_}    # prefix of every out/ name
run() {  # run <mode> <env...>
    local mode=$P$1; shift
    rm -f "out/$mode.jsonl"
    # no pytest-timeout in the venv: per-run timeout only
    env "$@" COMPILED_BW_SUITE_LOG="out/$mode.jsonl" timeout "${SUITE_TIMEOUT:-2400}" \
        python -m pytest "${TARGETS[@]}" -p no:cacheprovider -q -n 0 -rfE \
        --junitxml="out/$mode.xml" "${EXTRA[@]}" > "out/$mode.log" 2>&1
    echo "$mode: rc=$? $(tail -1 "out/$mode.log")"
}
case $what in
  eager) run eager COMPILED_BW_SUITE=0 ;;
  cbw_nolimit) run cbw_eager_nolimit COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=eager \
                COMPILED_BW_SUITE_CACHE_LIMIT=100000 ;;
  inductor) nodeids "${SUITE_NODEIDS:-out/${P}cbw_eager_nolimit_captured.txt}"
            run cbw_inductor COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=inductor \
                COMPILED_BW_SUITE_CACHE_LIMIT=100000 COMPILED_BW_BACKGROUND_COMPILE=0 ;;
  all) run eager COMPILED_BW_SUITE=0
       run cbw_eager_nolimit COMPILED_BW_SUITE=1 COMPILED_BW_SUITE_BACKEND=eager \
           COMPILED_BW_SUITE_CACHE_LIMIT=100000 ;;
  *) echo "usage: $0 eager|cbw_nolimit|inductor|all [pytest args]"; exit 2 ;;
esac
for m in cbw_eager_nolimit cbw_inductor; do
    [ -f "out/$P$m.jsonl" ] && python ../diff_suite.py "${P}eager" "$P$m" > "out/${P}diff_$m.txt" 2>&1 \
        && echo "diff: out/${P}diff_$m.txt"
done
