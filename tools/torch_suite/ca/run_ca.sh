#!/usr/bin/env bash
# Run PyTorch's test/inductor/test_compiled_autograd.py with compiled autograd replaced
# (conftest.py): noop (plain eager autograd, the reference) or compiled_bw.
# Usage: ./run_ca.sh noop|cbw|inductor [extra pytest args]
#   noop      CA_MODE=noop                       -> out/noop.{jsonl,xml,log}
#   cbw       CA_MODE=cbw CA_BACKEND=eager       -> out/cbw_eager.*
#   inductor  CA_MODE=cbw CA_BACKEND=inductor, COMPILED_BW_BACKGROUND_COMPILE=0, on the node ids
#             in $CA_NODEIDS (default out/cbw_eager_captured.txt, written by diff_ca.py)
#             -> out/cbw_inductor.*
# Env: VENV (default /tmp/v2.15.0), CA_TEST_TIMEOUT (s per test, default 300),
#      CA_SUITE_TIMEOUT (s for the whole run, default 3000), CA_NODEIDS (any mode: only these
#      node ids), CA_TAG (out/ name instead of noop/cbw_eager/cbw_inductor),
#      CA_REAL_TEST_AUTOGRAD=1 (load ../pytorch/test_autograd.py, conftest.py).
set -u
cd "$(dirname "$0")"
. "${VENV:-/tmp/v2.15.0}/bin/activate"
export COMPILED_BW_BUILD_DIR=${COMPILED_BW_BUILD_DIR:-/tmp/cbw_build_ca}
export PYTHONPATH=$(cd ../../.. && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export CA_TEST_TIMEOUT=${CA_TEST_TIMEOUT:-300}
mkdir -p out
what=${1:-noop}; shift || true
TARGETS=(test_compiled_autograd.py)
case $what in
  noop) tag=noop; export CA_MODE=noop ;;
  cbw)  tag=cbw_eager; export CA_MODE=cbw CA_BACKEND=eager ;;
  inductor) tag=cbw_inductor; export CA_MODE=cbw CA_BACKEND=inductor COMPILED_BW_BACKGROUND_COMPILE=0
            mapfile -t TARGETS < <(sed 's#^tools/torch_suite/ca/##' "${CA_NODEIDS:-out/cbw_eager_captured.txt}" | grep .) ;;
  *) echo "usage: $0 noop|cbw|inductor [pytest args]"; exit 2 ;;
esac
# any mode: CA_NODEIDS=file restricts the run to those node ids, CA_TAG renames the out/ files
if [ "$what" != inductor ] && [ -n "${CA_NODEIDS:-}" ]; then
    mapfile -t TARGETS < <(sed 's#^tools/torch_suite/ca/##' "$CA_NODEIDS" | grep .)
fi
tag=${CA_TAG:-$tag}
rm -f "out/$tag.jsonl"
CA_LOG="out/$tag.jsonl" timeout "${CA_SUITE_TIMEOUT:-3000}" python -m pytest "${TARGETS[@]}" \
    -p no:cacheprovider -q -n 0 -rfE --junitxml="out/$tag.xml" "$@" > "out/$tag.log" 2>&1
echo "$tag: rc=$? $(tail -1 "out/$tag.log")"
