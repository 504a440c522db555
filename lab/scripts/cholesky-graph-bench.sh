#!/usr/bin/env bash
# The Cholesky benchmark with the weft contender as one task graph (cholesky_graph_on_pool),
# the host-tracked driver beside it as the peer `pool_host_deps`: a bench variant kept out of
# bench/ until the graph path is faster and finishes at every size (docs/decisions/017-gpu-
# device-dependencies.md, "Step 3"). On the GPU machine, from the repository root:
#   bash lab/scripts/cholesky-graph-bench.sh          # n = 1024 and 2048 (--quick), 200 s limit
# Applies the patch beside this script, builds the weft tool, runs the bench, and takes the
# patch out again.
set -uo pipefail
patch_file=$(dirname "$0")/cholesky-graph-bench.patch
patch -p1 < "$patch_file" || exit 1
trap 'patch -R -p1 < "$patch_file"' EXIT
scripts/gpu-build.sh "$(mktemp -d)" weft_cli || exit 1
out=${OUT:-cholesky-graph-out}
mkdir -p "$out"
timeout 200 build-gpu/tools/weft/weft bench gpu-apps --only cholesky --quick \
  --json "$out/cholesky-graph.json" 2>&1 | tee "$out/cholesky-graph.log" | grep cholesky_
