#!/usr/bin/env bash
# One device-tool call for a change to the GPU pool: scripts/gpu-check.sh (tests, fault test,
# host tests, compute-sanitizer), scripts/gpu-bench.sh (weft bench gpu-pool), then the latency
# trace, the busy-fraction, fence, completion (the host's floor on this machine instance:
# instances differ up to 3x in host-bound figures) and racecheck probes. Everything lands in
# $OUT as at most six files (the device tool brings back eight): gpu-check.md,
# gpu-pool.{json,md,log}, probes.txt, and a summary printed last. Pass the commit:
# WEFT_COMMIT=<hash> bash lab/scripts/gpu-session.sh (the tree sent to the GPU machine has no
# .git). About 5 minutes on an H100 machine from a fresh start.
# Runs from the repository's root (a relative $OUT is taken from there); the probes are
# lab/probes/.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-gpu-session-out}
mkdir -p "$out"
export OUT="$out"
export WEFT_MACHINE=${WEFT_MACHINE:-$(scripts/machine-name.sh)}
probes=$(mktemp -d)
(
  cd lab/probes || exit 1
  n="nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I../../include"
  s="../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp"
  $n -DWEFT_POOL_TRACE latency_trace.cu $s -o "$probes/latency_trace" &
  $n busy_probe.cu $s -o "$probes/busy_probe" &
  $n fence_probe.cu -o "$probes/fence_probe" &
  $n mbarrier_racecheck_probe.cu -o "$probes/mbarrier_racecheck_probe" &
  $n completion_probe.cu -o "$probes/completion_probe" &
  wait
) > "$probes/build.log" 2>&1 &
probe_build=$!
timeout 300 bash scripts/gpu-check.sh
check_rc=$?
timeout 240 bash scripts/gpu-bench.sh > "$probes/bench-console.log" 2>&1
bench_rc=$?
wait "$probe_build"
{
  echo "== latency trace"
  timeout 60 "$probes/latency_trace"
  echo "== busy probe (10 us tasks)"
  timeout 90 "$probes/busy_probe" --short
  echo "== fence probe"
  timeout 60 "$probes/fence_probe"
  echo "== the host's floor on this machine instance (completion_probe 792 500)"
  timeout 90 "$probes/completion_probe" 792 500
  echo "== which shared-memory hand-offs racecheck models (mbarrier_racecheck_probe)"
  for v in 0 1 2 3 4 5 6 7 8 9 10; do
    timeout 60 compute-sanitizer --tool racecheck "$probes/mbarrier_racecheck_probe" $v 2>&1 |
      grep -E "variant|RACECHECK SUMMARY"
  done
} > "$out/probes.txt" 2>&1
printf '\n== gpu-session summary ==\ngpu-check rc=%s, gpu-bench rc=%s\n' "$check_rc" "$bench_rc"
if [ -f "$out/gpu-pool.json" ]; then
  python3 - "$out/gpu-pool.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
for k in ["empty_task_ns_batched", "empty_task_ns_single", "latency_p50_us", "latency_p99_us",
          "idle_poll_pcie_fraction", "busy_fraction_10us", "busy_fraction_10us_1_block_per_sm"]:
    if k in m:
        print(f"{k:40s} {m[k]['value']:.4g}")
EOF
fi
