#!/usr/bin/env bash
# On the GPU machine (device tool): the slow copy right after a CPU node, both hypotheses in one
# call. dirty_copy_probe (a copy of data the CPU has just written, against evicted, clean,
# flushed and streamed data) and `weft bench graph --app factor4` with the executor's default
# idle spin and with none (--spin-before-sleep-us 0), each with its node log read by
# copy_after_cpu.py. -> $OUT/dirty_copy.txt, spin{250,0}.log, spin{250,0}-nodes.csv,
# copy_after_cpu.txt
set -uo pipefail
out=${OUT:-copy-ab-out}
mkdir -p "$out"
build=build-gpu
lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3' > "$out/dirty_copy.txt"
nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -Xcompiler -mavx2,-mclflushopt \
  scripts/probes/dirty_copy_probe.cu -o /tmp/dirty_copy && /tmp/dirty_copy 16 >> "$out/dirty_copy.txt" 2>&1
cat "$out/dirty_copy.txt"
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_TESTS=OFF > /tmp/configure.log 2>&1 &&
  cmake --build $build -j "$(nproc)" --target weft_cli > /tmp/build.log 2>&1 ||
  { tail -40 /tmp/configure.log /tmp/build.log; exit 1; }
for spin in 250 0; do
  $build/tools/weft/weft bench graph --app factor4 --samples 15 --spin-before-sleep-us $spin \
    --node-log "$out/spin$spin-nodes.csv" > "$out/spin$spin.log" 2>&1
  grep bench "$out/spin$spin.log"
done
python3 scripts/probes/copy_after_cpu.py "$out/spin250-nodes.csv" "$out/spin0-nodes.csv" |
  tee "$out/copy_after_cpu.txt"
