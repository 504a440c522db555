#!/usr/bin/env bash
# One device call (one H200): lab/probes/batch_trace_probe.cu built three ways (the probe's
# DGEMM body inlined into a kernel of the apps' types; called out of line; inlined into a
# kernel of two types), each run on the default pool and with 8 scheduler lanes (300 reps),
# with ptxas's register and spill report of each build.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/batch-variants-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps || exit 1
libs="build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a"
build() {  # NAME FLAGS...
  local name=$1
  shift
  nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Xptxas -v \
    -Iinclude -Iapps/gpu "$@" lab/probes/batch_trace_probe.cu $libs -lhwloc \
    -o "$work/bt-$name" > "$work/build-$name.log" 2>&1
}
build inline &
build out_of_line -DPROBE_OUT_OF_LINE &
build alone -DPROBE_ALONE &
wait
echo "built at $(($(date +%s) - t0)) s"
for v in inline out_of_line alone; do
  echo "=== $v"
  grep -E "spill|Used [0-9]+ registers" "$work/build-$v.log" | sort | uniq -c | sort -rn | head -6
  timeout 60 "$work/bt-$v" 300 two | grep -v "round ended"
done
echo "done at $(($(date +%s) - t0)) s"
