#!/usr/bin/env bash
# One device call (one H200), two measurements:
# 1. lab/probes/update_block_depth.patch (decision 039): the Cholesky trace at n = 4096 and 8192
#    in blocks of 2 with the patch applied (each update tile one GEMM over the block's depth),
#    and memcheck on the probe at a small size; the patch is reverted afterwards.
# 2. `weft bench split --only triad_host --only spmv_host --samples 3` with and without
#    --seed-core-classes (docs/split.md, the per-class option), each with tables of its own.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/depth-and-classes-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
git apply lab/probes/update_block_depth.patch || { echo "patch failed"; exit 1; }
TRACE_SIZES="4096:2 8192:2 512:2" OUT=$work/depth bash lab/scripts/cholesky-trace-session.sh 3 \
  > "$work/depth.log" 2>&1
git apply -R lab/probes/update_block_depth.patch
tar xzf "$work/depth/session.tar.gz" -C "$work/depth" 2>/dev/null
grep -E '^n = |host .*span|potrf|trsm|syrk|gemm |critical|CholeskyPlan|ERROR SUMMARY|built|traced' \
  "$work/depth.log"
echo "depth done at $(($(date +%s) - t0)) s"
scripts/gpu-build.sh "$work" weft_cli || exit 1
echo "weft built at $(($(date +%s) - t0)) s"
machine=$(scripts/machine-name.sh)
for variant in plain seed-classes; do
  flag=()
  [ "$variant" = seed-classes ] && flag=(--seed-core-classes)
  mkdir -p "$work/$variant"
  WEFT_MACHINE=$machine timeout 150 build-gpu/tools/weft/weft bench split --only triad_host \
    --only spmv_host --samples 3 --db "$work/$variant/tables.db" \
    --json "$work/$variant/split.json" "${flag[@]}" > "$work/$variant.log" 2>&1
  echo "== $variant (rc $?, at $(($(date +%s) - t0)) s)"
  grep -E 'cold regions|converged|core shares|share a cache|class' "$work/$variant.log" | head -12
  grep -E '^\| (converge_regions|gsplit_adaptive|slow_core|mean_core)' "$work/$variant/split.md"
  grep -E '^\| [a-z_]+ \| (oracle|equal_shares)' "$work/$variant/split.md"
done
