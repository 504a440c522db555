#!/usr/bin/env bash
# One device call (one H200) for the splitter's changes after a commit: the tree's `weft bench
# split --only triad_host --only spmv_host` (the per-core case runs with the triad) against
# the same from ab/tree-<commit>, then the tree's with --seed-core-classes; each run with tables
# of its own, 3 samples. For decision 033's peak bound (no alone probe that the side's peak
# could not win) and the seed's core classes (docs/split.md).
#   here:   lab/scripts/gpu-ab.sh prepare-tree <commit>      (carry "ab" to the device)
#   device: WEFT_COMMIT=<hash> bash lab/scripts/split-ab-session.sh <commit>
# Prints each run's cold regions and converge counts; $OUT/session.tar.gz holds every run's
# JSON, table, charts (weft bench render) and log.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
before=$1
tree=ab/tree-$before
[ -d "$tree" ] || { echo "run 'lab/scripts/gpu-ab.sh prepare-tree $before' here first" >&2; exit 2; }
t0=$(date +%s)
build() {  # source dir, build dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_TESTS=OFF > "$2.configure.log" 2>&1 &&
    cmake --build "$2" -j "$(($(nproc) / 2))" --target weft_cli > "$2.build.log" 2>&1
}
build "$tree" "$work/old" &
old_pid=$!
build . "$work/new" || tail -20 "$work/new.build.log"
wait "$old_pid" || tail -20 "$work/old.build.log"
echo "builds done at $(($(date +%s) - t0)) s"
machine=$(scripts/machine-name.sh)
run() {  # name, weft binary, extra arguments...
  local name=$1 weft=$2
  shift 2
  mkdir -p "$work/$name"
  WEFT_MACHINE=$machine timeout 170 "$weft" bench split --only triad_host --only spmv_host \
    --samples 3 --db "$work/$name/tables.db" --json "$work/$name/split.json" "$@" \
    > "$work/$name.log" 2>&1
  echo "== $name (rc $?, at $(($(date +%s) - t0)) s)"
  grep -E 'cold regions|converged|core shares' "$work/$name.log"
  grep -E '^\| (converge_regions|gsplit_adaptive)' "$work/$name/split.md" 2>/dev/null
  grep -E '^\| [a-z_]+ \| oracle' "$work/$name/split.md" 2>/dev/null
}
run old "$work/old/tools/weft/weft"
run new "$work/new/tools/weft/weft"
run new-seed-classes "$work/new/tools/weft/weft" --seed-core-classes
