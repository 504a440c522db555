// One output queue of the pool: finished records (of the pool's record stride), split into
// shards (one per scheduler lane, up to a few) so that consumers popping one task at a time and the
// lanes delivering to them do not all contend for one lock. Lane k delivers to shard k mod the
// shard count; a consumer takes from its home shard (its thread ticket modulo the shard count)
// first, then from the others. FIFO per lane; consumers that sleep wait on one condition variable
// per queue.
//
// Also counts, per queue, tasks accepted for it (one counter per input shard, written by that
// shard's pushers only) and tasks popped (one counter per output shard): unfinished() is their
// difference, exact once pushes have stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/adaptive_mutex.hpp"
#include "gpu/chunk_queue.hpp"
#include "gpu/input_queue.hpp"
#include "gpu/record_buffer.hpp"

namespace weft::gpu::detail {

class OutputQueue {
 public:
  /// Records of `stride` bytes; `shards` shards; accepted counts for `input_shards` shards.
  OutputQueue(std::size_t stride, std::size_t shards, std::size_t input_shards)
      : accepted_(std::max<std::size_t>(input_shards, 1)) {
    for (std::size_t s = 0; s < std::max<std::size_t>(shards, 1); ++s) {
      shards_.push_back(std::make_unique<Shard>(stride));
    }
  }

  [[nodiscard]] std::size_t shards() const noexcept { return shards_.size(); }
  [[nodiscard]] std::size_t home() const noexcept {
    return thread_ticket<PopTicket>() % shards_.size();
  }

  // ---- counting (pushers) ----
  /// `n` tasks for this queue were accepted through input shard `input_shard`. Called under
  /// that shard's lock, before the tasks can be taken (so popped never passes accepted).
  void accepted(std::size_t input_shard, std::size_t n) noexcept {
    // relaxed: the input shard's lock orders it before the tasks are taken; readers that
    // need an exact count read it after pushes stopped (see unfinished()).
    accepted_[input_shard].value.fetch_add(n, std::memory_order_relaxed);
  }
  /// Tasks accepted for this queue and not yet popped. Popped is read first: the result is
  /// never below the true count at that moment (never negative), and exact once pushes stop.
  [[nodiscard]] std::size_t unfinished() const noexcept {
    std::uint64_t popped = 0, accepted = 0;
    // seq_cst: two consumers that pop the last two records each count their own pop, then
    // read the other's; one of them sees both (the scheduler's after_take wake-up).
    for (const auto& s : shards_) popped += s->popped.load(std::memory_order_seq_cst);
    popped += direct_popped_.value.load(std::memory_order_seq_cst);
    for (const auto& c : accepted_) accepted += c.value.load(std::memory_order_seq_cst);
    return static_cast<std::size_t>(accepted - popped);
  }

  // ---- delivery (lanes) ----
  /// Appends a lane's finished records to shard `shard` (moved in; `chunk` comes back empty,
  /// possibly a recycled vector) and wakes sleeping consumers.
  void deliver(std::size_t shard, RecordBuffer& chunk) {
    if (chunk.empty()) return;
    const bool many = chunk.size() > 1;
    Shard& s = *shards_[shard % shards_.size()];
    {
      std::lock_guard<AdaptiveMutex> lock(s.mutex);
      s.ready.push_chunk(chunk);
      // seq_cst: a consumer about to sleep counts itself in waiters_ and then looks at
      // `available`; this store and the waiters_ load below are the other half (one of the
      // two sides sees the other's write).
      s.available.store(s.ready.size(), std::memory_order_seq_cst);
    }
    if (waiters_.load(std::memory_order_seq_cst) > 0) notify(many);
  }

