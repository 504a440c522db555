#!/usr/bin/env bash
# One device call (one H200): lab/probes/one_per_sm_probe.cu with its lane log, built against
# the tree and against ab/hc (the tree with the lanes' health check by try_lock: a lane finding
# another one checking skips its own check), run alternately. (The probe's "rounds" mode is the
# device test GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm.)
#   here:   ab/hc prepared by hand (see decision 016, "Still open")
#   device: bash lab/scripts/one-per-sm-session.sh    -> $OUT/one-per-sm.txt
set -uo pipefail
out=${OUT:-one-per-sm-out}
mkdir -p "$out"
work=$(mktemp -d)
nv=(nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90)
pool_sources() { ls "$1"/src/gpu/*.cu "$1"/src/gpu/*.cpp | grep -v _unavailable; }
build_probe() {  # pool root, binary
  "${nv[@]}" -I"$1/include" -Iinclude -I"$1/src" -Ilab/probes lab/probes/one_per_sm_probe.cu \
    $(pool_sources "$1") -o "$work/$2" > "$work/$2.log" 2>&1 || tail -20 "$work/$2.log"
}
build_probe . tree &
build_probe ab/hc hc &
wait
for r in 1 2; do
  for side in tree hc; do
    echo "=== $side $r"
    timeout 100 "$work/$side" 40
  done
done 2>&1 | tee "$out/one-per-sm.txt"
