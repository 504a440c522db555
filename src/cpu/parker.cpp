// The process-wide table of Parkers (see detail/parker.hpp).
//
// Parkers are allocated in fixed chunks that are never freed, so parker_at() is a lock-free
// read of a chunk pointer, and an index that outlived its thread stays valid memory (a late
// unpark then wakes whoever reuses the index, spuriously, which waits tolerate).
#include "weft/cpu/detail/parker.hpp"

#include <array>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::cpu::detail {

namespace {

constexpr std::uint32_t kChunkBits = 8;
constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
constexpr std::uint32_t kMaxChunks = 1u << 16;  // 2^24 parkers: the Latch's waiter field

struct Registry {
  std::mutex mutex;
  std::vector<std::uint32_t> free_indices;
  std::uint32_t next_index = 1;  // 0 means "no waiter"
  // Written under the mutex (release), read without it (acquire): pairs below.
  std::array<std::atomic<Parker*>, kMaxChunks> chunks{};

  std::uint32_t acquire_index() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!free_indices.empty()) {
      const std::uint32_t i = free_indices.back();
      free_indices.pop_back();
      return i;
    }
    const std::uint32_t i = next_index++;
    const std::uint32_t chunk = i >> kChunkBits;
    if (chunks[chunk].load(std::memory_order_relaxed) == nullptr) {
      // release: pairs with the acquire in parker_at(); the Parkers are constructed first.
      chunks[chunk].store(new Parker[kChunkSize], std::memory_order_release);
    }
    return i;
  }
  void release_index(std::uint32_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    free_indices.push_back(i);
  }
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may exit after static teardown
  return *r;
}

struct ThreadParker {
  std::uint32_t index = 0;
  ~ThreadParker() {
    if (index != 0) registry().release_index(index);
  }
};

thread_local ThreadParker tl_parker;

}  // namespace

std::uint32_t this_thread_parker_index() {
  ThreadParker& p = tl_parker;
  if (p.index == 0) p.index = registry().acquire_index();
  return p.index;
}

Parker& parker_at(std::uint32_t index) noexcept {
  // acquire: pairs with the release store that published the chunk.
  Parker* chunk = registry().chunks[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk[index & (kChunkSize - 1)];
}

}  // namespace weft::cpu::detail
