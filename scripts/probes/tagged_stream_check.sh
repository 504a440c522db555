#!/usr/bin/env bash
# For branch tagged-records (docs/gpu.md, "Tagged records"): needs ab/a2cb1f2 (scripts/gpu-ab.sh prepare a2cb1f2),
# ab/tree-c6f4ef0 and ab/tree-a2cb1f2 (prepare-tree); carry "ab". Run on the GPU machine from the repository root.
# busy_probe (ring levels) and latency_trace: main (old) against the streamed tagged pool
# (ab/a2cb1f2), then `weft bench gpu-pool` of ab/tree-c6f4ef0 and ab/tree-a2cb1f2, once each.
set -u
b=$(mktemp -d)
n="nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90"
t=ab/a2cb1f2
s="$t/src/gpu/device_blocks.cu $t/src/gpu/host_blocks.cpp"
$n -DWEFT_PROBE_RING_LEVELS -Iinclude scripts/probes/busy_probe.cu src/gpu/device_blocks.cu src/gpu/host_blocks.cpp -o $b/old &
$n -DWEFT_PROBE_RING_LEVELS -I$t/include $t/busy_probe.cu $s -o $b/new &
$n -DWEFT_POOL_TRACE -Iinclude -Iscripts/probes scripts/probes/latency_trace.cu src/gpu/device_blocks.cu src/gpu/host_blocks.cpp -o $b/lat_old &
$n -DWEFT_POOL_TRACE -I$t/include -Iscripts/probes $t/latency_trace.cu $s -o $b/lat_new &
build() {
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_TESTS=OFF > "$2.log" 2>&1 &&
    cmake --build "$2" -j 6 --target weft_cli >> "$2.log" 2>&1 || tail -20 "$2.log"
}
build ab/tree-c6f4ef0 $b/tree_old &
build ab/tree-a2cb1f2 $b/tree_new &
wait
for v in old new; do echo "=== $v"; timeout 60 $b/$v --short 2>&1 | head -8; done
for v in lat_old lat_new; do echo "=== $v"; timeout 60 $b/$v | grep -E "default|1 lane|READY->|total|link|FINISHED store"; done
for v in old new; do
  echo "=== bench $v"
  timeout 150 $b/tree_$v/tools/weft/weft bench gpu-pool --json $OUT/bench-$v.json > $b/bench-$v.log 2>&1 || echo "bench $v rc=$?"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
keys = ["empty_task_ns_batched", "empty_task_ns_single", "latency_p50_us", "latency_p99_us",
        "idle_poll_pcie_fraction", "busy_poll_pcie_fraction", "busy_fraction_10us",
        "busy_fraction_10us_1_block_per_sm", "empty_task_ns_lanes_4", "empty_task_ns_lanes_8",
        "empty_task_ns_payload_64", "empty_task_ns_payload_256", "empty_task_ns_blocks_per_sm_2"]
runs = []
for side in ("old", "new"):
    try:
        runs.append((side, json.load(open(f"{out}/bench-{side}.json"))["metrics"]))
    except Exception as e:
        runs.append((side, {}))
print("metric".ljust(36) + "".join(n.rjust(10) for n, _ in runs))
for k in keys:
    print(k.ljust(36) + "".join((f"{m[k]['value']:.4g}" if k in m else "-").rjust(10) for _, m in runs))
PY
