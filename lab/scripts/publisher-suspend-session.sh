#!/usr/bin/env bash
# One device call (one H200): the publisher's suspension A/B (decision 038), then gpu-check on
# the tree, then `weft bench gpu-apps --only batched_gemm`.
#   here:   mkdir -p ab/base/weft/gpu && git show <base>:include/weft/gpu/device.cuh \
#             > ab/base/weft/gpu/device.cuh
#   device (carry ["ab"]): WEFT_COMMIT=<hash> bash lab/scripts/publisher-suspend-session.sh
# lab/probes/batch_trace_probe.cu is built against the tree's include/ and against ab/base's
# device.cuh (the resident kernel before the change; everything else from include/), and the
# two run alternately, two rounds each (300 reps, the default pool and 8 lanes).
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps weft_cli || exit 1
libs="build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a"
build() {  # NAME FLAGS...
  local name=$1
  shift
  nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 "$@" -Iinclude \
    -Iapps/gpu lab/probes/batch_trace_probe.cu $libs -lhwloc -o "$work/bt-$name" \
    > "$work/build-$name.log" 2>&1
}
build base -Iab/base &
build tree &
wait
echo "built at $(($(date +%s) - t0)) s"
for round in 1 2; do
  for v in base tree; do
    echo "=== $v, round $round"
    timeout 60 "$work/bt-$v" 300 two | grep -v "round ended"
  done
done
echo "A/B done at $(($(date +%s) - t0)) s"
OUT=$work scripts/gpu-check.sh
echo "gpu-check done at $(($(date +%s) - t0)) s"
mkdir -p "$work/bench"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((590 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench gpu-apps --only batched_gemm \
  --json "$work/bench/gpu-apps.json" > "$work/bench/gpu-apps.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] [a-z_0-9]+ +\.' "$work/bench/gpu-apps.log"
