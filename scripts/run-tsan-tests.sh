#!/usr/bin/env bash
# Runs the concurrency tests of a ThreadSanitizer build: every unit test, then the randomised
# stress tests repeated with shuffled order. WEFT_STRESS_SCALE shortens the stress loops
# (TSan is 5-15x slower) but every test still runs.
set -euo pipefail
build=${1:-build-tsan}
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export WEFT_STRESS_SCALE=${WEFT_STRESS_SCALE:-0.3}
run() {
  # Newer kernels randomise mmap more than GCC 12's TSan runtime accepts; without ASLR it works.
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    setarch "$(uname -m)" -R "$@"
  else
    "$@"
  fi
}
echo "ThreadSanitizer: weft_cpu_tests"
run "$build/tests/weft_cpu_tests" --gtest_brief=1
echo "ThreadSanitizer: weft_cpu_stress (x3, shuffled, scale $WEFT_STRESS_SCALE)"
run "$build/tests/weft_cpu_stress" --gtest_brief=1 --gtest_repeat=3 --gtest_shuffle
echo "ThreadSanitizer: weft_gpu_host_tests (the GPU pool's protocol on the host backend)"
WEFT_STRESS_SCALE=0.1 run "$build/tests/weft_gpu_host_tests" --gtest_brief=1
echo "ThreadSanitizer: weft_graph_tests (the graph runtime: dispatcher, executor, emulated device)"
run "$build/tests/weft_graph_tests" --gtest_brief=1 --gtest_filter='Runtime*:Graph*'
echo "ThreadSanitizer: weft_gpu_apps_host_tests (the GPU applications' drivers on the host backend)"
# The references call OpenBLAS, whose own (uninstrumented) threads TSan cannot see synchronize:
# one thread keeps its work on the caller's.
OPENBLAS_NUM_THREADS=1 run "$build/tests/weft_gpu_apps_host_tests" --gtest_brief=1
echo "ThreadSanitizer: weft_split_tests (the splitter's parts at once on the emulated device)"
# The split applications call OpenBLAS from every core: one thread each, as for the apps above.
OPENBLAS_NUM_THREADS=1 run "$build/tests/weft_split_tests" --gtest_brief=1 --gtest_filter='Split*:GpuSide*:-SplitStoreTest.AProcessKilledMidSaveLeavesWholeTables'
echo "ThreadSanitizer: weft_stream_tests (task streams' messages, barrier and regions, x5 shuffled)"
run "$build/tests/weft_stream_tests" --gtest_brief=1 --gtest_repeat=5 --gtest_shuffle
