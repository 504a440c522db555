// weft/graph/device/bfc_allocator.hpp - where a graph's device copies get their memory: a
// caching best-fit-with-coalescing (BFC) allocator over large regions obtained from a backing
// allocator (cudaMalloc for a GPU), so that steady-state graph runs never call the backing
// allocator (cudaMalloc synchronizes the device, and each call costs far more than a bin lookup).
//
// The design is TensorFlow's BFCAllocator (tensorflow/core/common_runtime/bfc_allocator.h):
// regions are cut into chunks; free chunks sit in bins by size class (powers of two from 256
// bytes) ordered by (size, address), an allocation takes the smallest free chunk that fits
// (best fit) and splits off the rest, and a freed chunk merges with its free neighbours in the
// same region (coalescing). Where we differ: regions grow geometrically from a configurable
// first size, and a request that the backing allocator refuses first returns empty regions to
// it (trim) and retries, then throws OutOfMemory. Hand-written rather than CUDA's stream-ordered
// pools (cudaMallocAsync) because it must be testable without a GPU (any backing works: the
// emulated device backs it with host memory) and because those pools are opaque to the
// statistics the graph layer reports (BfcStats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace weft::graph {

/// Where regions come from: `allocate` returns nullptr (or throws) when it cannot, `release`
/// gives a region back. `name` appears in error messages ("cuda device 0", "host").
struct BackingAllocator {
  std::function<void*(std::size_t bytes)> allocate;
  std::function<void(void* region)> release;
  std::string name = "backing";
};

struct BfcOptions {
  /// The first region's size; each new region doubles the last (up to `max_region`), or is the
  /// request itself when that is larger.
  std::size_t first_region = std::size_t{64} << 20;
  std::size_t max_region = std::size_t{4} << 30;
  /// The most the allocator may hold from its backing, in bytes.
  std::size_t limit = SIZE_MAX;
};

struct BfcStats {
  std::size_t bytes_in_use = 0;  // rounded sizes of live allocations
  std::size_t peak_bytes_in_use = 0;
  std::size_t bytes_reserved = 0;  // held from the backing allocator
  std::size_t regions = 0;
  std::size_t backing_allocations = 0;  // calls that obtained a region, over the lifetime
  std::size_t allocations = 0;
  std::size_t frees = 0;
  std::size_t largest_free_chunk = 0;
};

/// A BFC allocator. Thread-safe (one mutex; allocation is not on any per-task hot path of the
/// graph layer, which allocates a graph's device copies once and keeps them).
///
/// @code
///   weft::graph::BfcAllocator dev({[](std::size_t n) { void* p; return cudaMalloc(&p, n) ?
///                                      nullptr : p; }, [](void* p) { cudaFree(p); }, "gpu0"});
///   void* a = dev.allocate(1 << 20);   // first call: one 64 MiB region from cudaMalloc
///   dev.deallocate(a);                  // back to a bin; the region stays
///   void* b = dev.allocate(1 << 20);   // no cudaMalloc
/// @endcode
class BfcAllocator {
 public:
  /// Every allocation is aligned to, and rounded up to a multiple of, this many bytes.
  static constexpr std::size_t kAlignment = 256;

  /// Throws InvalidArgument for a backing without both functions, or a first region of 0.
  explicit BfcAllocator(BackingAllocator backing, BfcOptions options = {});
  /// Returns every region to the backing allocator, live allocations included (their owners
  /// must be gone by then).
  ~BfcAllocator();
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  /// `bytes` (rounded up to kAlignment), from the smallest free chunk that fits, else from a
  /// new region. Throws InvalidArgument for 0 bytes, OutOfMemory (naming the request, the bytes
  /// in use and reserved, the largest free chunk and the backing's name) when neither the
  /// chunks nor the backing can serve it.
  [[nodiscard]] void* allocate(std::size_t bytes);
  /// Frees an allocation of this allocator. Throws InvalidArgument for a pointer it did not
  /// return or already freed (nothing changes then).
  void deallocate(void* p);
  /// Returns regions with nothing allocated in them to the backing allocator; the bytes given
  /// back.
  std::size_t trim();

  [[nodiscard]] BfcStats stats() const;
  [[nodiscard]] const std::string& name() const noexcept { return backing_.name; }

 private:
  struct Chunk {
    std::size_t size = 0;
    std::size_t region = 0;  // index into regions_
    bool in_use = false;
  };
  struct Region {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    std::size_t live = 0;  // chunks in use
  };
  static constexpr int kBins = 40;
  using ChunkMap = std::map<std::uintptr_t, Chunk>;

  static int bin_of(std::size_t size) noexcept;
  void insert_free(std::uintptr_t address, std::size_t size);
  void erase_free(std::uintptr_t address, std::size_t size);
  std::uintptr_t find_free(std::size_t size);  // 0 when none fits
  bool grow(std::size_t size);                 // false when the backing refused
  std::size_t trim_locked();
  [[nodiscard]] std::size_t largest_free_locked() const;

  BackingAllocator backing_;
  BfcOptions options_;
  mutable std::mutex mutex_;
  ChunkMap chunks_;  // every chunk, free or not, by address
  std::set<std::pair<std::size_t, std::uintptr_t>> bins_[kBins];  // free chunks: (size, address)
  std::vector<Region> regions_;                                   // size 0 = given back
  std::size_t next_region_;
  BfcStats stats_;
};

}  // namespace weft::graph
