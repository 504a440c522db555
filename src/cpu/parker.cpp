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

// relaxed: a statistic, read by whoever asks after the fact.
std::atomic<std::uint64_t> g_park_timeouts{0};

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

bool Parker::park(std::chrono::nanoseconds limit) noexcept {
  // acquire (every successful take below): pairs with the release exchange in unpark(), so
  // what the unparker wrote before waking us is visible when we return true.
  std::uint32_t s = kNotified;
  if (state_.compare_exchange_strong(s, kEmpty, std::memory_order_acquire)) return true;
  // s is kEmpty: only the owner ever stores kParked. Announce the sleep; a token that arrives
  // between the check above and this CAS makes it fail (s becomes kNotified).
  if (!state_.compare_exchange_strong(s, kParked, std::memory_order_acquire)) {
    // Take it by an exchange, not a store: a read-modify-write reads the latest token, so an
    // unpark after the failed CAS is acquired too, never overwritten unseen.
    state_.exchange(kEmpty, std::memory_order_acquire);
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    (void)futex_wait_for(state_, kParked, deadline - std::chrono::steady_clock::now());
    s = kNotified;
    if (state_.compare_exchange_strong(s, kEmpty, std::memory_order_acquire)) return true;
    if (std::chrono::steady_clock::now() >= deadline) {
      // Withdraw the announcement, unless a token won the race to the word.
      s = kParked;
      if (state_.compare_exchange_strong(s, kEmpty, std::memory_order_relaxed)) {
        g_park_timeouts.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      state_.exchange(kEmpty, std::memory_order_acquire);  // s was kNotified: take it
      return true;
    }
    // Woken early without a token (a signal, a spurious return): sleep the rest.
  }
}

void Parker::unpark() noexcept {
  // release: pairs with the acquire takes in park(). An exchange (a read-modify-write) always
  // sees the owner's latest announcement, so no store-load fence is needed to decide to wake.
  if (state_.exchange(kNotified, std::memory_order_release) == kParked) futex_wake_one(state_);
}

std::uint64_t Parker::timeouts() noexcept {
  return g_park_timeouts.load(std::memory_order_relaxed);
}

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
