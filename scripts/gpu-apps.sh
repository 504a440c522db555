#!/usr/bin/env bash
# `weft bench gpu-apps` on the GPU machine (docs/apps.md): $OUT/gpu-apps.json, .md, .svg and
# .log (scripts/gpu-suite.sh says how; pass WEFT_COMMIT=<hash>, and WEFT_BENCH_ARGS=--quick for
# the smoke sizes).
exec "$(dirname "$0")/gpu-suite.sh" gpu-apps gpu-apps-out
