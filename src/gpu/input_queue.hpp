// The pool's input queue: tasks pushed and not yet taken by a scheduler lane, as entries of
// fixed stride (a header and the payload's room), in FIFO or priority order.
//
// FIFO order: split into shards so that threads pushing one task at a time do not all contend
// for one lock. A pushing thread always uses the same shard (its ticket modulo the shard
// count), so its tasks stay in the order it pushed them; the lanes take from every shard,
// round robin. Priority order: one heap under one mutex (higher first, FIFO among equals).
//
// Its one state machine is OPEN -> CLOSED (close()): a push that takes a shard lock (or the
// heap's) after close() sees CLOSED and is refused; every push that took one before it has
// finished queueing when close() returns.
//
// Why not a library queue: none of the well-kept concurrent queues (oneTBB, Boost.Lockfree,
// moodycamel) is on the GPU machines, which cannot install anything, and the shards need this
// close protocol (docs/decisions/002-gpu-input-queue.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/adaptive_mutex.hpp"
#include "gpu/chunk_queue.hpp"
#include "gpu/record_buffer.hpp"
#include "weft/gpu/record.hpp"

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

/// A queued task's header; its payload follows at kEntryPayloadOffset. 24 bytes, so that an
/// entry of a 16-byte payload is 40 bytes: the pusher's copy of a batch is most of what a
/// batched push costs.
struct EntryHead {
  std::uint32_t type;
  std::uint32_t payload_size;
  std::uint64_t tag;
  std::uint32_t out;       // output queue
  std::uint32_t callback;  // callback table handle, 0: none; or kGraphTaskFlag | table index
};
/// In EntryHead::callback (and SlotMeta::callback): the entry is the root of a task graph with
/// this index in the blocks' graph table (the low bits), delivered to `out` like a pushed task
/// and reported to the graph feed. Callback handles stay below it.
inline constexpr std::uint32_t kGraphTaskFlag = 1u << 31;
inline constexpr std::size_t kEntryPayloadOffset = sizeof(EntryHead);
static_assert(kEntryPayloadOffset == 24);
constexpr std::size_t entry_stride(std::size_t payload_capacity) noexcept {
  return kEntryPayloadOffset + payload_room(payload_capacity);
}

class InputQueue {
 public:
  struct alignas(64) Shard {
    explicit Shard(std::size_t stride) : queue(stride) {}
    AdaptiveMutex mutex;
    ChunkQueue queue;  // under mutex
    // Tasks accepted through this shard (FIFO or priority order alike), counted under the
    // pusher's lock before they can be taken: the scheduler's count of what is pending.
    std::atomic<std::uint64_t> accepted{0};
    // queue.size(), readable without the lock: a hint for lanes choosing where to look, and
    // (seq_cst) the fact a lane about to sleep checks against the pusher's look at the
    // sleeping count (Scheduler::push / sleep_until_work). On a line of its own, so that the
    // lanes, which read it every round and while they spin, do not take away the line the
    // pusher writes under the lock.
    alignas(64) std::atomic<std::size_t> size{0};
  };

  InputQueue(QueueOrder order, std::size_t payload_capacity, std::size_t shards);

  [[nodiscard]] bool fifo() const noexcept { return order_ == QueueOrder::fifo; }
  [[nodiscard]] std::size_t entry_stride() const noexcept { return stride_; }
  [[nodiscard]] std::size_t shards() const noexcept { return shards_.size(); }
  /// The calling thread's shard.
  [[nodiscard]] std::size_t home() const noexcept {
    return thread_ticket<PushTicket>() % shards_.size();
  }
  Shard& shard(std::size_t s) noexcept { return *shards_[s]; }
  const Shard& shard(std::size_t s) const noexcept { return *shards_[s]; }

  /// Writes the entry of `record` (a TaskRecord's bytes, its payload size checked against the
  /// capacity) into `to`. Inline: a batched push runs it for every record.
  void write_entry(unsigned char* to, const unsigned char* record, std::size_t out,
                   std::uint32_t callback) const noexcept {
    RecordHead r;
    std::memcpy(&r, record, sizeof r);
    const EntryHead e{r.type, r.payload_size, r.tag, static_cast<std::uint32_t>(out), callback};
    std::memcpy(to, &e, sizeof e);
    copy_payload(to + kEntryPayloadOffset, record + kRecordPayloadOffset, room_, r.payload_size);
  }

