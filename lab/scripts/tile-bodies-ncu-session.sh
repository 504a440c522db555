#!/usr/bin/env bash
# One device call (one H200), about 150 s: where CholeskyPool's four-part POTRF and TRSM tile
# bodies spend their time, as plain kernels of 256 threads (decision 045: a fourth of the work
# per thread took only a tenth off; is a step bound by its latency chain, by shared memory, or
# by the staging?).
#   1. lab/probes/cholesky_tiles_probe.cu parts4: each body timed inside its kernel, built as
#      is and with the pool's register cap (-maxrregcount=168);
#   2. Nsight Compute on one launch of each four-part body: warp stall reasons, the source
#      lines where warps stall, the pipes' and shared memory's use;
#   3. the probe's SASS (cuobjdump), brought back in the session's tar.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/tile-bodies-ncu-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
build() {  # $1: output, then nvcc flags
  local exe=$1
  shift
  nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -lineinfo "$@" -Iinclude -Iapps/gpu \
    -Ilab/probes lab/probes/cholesky_tiles_probe.cu -o "$exe" > "$exe.log" 2>&1 ||
    { tail -20 "$exe.log"; exit 1; }
}
build "$work/ctp"
build "$work/ctp168" -maxrregcount=168
at built
echo "-- as built"
timeout 60 "$work/ctp" parts4 | tee "$work/parts4.txt"
echo "-- at 168 registers"
timeout 60 "$work/ctp168" parts4 | tee "$work/parts4-168.txt"
for body in PotrfTileT TrsmTileT; do
  at "ncu $body<4>"
  name=${body}4
  # ncu names the instance timed_body<apps::gpu::PotrfTileT<(int)4>>
  timeout 150 ncu --clock-control none --kernel-name-base demangled -k "regex:$body<.int.4>" \
    --launch-skip 3 --launch-count 1 --section WarpStateStats --section SourceCounters \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section InstructionStats \
    --print-details all "$work/ctp" parts4 > "$work/ncu-$name.txt" 2>&1
  grep -vE "^\| |^GPU warmed|^==PROF==" "$work/ncu-$name.txt" | grep -E \
    "Duration|Stall|stall|Bank|Shared|Warp Cycles|Issued Ipc|Executed Ipc|Pipe|Instructions|Sampling|cholesky_tiles|Registers|Elapsed" |
    head -70
done
at "sass"
cuobjdump --dump-sass "$work/ctp" > "$work/ctp.sass" 2>&1
grep -c "" "$work/ctp.sass"
at done
