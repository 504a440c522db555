// weft/graph/stream_copy.hpp - writing a CPU node's output past the caches, for outputs the
// runtime copies to the GPU next (CpuCall::copied_to_device) and those too large to stay in the
// cache for their consumer (the factor kernels: kernels::stream_min_bytes()).
//
// Why: a host-to-device copy reads host memory through the copy engine, and lines still in the
// CPU cores' caches (as a parallel kernel's output is, just after it wrote it) are read by
// snooping those caches, far slower than from DRAM. On the H100 machine (16-core Xeon VM) the
// copy of a CPU node's 25.6 MB output to the GPU, issued as the node ended, ran at a median
// 22 GB/s, against 51-54 GB/s for data the CPU had not just written; written with these
// stores, at 52 GB/s, and factor4 and factor5 at 32m took 19-26% less time
// (bench/results/h100/probes/streamed_average-*, dirty_copy-*).
#pragma once

#include <cstddef>

namespace weft::graph {

/// Copies `bytes` bytes from `src` to `dst` (not overlapping) with non-temporal stores, which
/// write to memory without keeping the lines in the caches, then fences them (they are weakly
/// ordered: the fence makes them visible before anything the caller publishes afterwards, such
/// as the node's completion). Any alignment. Use it for an output a GPU node reads next: compute
/// a piece (a row, a block) into a small buffer that stays in the cache, then stream it out.
/// On a CPU without such stores (not x86-64) it is a plain copy.
void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept;

/// The same without the fence, for many pieces in a row: call stream_fence() after the last,
/// on the same thread, before the data is handed on.
void stream_copy_unfenced(void* dst, const void* src, std::size_t bytes) noexcept;
void stream_fence() noexcept;

}  // namespace weft::graph
