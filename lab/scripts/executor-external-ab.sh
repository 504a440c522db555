#!/usr/bin/env bash
# One call on the GPU machine's 16 cores (no GPU used): lab/probes/external_spawns_probe.cpp
# built against the tree's libweft.a and against ab/tree-<base>'s (the tree before a change to
# the executor, prepared here with `lab/scripts/gpu-ab.sh prepare-tree <base>`), alternated,
# with 11 and 15 workers, pairs paused 2 us (TNN's popping thread) and batches of 64 unpaused.
#   device (carry ["ab"]): bash lab/scripts/executor-external-ab.sh <base>
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
build_probe() {  # tree, binary
  cmake -S "$1" -B "$work/build-$2" -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=OFF \
    > "$work/$2-configure.log" 2>&1 &&
    cmake --build "$work/build-$2" -j 8 --target weft > "$work/$2-build.log" 2>&1 &&
    g++ -std=c++20 -O2 -I"$1/include" lab/probes/external_spawns_probe.cpp \
      "$work/build-$2/src/libweft.a" -lhwloc -lpthread -o "$work/$2" ||
    { tail -20 "$work/$2-build.log"; exit 1; }
}
build_probe . tree &
build_probe "ab/tree-$1" base &
wait
for r in 1 2; do
  for side in base tree; do
    for w in 11 15; do
      echo "== $side, round $r"
      timeout 60 "$work/$side" "$w" 262144 2 2000 | tail -2
      timeout 60 "$work/$side" "$w" 1048576 64 0 | tail -1
    done
  done
done 2>&1 | tee "$out/external-ab.txt"
