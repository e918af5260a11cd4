#!/usr/bin/env bash
# What a developer runs before resolving an issue: everything CI runs and what it leaves out.
#   tools/full_check.sh            # this venv's whole suite, with the tests CI leaves out
#                                  # (COMPILED_BW_FULL_CHECK=1, Note [Full check]), then the
#                                  # quick suite on every supported release in fresh venvs
#   tools/full_check.sh --here     # only this venv's whole suite
# About 70 minutes for the suite on 2 cores, plus ~10 per release (each a ~3 GB torch download
# from PyPI, a C++ walk build and the quick suite).  Exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
par=()
python -c "import xdist" 2>/dev/null && par=(-n 2)
COMPILED_BW_FULL_CHECK=1 python -m pytest -q -p no:cacheprovider "${par[@]}" tests || status=1
if [ "${1:-}" != "--here" ]; then
  for v in 2.11.0 2.12.1 2.14.1 2.15.0; do
    tools/release_check.sh "$v" --quick || { echo "full_check: torch $v FAILED"; status=1; }
  done
fi
echo "full_check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
