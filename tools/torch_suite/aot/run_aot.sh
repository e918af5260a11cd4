#!/usr/bin/env bash
# Run (the kept part of) PyTorch's test/functorch/test_aotdispatch.py under eager autograd and
# under compiled_bw: ../run_suite.sh on this directory (conftest.py is ../pytorch/conftest.py),
# every compiled_bw run with cache_size_limit 100000, the venv /tmp/v2.15.0 by default.
# Usage: ./run_aot.sh eager|cbw_nolimit|inductor|all [pytest args]   (env SUITE_K, SUITE_TIMEOUT,
#   SUITE_NAME, SUITE_NODEIDS as in ../run_suite.sh)
#   all = eager, then cbw_nolimit.  inductor runs the node ids in $SUITE_NODEIDS
#   (default out/cbw_eager_nolimit_captured.txt, written by diff_suite.py).
set -u
cd "$(dirname "$0")"
export VENV=${VENV:-/tmp/v2.15.0} SUITE_DIR=aot SUITE_FILES=test_aotdispatch.py
export COMPILED_BW_BUILD_DIR=${COMPILED_BW_BUILD_DIR:-/tmp/cbw_build_aot}
export COMPILED_BW_SUITE_CACHE_LIMIT=${COMPILED_BW_SUITE_CACHE_LIMIT:-100000}
P=${SUITE_NAME:+${SUITE_NAME}_}
export SUITE_NODEIDS=${SUITE_NODEIDS:-$([ "${1:-all}" = inductor ] && echo "out/${P}cbw_eager_nolimit_captured.txt")}
# SUITE_K: pytest -k expression; default leaves out the OpInfo/ModuleInfo classes (2768 + 252
# parametrized tests whose expected-failure lists need functorch/common_utils.py, not fetched)
K=${SUITE_K-not TestEagerFusion}
what=${1:-all}; shift || true
case $what in
  all) ../run_suite.sh eager ${K:+-k "$K"} "$@"; ../run_suite.sh cbw_nolimit ${K:+-k "$K"} "$@" ;;
  *)   ../run_suite.sh "$what" ${K:+-k "$K"} "$@" ;;
esac
