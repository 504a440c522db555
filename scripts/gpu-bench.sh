#!/usr/bin/env bash
# `weft bench gpu-pool` on the GPU machine: $OUT/gpu-pool.json, .md and .log (scripts/gpu-suite.sh
# says how; pass WEFT_COMMIT=<hash>).
exec "$(dirname "$0")/gpu-suite.sh" gpu-pool gpu-bench-out
