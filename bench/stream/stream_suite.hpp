// bench/stream/stream_suite.hpp - `weft bench streams`: task streams (seed 001) against the way
// people write it today, MPI + CUDA (one process per GPU, explicit cudaMemcpy and MPI calls).
//
// The suite runs in two MPI processes (the tool starts itself under mpirun when it was not);
// every process runs every benchmark in the same order, so that the contenders that span both
// (weft's two-process World, MPI + CUDA) run in step, and process 0 reports. Benchmarks:
//   - pingpong_<path>_<size>: one-way time of a device buffer sent back and forth, weft on
//     one GPU (two streams), on two GPUs of one process, and between the two processes;
//     against MPI + CUDA between the processes (both on GPU 0 for the one-GPU case), and for
//     two GPUs also against cudaMemcpyPeerAsync itself;
//   - concurrent_kernels_<k>: k task streams of one GPU each running one fixed-length kernel,
//     against k processes each with its own context running the same kernel.
#pragma once

#include <string>
#include <vector>

#include "harness/harness.hpp"

namespace weft::bench::stream {

struct StreamSuiteOptions {
  bool quick = false;
  int samples = 5;
  std::vector<std::string> only;  // benchmark families: pingpong, concurrent_kernels
  std::string self;               // this executable, for the kernel workers
};

/// True when this process was started as a kernel worker of the concurrent-kernel peer; runs
/// it and returns its exit status through `status`.
bool run_kernel_worker_if_asked(int argc, char** argv, int& status);

/// Runs the suite in this MPI process (of two); `is_reporter` is set on process 0.
Suite run_stream_suite(const StreamSuiteOptions& options, bool& is_reporter);

}  // namespace weft::bench::stream