  // ---- state ----
  /// Whether close() was called. relaxed: a push reads it under its shard's (or the heap's)
  /// lock, which close() takes after storing it.
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_relaxed); }
  /// Refuses every later push; returns once every push that was accepted is queued.
  void close();

  // ---- pushing ----
  /// Under shard `s`'s lock (or the heap's): counts `n` tasks accepted before they can be
  /// taken, so that the count of deliveries never passes it.
  void count_accepted(std::size_t s, std::size_t n) noexcept {
    // relaxed: the lock orders it before the tasks are taken; see accepted().
    shards_[s]->accepted.fetch_add(n, std::memory_order_relaxed);
  }
  /// Priority order: queues `count` records (of `record_stride` bytes each) at `priority`,
  /// calling accept() under the heap's lock first. Returns false (nothing queued) once closed.
  template <class Accept>
  bool push_ranked(const unsigned char* records, std::size_t record_stride, std::size_t count,
                   std::size_t out, std::uint32_t callback, int priority, Accept accept) {
    std::lock_guard<std::mutex> lock(heap_mutex_);
    if (closed()) return false;
    accept();
    for (std::size_t k = 0; k < count; ++k) {
      add_ranked(records + k * record_stride, out, callback, priority);
    }
    // seq_cst: as the shards' size (see Shard::size).
    heap_size_.store(heap_.size(), std::memory_order_seq_cst);
    return true;
  }

  // ---- taking ----
  /// Tasks queued (a snapshot; seq_cst loads, see Shard::size).
  [[nodiscard]] std::size_t size() const noexcept {
    if (!fifo()) return heap_size_.load(std::memory_order_seq_cst);
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size.load(std::memory_order_seq_cst);
    return n;
  }
  /// Tasks accepted through all shards (seq_cst loads: the scheduler reads them after its
  /// count of deliveries).
  [[nodiscard]] std::uint64_t accepted() const noexcept;
  /// Moves up to `max` entries into `out` (appended). FIFO: visits the shards round robin from
  /// `cursor` (advanced past the last shard taken from). With `skip_busy`, a shard whose lock
  /// is held is passed over (the caller comes back later): several lanes reaching for one
  /// pushed task must not queue on its lock, because the losers park in the kernel and the
  /// winner's unlock then pays a futex wake-up. Without it (draining at shutdown), every shard
  /// is visited. `leave(s, size)` returns true for a shard the caller should leave to someone
  /// else this time, given its size hint. Returns how many it took.
  template <class Leave>
  std::size_t take(RecordBuffer& out, std::size_t max, std::size_t& cursor, bool skip_busy,
                   Leave leave) {
    if (!fifo()) return take_ranked(out, max);
    std::size_t taken = 0;
    const std::size_t n = shards_.size();
    const std::size_t start = cursor;
    for (std::size_t i = 0; i < n && taken < max; ++i) {
      const std::size_t s = (start + i) % n;
      Shard& sh = *shards_[s];
      // relaxed: a hint; the entries are read under the lock.
      const std::size_t hint = sh.size.load(std::memory_order_relaxed);
      if (hint == 0 || leave(s, hint)) continue;
      std::unique_lock<AdaptiveMutex> lock(sh.mutex, std::defer_lock);
      if (skip_busy) {
        if (!lock.try_lock()) continue;
      } else {
        lock.lock();
      }
      taken += sh.queue.take(out, max - taken);
      // Ordered with the pushers' stores by the mutex; see Shard::size. release: a lane whose
      // look at the sizes (seq_cst) reads this store instead of the push's before it still
      // sees what the pusher saw (the other lanes' idle hints, stored before it popped):
      // the push happened before this take through the mutex.
      sh.size.store(sh.queue.size(), std::memory_order_release);
      cursor = (s + 1) % n;
    }
    return taken;
  }
  std::size_t take(RecordBuffer& out, std::size_t max, std::size_t& cursor) {
    return take(out, max, cursor, false, [](std::size_t, std::size_t) { return false; });
  }

 private:
  struct Ranked {
    int priority;
    std::uint64_t seq;
    std::uint32_t at;  // element of ranked_entries_
  };
  struct RankedLess {  // max-heap: higher priority first, then lower sequence (FIFO)
    bool operator()(const Ranked& a, const Ranked& b) const {
      return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
    }
  };
  void add_ranked(const unsigned char* record, std::size_t out, std::uint32_t callback,
                  int priority);
  std::size_t take_ranked(RecordBuffer& out, std::size_t max);

  QueueOrder order_;
  std::size_t room_;
  std::size_t stride_;
  std::vector<std::unique_ptr<Shard>> shards_;  // FIFO; both orders count accepted tasks here
  std::atomic<bool> closed_{false};

  alignas(64) std::mutex heap_mutex_;
  std::vector<Ranked> heap_;               // under heap_mutex_
  RecordBuffer ranked_entries_;            // under heap_mutex_: the heap's entries
  std::vector<std::uint32_t> free_at_;     // under heap_mutex_: unused elements of it
  std::uint64_t next_seq_ = 0;             // under heap_mutex_
  std::atomic<std::size_t> heap_size_{0};  // heap_.size(), readable without the lock
};

}  // namespace weft::gpu::detail
