#!/usr/bin/env bash
# Runs the published sru package's own test suites (asappresearch/sru at v2.6.0 and 3.0.0.dev6, fetched from
# GitHub: needs the network, so not part of CI) unmodified against rnnx's SRU / SRUCell / SRUpp / SRUppCell,
# which tests/sru_shim puts under the package's names. Prints each suite's pytest summary; exits non-zero
# when one fails. CUDA cases skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for release in v2.6.0:2.6.0 3.0.0.dev6:3.0.0.dev6; do
  tag=${release%%:*}
  version=${release##*:}
  git clone -q --depth 1 --branch "$tag" https://github.com/asappresearch/sru "$work/$tag"
  echo "== sru $version's own suite against rnnx"
  (cd "$work/$tag" && SRU_SHIM_VERSION="$version" PYTHONPATH="$root/tests/sru_shim${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning test/sru test/regression test/test_amp.py \
    | tail -n 1) || status=1
done
exit $status
