#!/usr/bin/env bash
# One short device call (one H200): lab/probes/batch_trace_probe.cu (its kernel of the probe's
# types only) with the body on the pool's payload in shared memory and on a copy in registers.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/payload-copy-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft || exit 1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -DPROBE_ALONE \
  -Iinclude -Iapps/gpu lab/probes/batch_trace_probe.cu build-gpu/src/libweft.a -lhwloc \
  -o "$work/bt" > "$work/build-probe.log" 2>&1 || tail -20 "$work/build-probe.log"
echo "built at $(($(date +%s) - t0)) s"
timeout 40 "$work/bt" 200 two | grep -v "round ended"
echo "done at $(($(date +%s) - t0)) s"
