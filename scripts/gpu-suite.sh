#!/usr/bin/env bash
# What scripts/gpu-bench.sh and scripts/gpu-apps.sh share: builds the weft tool for sm_90 on the
# GPU machine (as it is: no installs) and runs `weft bench SUITE`, writing $OUT/SUITE.json, .md
# (and .svg where the suite draws one) and the console log SUITE.log.
#   scripts/gpu-suite.sh SUITE DEFAULT_OUT
# The tree sent to that machine has no .git: pass the commit as WEFT_COMMIT=<hash>.
# WEFT_BENCH_ARGS adds arguments (e.g. --quick); WEFT_MACHINE overrides the machine's name.
set -euo pipefail
suite=$1
out=${OUT:-$2}
mkdir -p "$out"
detected=$(scripts/machine-name.sh)
machine=${WEFT_MACHINE:-$detected}
# A name given by hand that the GPUs here contradict (a call for one kind served by another)
# would file the results under the wrong machine: say so loudly.
if [ "$machine" != "$detected" ]; then
  echo "$0: WEFT_MACHINE=$machine, but this machine's GPUs make it $detected" >&2
fi
scripts/gpu-build.sh "$(mktemp -d)" weft_cli
WEFT_MACHINE=$machine build-gpu/tools/weft/weft bench "$suite" ${WEFT_BENCH_ARGS:-} \
  --json "$out/$suite.json" 2>&1 | tee "$out/$suite.log"
