// The single-task path: the lone-task mailbox. One task at a time, in a record of its own
// (detail/mailbox_record.hpp) that one block serving no ring polls continuously; the thread
// waiting for the task's output queue collects the result itself, without a scheduler lane.
// A task pushed to an idle pool so skips the ring's two trips over PCIe before its body starts
// and the lane's hand-over afterwards (docs/decisions/005-gpu-single-task-paths.md).
//
// Who may use it: a single push (not a batch) of at most kMailboxPayloadMax bytes into a FIFO
// pool, from a thread that pushed nothing for lone_gap (a thread that waits for each result
// pushes every few microseconds at most; threads that stream single tasks leave the mailbox
// alone and use the rings). A task for an output queue is collected by a consumer of that
// queue, or by the mailbox's lane after kGrace; a future's or callback's task only by the lane,
// at once.
//
// Its one state machine, in one word:
//
//   FREE --pusher (acquire CAS)--> FILLING --pusher (seq_cst, request written)--> IN_FLIGHT
//   IN_FLIGHT --consumer of its queue, or its lane (acquire CAS)--> COLLECTING
//   COLLECTING --collector (release, result read)--> FREE
//   COLLECTING --lane, deadline passed (delivered timed_out)--> LOST --result back--> FREE
//   FREE, LOST --failure or shutdown--> CLOSED; IN_FLIGHT --failure--> delivered, CLOSED
//   FREE --pause (its lane)--> CLOSED --resume--> FREE
//
// FILLING is never seen at shutdown or failure: pushers fill under their input shard's lock,
// which the input queue's close() takes. Whoever wins the CAS to COLLECTING delivers the task:
// exactly once. spec/mailbox.pml and spec/mailbox_wake.pml model it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "gpu/outbox.hpp"
#include "gpu/watchdog.hpp"
#include "weft/gpu/detail/mailbox_record.hpp"

namespace weft::gpu::detail {

class LoneTaskMailbox {
 public:
  using Clock = std::chrono::steady_clock;
  /// Any output queue (holds_task_for).
  static constexpr std::size_t kAnyQueue = ~std::size_t{0};

  /// `box`: the record the blocks serve (null: the pool has no mailbox, and every call says
  /// so). `lone_gap`: how long a thread must have pushed nothing for its push to be lone.
  LoneTaskMailbox(std::uint64_t* box, std::chrono::nanoseconds lone_gap, std::size_t capacity,
                  Watchdog& watchdog);

  [[nodiscard]] bool present() const noexcept { return box_ != nullptr; }

  // ---- pushers ----
  /// Under the pusher's input shard lock: takes `record` (TaskRecord bytes) for queue `out`,
  /// or for callback handle `callback` (not 0), if it is a lone task and the mailbox is free;
  /// accept() runs once it is taken, before the task can be collected. Returns whether it took
  /// it.
  template <class Accept>
  bool try_push(const unsigned char* record, std::size_t out, std::uint32_t callback,
                Accept accept) {
    if (!claim(record)) return false;
    accept();
    fill(record, out, callback);
    return true;
  }

  // ---- consumers ----
  /// Whether it holds a task for queue `out` whose result is back (a snapshot).
  [[nodiscard]] bool ready_for(std::size_t out) const noexcept;
  /// Collects the task for queue `out` into `record` (TaskRecord bytes) if its result is back.
  /// The caller then counts it popped from its queue, then count_delivered().
  bool take_for(std::size_t out, unsigned char* record);
  /// A task a consumer collected (take_for) is delivered. seq_cst: as a lane's count of
  /// deliveries (a synchronize() sees it, or the wake-up after it sees the waiter).
  void count_delivered() noexcept { delivered_.fetch_add(1, std::memory_order_seq_cst); }
  /// Whether it holds a task for queue `out` (or any) not yet delivered. seq_cst: the look a
  /// thread about to sleep pairs with the push's store of IN_FLIGHT.
  [[nodiscard]] bool holds_task_for(std::size_t out) const noexcept;
  /// Whether it has held a task for queue `out` for longer than `after` at `now` (a hint).
  [[nodiscard]] bool held_longer(std::size_t out, Clock::time_point now,
                                 Clock::duration after) const noexcept;

