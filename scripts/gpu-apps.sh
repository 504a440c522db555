#!/usr/bin/env bash
# Builds the weft tool for sm_90 on the GPU machine (as it is: no installs) and runs
# `weft bench gpu-apps` (docs/apps.md), writing $OUT/gpu-apps.json, .md, .svg and the console
# log. The tree sent to that machine has no .git: pass the commit as WEFT_COMMIT=<hash>.
# WEFT_BENCH_ARGS adds arguments (e.g. --quick).
set -euo pipefail
out=${OUT:-gpu-apps-out}
mkdir -p "$out"
detected=$(scripts/machine-name.sh)
machine=${WEFT_MACHINE:-$detected}
# A name given by hand that the GPUs here contradict (a call for one kind served by another)
# would file the results under the wrong machine: say so loudly.
if [ "$machine" != "$detected" ]; then
  echo "$0: WEFT_MACHINE=$machine, but this machine's GPUs make it $detected" >&2
fi
scripts/gpu-build.sh "$(mktemp -d)" weft_cli
WEFT_MACHINE=$machine build-gpu/tools/weft/weft bench gpu-apps ${WEFT_BENCH_ARGS:-} \
  --json "$out/gpu-apps.json" 2>&1 | tee "$out/gpu-apps.log"
