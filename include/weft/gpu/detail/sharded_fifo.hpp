// weft/gpu/detail/sharded_fifo.hpp - the pool's FIFO input queue, split into shards so that
// threads pushing one task at a time do not all contend for one lock. A pushing thread always
// uses the same shard (its ticket modulo the shard count), so its tasks stay in the order it
// pushed them; the scheduler lanes take from every shard, round robin.
//
// Why not one queue: with one mutex, four threads pushing single tasks spent their time in
// futex hand-offs (1.4 us per task on the H100 machine, bench/results/h100/gpu-pool.md at
// 6135191); an uncontended lock of the thread's own shard costs ~20 ns. Why not a library:
// none of the well-kept concurrent queues (oneTBB, Boost.Lockfree, moodycamel) is on the GPU
// machine, which cannot install anything, and the shards need the pool's own close protocol
// (a push must see "no more tasks" under the lock the lanes take from).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "weft/gpu/detail/adaptive_mutex.hpp"
#include "weft/gpu/detail/chunk_queue.hpp"

namespace weft::gpu::detail {

/// A small number unique to the calling thread among the threads that asked for a ticket of
/// kind Tag (first come, first served), for spreading threads over shards: pushing threads
/// and popping threads draw from separate counters, so n pushers get n consecutive tickets.
template <class Tag>
std::size_t thread_ticket() noexcept {
  static std::atomic<std::size_t> next{0};
  // relaxed: only uniqueness matters, not order.
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}
struct PushTicket {};
struct PopTicket {};

template <class T>
class ShardedFifo {
 public:
  struct alignas(64) Shard {
    AdaptiveMutex mutex;
    ChunkQueue<T> queue;  // under mutex
    // Tasks accepted through this shard (FIFO or priority order alike), counted under the
    // pusher's lock before they can be taken: PoolCore's count of what is pending.
    std::atomic<std::uint64_t> accepted{0};
    // queue.size(), readable without the lock: a hint for lanes choosing where to look, and
    // (seq_cst) the fact a lane about to sleep checks against the pusher's look at the
    // sleeping count (PoolCore::push / sleep_until_work). On a line of its own, so that the
    // lanes, which read it every round and while they spin, do not take away the line the
    // pusher writes under the lock (no difference measurable on the H100 machine's noisy
    // instances: bench/results/h100/probes/false_sharing_single_ab-e444ee3.txt).
    alignas(64) std::atomic<std::size_t> size{0};
  };

  explicit ShardedFifo(std::size_t shards) {
    shards_.reserve(std::max<std::size_t>(shards, 1));
    for (std::size_t s = 0; s < std::max<std::size_t>(shards, 1); ++s) {
      shards_.push_back(std::make_unique<Shard>());
    }
  }

  [[nodiscard]] std::size_t shards() const noexcept { return shards_.size(); }
  [[nodiscard]] std::size_t home() const noexcept {
    return thread_ticket<PushTicket>() % shards_.size();
  }
  Shard& shard(std::size_t s) noexcept { return *shards_[s]; }
  const Shard& shard(std::size_t s) const noexcept { return *shards_[s]; }

  /// Tasks queued in all shards (a snapshot; seq_cst loads, see Shard::size).
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size.load(std::memory_order_seq_cst);
    return n;
  }

  /// Tasks accepted through all shards (seq_cst loads: PoolCore::pending reads them after the
  /// count of deliveries).
  [[nodiscard]] std::uint64_t accepted() const noexcept {
    std::uint64_t n = 0;
    for (const auto& s : shards_) n += s->accepted.load(std::memory_order_seq_cst);
    return n;
  }

  /// Moves up to `max` elements into `out` (appended), visiting the shards round robin from
  /// `cursor` (advanced past the last shard taken from). Returns how many. With `skip_busy`,
  /// a shard whose lock is held is passed over (the caller comes back later): several lanes
  /// reaching for one pushed task must not queue on its lock, because std::mutex parks the
  /// losers in the kernel and the winner's unlock then pays a futex wake-up (~2 us on the
  /// H100 machine: bench/results/h100/probes/trace-busy-1d19156.txt). Without it (draining at
  /// shutdown), every shard is visited.
  /// `leave(s, size)` (optional) returns true for a shard the caller should leave to someone
  /// else this time, given its size hint.
  template <class Out, class Leave = bool (*)(std::size_t, std::size_t)>
  std::size_t take(
      Out& out, std::size_t max, std::size_t& cursor, bool skip_busy = false,
      Leave leave = [](std::size_t, std::size_t) { return false; }) {
    std::size_t taken = 0;
    const std::size_t n = shards_.size();
    const std::size_t start = cursor;
    for (std::size_t i = 0; i < n && taken < max; ++i) {
      const std::size_t s = (start + i) % n;
      Shard& sh = *shards_[s];
      // relaxed: a hint; the elements are read under the lock.
      const std::size_t hint = sh.size.load(std::memory_order_relaxed);
      if (hint == 0 || leave(s, hint)) continue;
      std::unique_lock<AdaptiveMutex> lock(sh.mutex, std::defer_lock);
      if (skip_busy) {
        if (!lock.try_lock()) continue;
      } else {
        lock.lock();
      }
      taken += sh.queue.take(out, max - taken);
      // relaxed: ordered with the pushers' stores by the mutex; see Shard::size.
      sh.size.store(sh.queue.size(), std::memory_order_relaxed);
      cursor = (s + 1) % n;
    }
    return taken;
  }

  /// Runs f() under every shard's lock in turn: a flag set before it is seen by every push
  /// that takes a shard lock after it, and every push that took one before it has finished.
  template <class F>
  void for_each_locked(F&& f) {
    for (auto& s : shards_) {
      std::lock_guard<AdaptiveMutex> lock(s->mutex);
      f(*s);
    }
  }

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace weft::gpu::detail
