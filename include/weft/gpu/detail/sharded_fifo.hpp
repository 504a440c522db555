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
//
// A long batch pushed to an empty shard may be lent instead of copied (PoolCore::push): the
// lanes read its first elements in place from the pusher's own array while the pusher copies
// the last ones, and the two meet in the middle (docs/gpu.md, "Lent batches").
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

/// What a lent batch provides (PoolCore's LentBatch): a count of the lanes reading it, and
/// append(out, first, n), which appends its elements first .. first + n - 1 to `out`. This one
/// is never lent (queues of plain elements).
struct NoLend {
  mutable std::atomic<int> readers{0};
  template <class Out>
  void append(Out&, std::size_t, std::size_t) const {}
};

template <class T, class Lent = NoLend>
class ShardedFifo {
 public:
  struct alignas(64) Shard {
    AdaptiveMutex mutex;
    ChunkQueue<T> queue;  // under mutex
    // A batch its pusher lends (under mutex; null: none): its elements [lent_front, lent_back)
    // are not yet claimed; lanes claim from the front and read them in place (take), the
    // pusher claims from the back and copies them into a vector of its own (claim_back), which
    // goes to the front of `queue` when the two meet (end_lend). Lent only while `queue` is
    // empty, so `queue` holds only what was pushed after it, and nothing is taken from `queue`
    // until the lend ends.
    const Lent* lent = nullptr;
    std::size_t lent_front = 0, lent_back = 0, lent_end = 0;
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

    // Under mutex. Elements queued, the lent batch's not yet read ones included (those the
    // pusher has claimed are still queued: they come back in end_lend).
    [[nodiscard]] std::size_t pending() const noexcept {
      return queue.size() + (lent != nullptr ? lent_end - lent_front : 0);
    }
    // Under mutex. Whether nothing is queued here (a batch may be lent).
    [[nodiscard]] bool empty() const noexcept { return lent == nullptr && queue.empty(); }
    // Under mutex, with empty(): lends `count` elements of `batch`.
    void lend(const Lent* batch, std::size_t count) noexcept {
      lent = batch;
      lent_front = 0;
      lent_back = lent_end = count;
    }
    // Under mutex, while lending: claims up to `max` elements from the back for the pusher to
    // copy; returns how many, from index `first`. 0: the lanes and the pusher have met.
    std::size_t claim_back(std::size_t max, std::size_t& first) noexcept {
      const std::size_t k = std::min(max, lent_back - lent_front);
      lent_back -= k;
      first = lent_back;
      return k;
    }
    // Under mutex, once claim_back returned 0: ends the lend. `tail` holds the lent batch's
    // elements at their indexes in it (those before the meeting point unused); the ones from
    // the meeting point on go to the front of the queue.
    void end_lend(std::vector<T>& tail) {
      const std::size_t meet = lent_back;
      lent = nullptr;
      queue.push_front_chunk(tail, meet);
    }
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
      cursor = (s + 1) % n;
      if (sh.lent != nullptr) {
        // The lent batch first, claimed under the lock and read outside it: the pusher's
        // push returns only when no lane reads its batch any more.
        const Lent* batch = sh.lent;
        const std::size_t first = sh.lent_front;
        const std::size_t k = std::min(max - taken, sh.lent_back - first);
        sh.lent_front += k;
        // relaxed: ordered with the pushers' stores by the mutex; see Shard::size.
        sh.size.store(sh.pending(), std::memory_order_relaxed);
        if (k == 0) continue;  // the pusher is copying the rest; nothing behind it may go first
        // relaxed: under the lock; the pusher reads the count only after it took the lock and
        // found the batch all claimed, so it sees this increment.
        batch->readers.fetch_add(1, std::memory_order_relaxed);
        lock.unlock();
        batch->append(out, first, k);
        // release: pairs with the pusher's acquire load of the count; these reads of the
        // batch happen before its push returns (and the caller may reuse the array).
        batch->readers.fetch_sub(1, std::memory_order_release);
        taken += k;
        continue;
      }
      taken += sh.queue.take(out, max - taken);
      // relaxed: ordered with the pushers' stores by the mutex; see Shard::size.
      sh.size.store(sh.queue.size(), std::memory_order_relaxed);
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
