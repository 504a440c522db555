#!/usr/bin/env bash
# A/B of a GPU-pool probe between an older commit's pool and the working tree's, on ONE machine
# instance of the device tool. Host-bound figures differ by up to 2x between instances
# (lab/results/h100/README.md), so a change is judged by old and new built side by
# side and run alternately in the same call, not by runs from different calls.
#
#   here:    lab/scripts/gpu-ab.sh prepare <commit>
#            copies that commit's include/ and src/gpu/ into ab/<commit>/ (ignored by git; pass
#            "ab" in the device tool's carry list so that it travels with the tree)
#   device:  lab/scripts/gpu-ab.sh run <commit> <probe> <rounds> [-D...] [-- probe arguments]
#            builds lab/probes/<probe>.cu against ab/<commit>/ and against the tree, then
#            runs old, new, old, new ... (<rounds> each), every run headed "=== old <commit>"
#            or "=== new"; compile flags (e.g. -DWEFT_POOL_PROFILE) go before "--".
#
#   here:    lab/scripts/gpu-ab.sh prepare-tree <commit>
#            copies that commit's whole tree (but bench/results and lab/results) into
#            ab/tree-<commit>/
#   device:  lab/scripts/gpu-ab.sh bench <commit> <rounds> [-- bench arguments]
#            builds the weft tool from ab/tree-<commit>/ and from the tree, then runs
#            `weft bench gpu-pool` old, new, old, new ... (<rounds> each), writing
#            $OUT/bench-{old,new}-<round>.json and a table of the headline metrics per run
#            to $OUT/bench-ab.txt: the bench's own figures, A/B'd on one instance
#   device:  lab/scripts/gpu-ab.sh bench-apps <commit> <rounds> [-- bench arguments]
#            the same with `weft bench gpu-apps` (e.g. -- --only spmv_bs): writes
#            $OUT/apps-{old,new}-<round>.json and $OUT/apps-ab.txt, every comparison's weft
#            and peer times per run
#   device:  lab/scripts/gpu-ab.sh bench-graph <commit> <rounds> [-- bench arguments]
#            the same with `weft bench graph` (e.g. -- --sizes 4m 32m --samples 9): writes
#            $OUT/graph-{old,new}-<round>.log and $OUT/graph-ab.txt: each run's [bench]
#            lines side by side, then lab/probes/node_gaps.py over each run's node log
#
# The probes and helpers are the working tree's (lab/probes/; a tree before the lab moved had
# them in scripts/probes/, probe_dir looks in both). ab/ is at the repository's root.
# Example (what lab/results/h100/latency_ab-bff043d.txt was made by, by hand):
#   lab/scripts/gpu-ab.sh prepare 48d179e
#   device: lab/scripts/gpu-ab.sh run 48d179e latency_trace 2 -DWEFT_POOL_TRACE | tee $OUT/ab.txt
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)  # this script is lab/scripts/gpu-ab.sh
usage() {
  sed -n '2,36p' "$0" >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
cmd=$1
commit=$2
dir="$root/ab/$commit"
# The probes' folder of a tree: lab/probes, or scripts/probes in a tree from before the lab.
probe_dir() {  # tree
  if [[ -d "$1/lab/probes" ]]; then echo "$1/lab/probes"; else echo "$1/scripts/probes"; fi
}
# bench and bench-graph: checks <rounds> and ab/tree-<commit>, then builds the weft tool from
# that tree and from the working tree side by side into $work/old and $work/new; sets rounds,
# out ($OUT) and work.
build_old_and_new() {  # rounds
  rounds=$1
  local tree="$root/ab/tree-$commit"
  [[ -d "$tree" ]] || { echo "gpu-ab: no ab/tree-$commit: run 'prepare-tree $commit' first" >&2; exit 2; }
  [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-ab: rounds must be a positive number" >&2; exit 2; }
  out=${OUT:-gpu-ab-out}
  mkdir -p "$out"
  build() {  # source dir, build dir
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON \
      -DWEFT_BUILD_TESTS=OFF > "$2.configure.log" 2>&1 &&
      cmake --build "$2" -j "$(( $(nproc) / 2 ))" --target weft_cli > "$2.build.log" 2>&1
  }
  work=$(mktemp -d)
  build "$tree" "$work/old" & local old_pid=$!
  build "$root" "$work/new" || { tail -30 "$work/new.build.log"; exit 1; }
  wait "$old_pid" || { tail -30 "$work/old.build.log"; exit 1; }
}
# Runs `<command...> <side> <round>` for old and new in turn, <rounds> ($rounds) times, each run
# headed "=== old <commit> (round r)" or "=== new (round r)"; a failing run is reported, not fatal.
alternate() {
  local r side
  for ((r = 1; r <= rounds; ++r)); do
    for side in old new; do
      echo "=== $side$([[ $side == old ]] && echo " $commit") (round $r)"
      "$@" "$side" "$r" || echo "gpu-ab: $side exited with status $?"
    done
  done
}
case "$cmd" in
  prepare)
    git -C "$root" rev-parse --verify --quiet "$commit^{commit}" >/dev/null ||
      { echo "gpu-ab: $commit is not a commit of this repository" >&2; exit 2; }
    rm -rf "$dir"
    mkdir -p "$dir"
    git -C "$root" archive "$commit" include src/gpu | tar -x -C "$dir"
    echo "gpu-ab: $commit's include/ and src/gpu/ are in ab/$commit (carry \"ab\" to the device)"
    ;;
  prepare-tree)
    git -C "$root" rev-parse --verify --quiet "$commit^{commit}" >/dev/null ||
      { echo "gpu-ab: $commit is not a commit of this repository" >&2; exit 2; }
    tree="$root/ab/tree-$commit"
    rm -rf "$tree"
    mkdir -p "$tree"
    git -C "$root" archive "$commit" -- . ':!bench/results' ':!lab/results' | tar -x -C "$tree"
    echo "gpu-ab: $commit's tree is in ab/tree-$commit (carry \"ab\" to the device)"
    ;;
  bench)
    [[ $# -ge 3 ]] || usage
    build_old_and_new "$3"
    shift 3
    [[ $# -gt 0 && $1 == "--" ]] && shift
    bench_args=("$@")
    pool_bench() {  # side, round
      local status=0
      "$work/$1/tools/weft/weft" bench gpu-pool "${bench_args[@]}" \
        --json "$work/bench-$1-$2.json" > "$work/bench-$1-$2.log" 2>&1 || status=$?
      cp "$work/bench-$1-$2.json" "$out/" 2>/dev/null || true
      return "$status"
    }
    alternate pool_bench
    python3 - "$work" "$rounds" <<'PY' | tee "$out/bench-ab.txt"
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
keys = ["empty_task_ns_batched", "empty_task_ns_single", "latency_p50_us", "latency_p99_us",
        "idle_poll_pcie_fraction", "busy_fraction_10us", "busy_fraction_10us_1_block_per_sm",
        "empty_task_ns_lanes_4", "empty_task_ns_lanes_6", "empty_task_ns_lanes_8",
        "empty_task_ns_blocks_per_sm_2", "empty_task_ns_ring_depth_8", "latency_cpu_cores",
        "pool_vs_launch_same_body", "pool_vs_launch_same_body_1_block_per_sm"]
runs = []
for r in range(1, rounds + 1):
    for side in ("old", "new"):
        try:
            m = json.load(open(f"{work}/bench-{side}-{r}.json"))["metrics"]
        except (OSError, ValueError, KeyError):
            m = {}
        runs.append((f"{side} {r}", m))
print("metric".ljust(36) + "".join(name.rjust(10) for name, _ in runs))
for k in keys:
    cells = "".join((f"{m[k]['value']:.4g}" if k in m else "-").rjust(10) for _, m in runs)
    print(k.ljust(36) + cells)
PY
    ;;
  bench-apps)
    [[ $# -ge 3 ]] || usage
    build_old_and_new "$3"
    shift 3
    [[ $# -gt 0 && $1 == "--" ]] && shift
    bench_args=("$@")
    apps_bench() {  # side, round
      local status=0
      "$work/$1/tools/weft/weft" bench gpu-apps "${bench_args[@]}" \
        --json "$work/apps-$1-$2.json" > "$work/apps-$1-$2.log" 2>&1 || status=$?
      cp "$work/apps-$1-$2.json" "$out/" 2>/dev/null || true
      return "$status"
    }
    alternate apps_bench
    python3 - "$work" "$rounds" <<'PY' | tee "$out/apps-ab.txt"
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs, rows = [], {}
for r in range(1, rounds + 1):
    for side in ("old", "new"):
        run = f"{side} {r}"
        runs.append(run)
        try:
            comparisons = json.load(open(f"{work}/apps-{side}-{r}.json"))["comparisons"]
        except (OSError, ValueError, KeyError):
            comparisons = []
        for c in comparisons:
            rows.setdefault((c["benchmark"], "weft"), {})[run] = c["weft"]
            rows.setdefault((c["benchmark"], c["peer"]), {})[run] = c["peer_value"]
print("us".ljust(40) + "".join(run.rjust(11) for run in runs))
for (bench, who), by in rows.items():
    print(f"{bench} {who}".ljust(40) + "".join(
        (f"{by[run]:.4g}" if run in by else "-").rjust(11) for run in runs))
PY
    ;;
  bench-graph)
    [[ $# -ge 3 ]] || usage
    build_old_and_new "$3"
    shift 3
    [[ $# -gt 0 && $1 == "--" ]] && shift
    bench_args=("$@")
    graph_bench() {  # side, round
      "$work/$1/tools/weft/weft" bench graph "${bench_args[@]}" \
        --node-log "$work/graph-$1-$2.csv" > "$out/graph-$1-$2.log" 2>&1
    }
    alternate graph_bench
    python3 - "$out" "$rounds" <<'PY' | tee "$out/graph-ab.txt"
import re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times = {}  # (benchmark, contender) -> {run: seconds}
runs = []
for r in range(1, rounds + 1):
    for side in ("old", "new"):
        run = f"{side} {r}"
        runs.append(run)
        for line in open(f"{out}/graph-{side}-{r}.log", errors="replace"):
            m = re.match(r"\[bench\] (\S+) +\.* weft ([\d.e-]+) s \| (.*)", line)
            if not m:
                continue
            times.setdefault((m.group(1), "pptm"), {})[run] = float(m.group(2))
            for peer, t in re.findall(r"(\w+) ([\d.e-]+) \(x", m.group(3)):
                times.setdefault((m.group(1), peer), {})[run] = float(t)
print("ms".ljust(24) + "".join(run.rjust(9) for run in runs))
for (bench, who), by in sorted(times.items()):
    print(f"{bench} {who}".ljust(24) + "".join(
        (f"{by[run] * 1e3:.3f}" if run in by else "-").rjust(9) for run in runs))
PY
    for ((r = 1; r <= rounds; ++r)); do
      for side in old new; do
        python3 "$(probe_dir "$root")/node_gaps.py" "$work/graph-$side-$r.csv" | tee -a "$out/graph-ab.txt"
      done
    done
    ;;
  run)
    [[ $# -ge 4 ]] || usage
    probe=$3
    rounds=$4
    shift 4
    flags=()
    while [[ $# -gt 0 && $1 != "--" ]]; do flags+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift  # the "--"
    [[ -d "$dir/include" ]] || { echo "gpu-ab: no ab/$commit: run 'prepare $commit' first" >&2; exit 2; }
    src="$(probe_dir "$root")/$probe.cu"
    [[ -f "$src" ]] || { echo "gpu-ab: no probe $src" >&2; exit 2; }
    [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-ab: rounds must be a positive number" >&2; exit 2; }
    bin=$(mktemp -d)
    nv=(nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 "${flags[@]}")
    # The old build finds the old headers first; the probe's own headers (lab/probes/*.cuh)
    # are the tree's, beside the probe.
    # Every source of the pool (the scheduler is compiled parts since decision 015), less the
    # stand-in for builds without CUDA.
    pool_sources() { ls "$1"/src/gpu/*.cu "$1"/src/gpu/*.cpp | grep -v _unavailable; }
    "${nv[@]}" -I"$dir/include" -I"$root/include" -I"$dir/src" "$src" $(pool_sources "$dir") \
      -o "$bin/old" &
    old_pid=$!
    "${nv[@]}" -I"$root/include" -I"$root/src" "$src" $(pool_sources "$root") -o "$bin/new"
    wait "$old_pid"
    probe_args=("$@")
    run_probe() { "$bin/$1" "${probe_args[@]}"; }  # side, round
    alternate run_probe
    ;;
  *) usage ;;
esac
