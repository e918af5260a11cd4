#!/usr/bin/env bash
# One torch release in a fresh virtual environment, as a user on that release installs us:
#   tools/release_check.sh VERSION            # CI's matrix: doctor + the release tests
#   tools/release_check.sh VERSION --quick    # the whole quick suite (-m "not slow")
#   tools/release_check.sh VERSION --prepare DIR   # install, build and doctor into DIR, kept
#   tools/release_check.sh VERSION --test DIR      # then the release tests there; removes DIR
# VERSION is a PyPI torch release (2.11.0 ... 2.15.0; the CUDA wheel runs on a CPU machine).
# Installs torch==VERSION with pip's constraint file lifted (these machines cap torch at
# 2.14.1), then the README's install command, which must keep that torch; builds the C++ walk,
# prints `python -m compiled_bw.doctor` and runs the tests.  The release tests (`-m release`,
# chosen in tests/conftest.py RELEASE_FILES) are the quick tests of the files that touch what
# differs between releases: private APIs, node tables, doctor, snapshots, checkpointing, AOT
# splicing, Dynamo, distributed and a real model.  Everything is made under a temporary folder
# and removed at the end; exits non-zero if a step failed.
# --prepare / --test split it so that .ci/run prepares two releases side by side (installing
# and building are one core each) and then tests them one after the other (pytest -n 2).
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:?usage: tools/release_check.sh VERSION [--quick | --prepare DIR | --test DIR]}
scope=${2:-}
if [ "$scope" = "--prepare" ] || [ "$scope" = "--test" ]; then
  work=${3:?usage: tools/release_check.sh VERSION $scope DIR}
  mkdir -p "$work"
else
  work=$(mktemp -d)
fi
[ "$scope" = "--prepare" ] || trap 'rm -rf "$work"' EXIT
export PIP_CONSTRAINT="$work/no-constraint.txt" COMPILED_BW_BUILD_DIR="$work/build" \
  TORCHINDUCTOR_CACHE_DIR="$work/inductor" PIP_DISABLE_PIP_VERSION_CHECK=1
t0=$SECONDS
if [ "$scope" != "--test" ]; then
  : >"$work/no-constraint.txt"
  python3 -m venv "$work/venv"
  . "$work/venv/bin/activate"
  # $CBW_WHEELS/VERSION: the wheels .ci/run downloaded while its suite ran (else from PyPI)
  if [ -d "${CBW_WHEELS:-}/$v" ]; then
    pip install -q --no-index --find-links "$CBW_WHEELS/$v" "torch==$v" || pip install -q "torch==$v"
  else
    pip install -q "torch==$v"
  fi
  install_cmd=$(grep -m1 '^pip install' README.md | sed 's/ *#.*//; s/ *&&.*//')
  echo "+ $install_cmd"
  # The editable install writes compiled_bw.egg-info into the checkout: one at a time where
  # two releases are prepared side by side.
  flock "$(git rev-parse --git-dir 2>/dev/null || echo /tmp)/release_check.lock" \
    bash -c "$install_cmd -q"
  got=$(python -c "import torch; print(torch.__version__.split('+')[0])")
  [ "$got" = "$v" ] || { echo "release_check: the install changed torch $v to $got"; exit 1; }
  echo "release_check $v: installed in $((SECONDS - t0)) s"
  python -m compiled_bw.build
  python -m compiled_bw.doctor
  if [ "$scope" = "--prepare" ]; then
    echo "release_check $v: prepared in $((SECONDS - t0)) s"
    exit 0
  fi
else
  . "$work/venv/bin/activate"
fi
sel=(-m release)
[ "$scope" = "--quick" ] && sel=(-m "not slow")
par=()
python -c "import xdist" 2>/dev/null && par=(-n 2)
python -m pytest -q -p no:cacheprovider "${par[@]}" "${sel[@]}" tests
echo "release_check $v: passed in $((SECONDS - t0)) s"
