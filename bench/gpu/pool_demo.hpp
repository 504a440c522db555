// bench/gpu/pool_demo.hpp - the GPU part of `weft demo` and the pool line of `weft info`.
#pragma once

#include <string>

namespace weft::bench::gpu {

/// Starts the default pool of the demo's task types on every visible GPU, and describes it
/// (blocks, ring depth, scheduler lanes). Empty with `why` set when no GPU can be used.
std::string describe_default_pool(std::string& why);

/// The GPU showcase: irregular, fine-grained tasks (segmented dot products of random lengths)
/// through the pool, verified against a CPU reference, timed against one kernel launch per
/// task. Prints a table; returns whether every result was right.
bool run_gpu_demo(bool quick);

}  // namespace weft::bench::gpu
