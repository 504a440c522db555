#!/usr/bin/env bash
# On the GPU machine (device tool): the factor kernels' streaming threshold A/B on one instance.
# `weft bench graph` for the applications with CPU nodes in their mappings (factor1, factor4,
# factor5) at 32m and 320m, with the default (the outputs of calls whose arguments span the
# last-level cache written past the caches, besides those a GPU node reads next; until 12680ee
# every output of 4 MiB or more: the run of probes/stream_threshold_ab-d2192a2/) and with
# `--stream-min-bytes gpu-only`, alternated WEFT_AB_ROUNDS times (default 1: ~5 min with the
# build). The logs' per-kernel tables hold the
# CPU kernels' medians; the [bench] lines each policy's time.
# -> $OUT/{default,gpu-only}-<round>.log and summary.txt
set -uo pipefail
out=${OUT:-stream-ab-out}
mkdir -p "$out"
build=build-gpu
scripts/gpu-build.sh "$(mktemp -d)" weft_cli || exit 1
for round in $(seq 1 "${WEFT_AB_ROUNDS:-1}"); do
  for mode in default gpu-only; do
    arg=()
    [ "$mode" = gpu-only ] && arg=(--stream-min-bytes gpu-only)
    $build/tools/weft/weft bench graph --app factor1 --app factor4 --app factor5 \
      --sizes 32m 320m --samples 7 "${arg[@]}" > "$out/$mode-$round.log" 2>&1
  done
done
python3 - "$out"/*.log <<'PY' | tee "$out/summary.txt"
import re, sys
for path in sys.argv[1:]:
    print("==", path.rsplit("/", 1)[-1])
    for line in open(path):
        if line.startswith("[bench]"):
            print(line.rstrip())
        m = re.match(r"\[graph\]   (cpu_\S+) +(\d{7,}) B  n= *\d+ +[\d.]+ +([\d.]+)", line)
        if m:
            print(f"  {m.group(1):28s} {m.group(2):>10s} B  median {m.group(3)} ms")
PY