  // ---- consumers ----
  /// Whether any shard has records (a snapshot).
  [[nodiscard]] bool any_available() const noexcept {
    for (const auto& s : shards_) {
      // seq_cst: see deliver().
      if (s->available.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
  }
  /// Copies one record into `r`, home shard first. Returns whether it got one.
  bool try_take_one(void* r, std::size_t home) {
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      Shard& s = *shards_[(home + i) % shards_.size()];
      // relaxed: a hint; the record is taken under the lock.
      if (s.available.load(std::memory_order_relaxed) == 0) continue;
      std::lock_guard<AdaptiveMutex> lock(s.mutex);
      if (s.ready.empty()) continue;
      s.ready.take_one(r);
      took(s, 1);
      return true;
    }
    return false;
  }
  /// Copies up to `max` records into the array `out`, home shard first. Returns how many.
  std::size_t take_into(void* out, std::size_t max, std::size_t home) {
    auto* to = static_cast<unsigned char*>(out);
    std::size_t taken = 0;
    for (std::size_t i = 0; i < shards_.size() && taken < max; ++i) {
      Shard& s = *shards_[(home + i) % shards_.size()];
      // relaxed: a hint; the records are taken under the lock.
      if (s.available.load(std::memory_order_relaxed) == 0) continue;
      std::lock_guard<AdaptiveMutex> lock(s.mutex);
      const std::size_t n = s.ready.take_into(to + taken * s.ready.stride(), max - taken);
      if (n != 0) took(s, n);
      taken += n;
    }
    return taken;
  }
  /// Sleeps until pred() (called under the queue's wait lock) holds. `registered` runs once
  /// this thread counts as a waiter and before it sleeps (the pool's mailbox: see
  /// Scheduler::wake_mailbox_lane).
  template <class Pred, class Registered>
  void wait(Pred pred, Registered registered) {
    std::unique_lock<std::mutex> lock(wait_mutex_);
    // seq_cst: see deliver(); and pairs with a push into the pool's mailbox (it stores the
    // mailbox's state, then looks at waiters_; registered() looks at that state after this).
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    registered();
    cv_.wait(lock, pred);
    waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: only ever a hint downward
  }
  template <class Pred>
  void wait(Pred pred) {
    wait(pred, [] {});
  }
  [[nodiscard]] bool has_waiters() const noexcept {
    // seq_cst: see deliver() (also used after a flag that ends waits was stored).
    return waiters_.load(std::memory_order_seq_cst) > 0;
  }
  /// `n` records of this queue reached a consumer without passing through it (the pool's
  /// mailbox, collected by the consumer itself): counted as popped.
  void took_directly(std::size_t n) noexcept {
    // seq_cst: see unfinished().
    direct_popped_.value.fetch_add(n, std::memory_order_seq_cst);
  }
  /// Wakes every sleeping consumer (so that it re-evaluates its predicate).
  void wake_all() { notify(true); }

 private:
  struct alignas(64) Shard {
    explicit Shard(std::size_t stride) : ready(stride) {}
    AdaptiveMutex mutex;
    ChunkQueue ready;                      // under mutex
    std::atomic<std::uint64_t> popped{0};  // written under mutex
    // ready.size(), readable without the lock. On a line of its own, so that waiting
    // consumers, who read it in a loop, do not take away the line a delivering lane writes
    // under the lock (as for InputQueue::Shard::size).
    alignas(64) std::atomic<std::size_t> available{0};
  };
  struct alignas(64) Counter {
    std::atomic<std::uint64_t> value{0};
  };

  void took(Shard& s, std::size_t n) {
    // relaxed: a hint for spinning consumers, who then take the lock.
    s.available.store(s.ready.size(), std::memory_order_relaxed);
    // seq_cst: see unfinished().
    s.popped.fetch_add(n, std::memory_order_seq_cst);
  }
  void notify(bool all) {
    // Taking the lock (empty section) orders this notify after a consumer that counted itself
    // in waiters_ has gone to sleep: it held the lock from counting until the wait.
    { std::lock_guard<std::mutex> lock(wait_mutex_); }
    if (all) {
      cv_.notify_all();
    } else {
      cv_.notify_one();
    }
  }

  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<Counter> accepted_;  // by input shard
  Counter direct_popped_;          // took_directly
  std::mutex wait_mutex_;
  std::condition_variable cv_;
  std::atomic<std::size_t> waiters_{0};
};

}  // namespace weft::gpu::detail