  // ---- its lane ----
  /// Whether a task is in it that nobody has delivered yet, or a lost one (a hint).
  [[nodiscard]] bool busy() const noexcept;
  /// Whether a task is in it that nobody has delivered yet (a hint; not a lost one).
  [[nodiscard]] bool undelivered() const noexcept {
    const std::uint32_t s = state_.load(rx);  // relaxed: a hint; lane_round acts by CAS
    return s == kInFlight || s == kCollecting;
  }
  /// The lane's round: delivers a task whose result has waited kGrace for a consumer (at once
  /// when `now_or_never`: stopping), times one out, frees the mailbox when a timed-out task
  /// ends after all. Returns how many tasks it staged (0 or 1).
  std::size_t lane_round(Outbox& outbox, Clock::time_point now, bool now_or_never);
  /// Failure (the blocks died), after the input was closed: the task, if any, is staged as
  /// device_failed and the mailbox closed. Returns how many it staged.
  std::size_t fail(Outbox& outbox);
  /// Shutdown, after the lanes stopped: the server's EXIT request. Returns whether a timed-out
  /// task was still running in it (its block is then abandoned).
  bool close_for_shutdown();
  /// Pause (its lane, with the pool's input held back): closes it if it is free, so that no
  /// push takes it, and writes the server's EXIT request. Returns false while it holds a task
  /// (the lane delivers it first, then calls again); true with no mailbox at all.
  bool close_for_pause();
  /// Resume, the blocks started again with the mailbox memory zeroed (use 0): free again, at
  /// a next use that is not 0 (the new server takes 0 as served).
  void reopen_after_pause();

  // ---- statistics (relaxed) ----
  [[nodiscard]] std::uint64_t tasks() const noexcept { return tasks_.load(rx); }
  [[nodiscard]] std::uint64_t taken() const noexcept { return taken_.load(rx); }
  [[nodiscard]] std::uint64_t failed() const noexcept { return failed_.load(rx); }
  /// Tasks consumers collected themselves (the lanes count what they deliver).
  [[nodiscard]] std::uint64_t delivered() const noexcept {
    return delivered_.load(std::memory_order_seq_cst);  // seq_cst: see take_for
  }

  /// How long a finished task waits for a consumer of its queue before the lane delivers it to
  /// the queue: a consumer that waits for it polls it continuously, so it takes it well within
  /// this, and one that does not (a thread that only pushes) gets it through the queue.
  static constexpr std::chrono::microseconds kGrace{20};

 private:
  static constexpr auto rx = std::memory_order_relaxed;
  static constexpr std::uint32_t kFree = 0, kFilling = 1, kInFlight = 2, kCollecting = 3, kLost = 4,
                                 kClosed = 5;
  // out_ of a future's or callback's task: no consumer's queue.
  static constexpr std::uint32_t kNoQueue = ~std::uint32_t{0};

  bool claim(const unsigned char* record);
  void fill(const unsigned char* record, std::size_t out, std::uint32_t callback);
  bool take(std::size_t out, bool any, unsigned char* record, SlotMeta& m);
  void finish_take(const SlotMeta& m, unsigned char* record);
  std::size_t time_out(Outbox& outbox, Clock::time_point now);

  std::uint64_t* box_;  // null: no mailbox
  std::uint64_t lone_gap_ticks_;
  std::size_t room_;
  Watchdog& watchdog_;

  // The state and the hints beside it are read by every waiting consumer and written once per
  // task: a line of their own.
  alignas(64) std::atomic<std::uint32_t> state_{kClosed};
  std::atomic<std::uint32_t> use_{0};   // the current request's tag
  std::atomic<std::uint32_t> out_{0};   // its output queue, kNoQueue: a callback's
  std::atomic<std::uint32_t> size_{0};  // its payload size
  std::atomic<Clock::rep> loaded_{0};   // when it was pushed (the watchdog's start)
  SlotMeta meta_;  // written by the pusher in FILLING, read by the collector holding it

  alignas(64) std::atomic<std::uint64_t> delivered_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> taken_{0};
  std::atomic<std::uint64_t> tasks_{0};  // written by pushers
  // The lane's own: the use whose result it first saw back, and when.
  std::uint32_t seen_use_ = 0;
  Clock::time_point seen_{};
};

}  // namespace weft::gpu::detail
