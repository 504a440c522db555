// weft/graph/stream_copy.hpp - writing a CPU node's output past the caches, for outputs the
// runtime copies to the GPU next (CpuCall::copied_to_device) and those too large to stay in the
// cache for their consumer (as an application's kernels may decide).
//
// Why: a host-to-device copy reads host memory through the copy engine, and lines still dirty
// in the CPU cores' caches (as a parallel kernel's output is, just after it wrote it) are read
// by snooping those caches, at a fraction of the bandwidth of a read from DRAM. Written with
// non-temporal stores, the output is in memory when the copy starts, and the copy runs at full
// speed (docs/decisions/020-cpu-outputs-bound-for-the-gpu-bypass-the-caches.md).
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
