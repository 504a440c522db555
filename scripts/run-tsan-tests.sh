#!/usr/bin/env bash
# Runs the concurrency tests of a ThreadSanitizer build. Stress loops are shortened through
# WEFT_STRESS_SCALE (TSan is ~10x slower) but every test still runs.
set -euo pipefail
build=${1:-build-tsan}
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export WEFT_STRESS_SCALE=${WEFT_STRESS_SCALE:-0.05}
run() {
  # Newer kernels randomise mmap more than older TSan runtimes accept; without ASLR it works.
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    setarch "$(uname -m)" -R "$@"
  else
    "$@"
  fi
}
echo "ThreadSanitizer: weft_cpu_tests"
run "$build/tests/weft_cpu_tests" --gtest_brief=1
