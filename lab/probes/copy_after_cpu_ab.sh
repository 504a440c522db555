#!/usr/bin/env bash
# On the GPU machine (device tool): is the slow copy right after a CPU node the CPU executor's
# idle spin? `weft bench graph` at 8m and 32m (factor4 and factor5, the applications whose copies after
# a CPU node run slowest) with the executor's default idle spin and with none
# (--spin-before-sleep-us 0), each with its node log read by copy_after_cpu.py.
# -> $OUT/spin{250,0}.log, spin{250,0}-nodes.csv, copy_after_cpu.txt
# (dirty_copy_probe.cu, run separately, asks whether data the CPU has just written copies slower.)
set -uo pipefail
out=${OUT:-copy-ab-out}
mkdir -p "$out"
build=build-gpu
scripts/gpu-build.sh "$(mktemp -d)" weft_cli || exit 1
echo "built at $(date +%T)"
for spin in 250 0; do
  $build/tools/weft/weft bench graph --app factor4 --app factor5 --sizes 8m 32m \
    ${WEFT_BENCH_ARGS:---samples 9} --spin-before-sleep-us $spin \
    --node-log "$out/spin$spin-nodes.csv" > "$out/spin$spin.log" 2>&1
  grep bench "$out/spin$spin.log"
  echo "spin $spin done at $(date +%T)"
done
python3 lab/probes/copy_after_cpu.py "$out/spin250-nodes.csv" "$out/spin0-nodes.csv" \
  > "$out/copy_after_cpu.txt"
cat "$out/copy_after_cpu.txt"
