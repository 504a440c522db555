// weft/gpu/detail/pool_core.hpp - the host half of the pool: input queue, scheduler lanes,
// slot bookkeeping, watchdog and output queues (seed 000 §3.2). Independent of where blocks
// run.
//
// The blocks (each with a ring of slots) are split into contiguous ranges, one per scheduler
// lane (a host thread). A lane owns its blocks' rings outright: only it loads them, collects
// them and keeps their bookkeeping, so lanes share nothing but the input queue (one lock per
// shard per batch taken) and the output queues (one lock per batch delivered, to the lane's
// own shard). Everything per task in a lane is lock-free and allocation-free; a single push or
// pop takes one uncontended lock (the thread's shard) in the common case.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>  // __rdtsc: the lone-task rule's clock (and WEFT_POOL_PROFILE's)
#endif

#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/chunk_queue.hpp"
#include "weft/gpu/detail/mailbox.hpp"
#include "weft/gpu/detail/sharded_fifo.hpp"
#include "weft/gpu/detail/sharded_output.hpp"
#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

enum class QueueOrder : std::uint8_t { fifo, priority };

/// A task as pushed and as popped: type id, payload bytes, a user tag, and (popped) how it
/// ended. The payload holds the task's inputs when pushed and its results when popped; its
/// bytes past payload_size are unspecified in a popped record (small payloads travel whole).
template <std::size_t Capacity>
struct TaskRecord {
  static_assert(Capacity >= 8 && Capacity <= 256,
                "weft::gpu: payload capacity must be between 8 and 256 bytes");
  std::uint32_t type = 0;
  std::uint32_t payload_size = 0;
  std::uint64_t tag = 0;
  TaskStatus status = TaskStatus::ok;
  alignas(16) unsigned char payload[Capacity] = {};

  template <GpuTaskType T>
  static TaskRecord make(const typename T::Payload& p, std::uint64_t tag = 0) {
    static_assert(sizeof(typename T::Payload) <= Capacity,
                  "weft::gpu: this task type's Payload exceeds the pool's payload capacity");
    TaskRecord r;
    r.type = T::kId;
    r.payload_size = sizeof(typename T::Payload);
    r.tag = tag;
    std::memcpy(r.payload, &p, sizeof p);
    return r;
  }
  /// The payload as T's Payload. Throws weft::InvalidState when the record is of another type.
  template <GpuTaskType T>
  typename T::Payload as() const {
    static_assert(sizeof(typename T::Payload) <= Capacity);
    if (type != T::kId || payload_size != sizeof(typename T::Payload)) {
      throw InvalidState("weft::gpu::TaskRecord::as: the record holds type " +
                         std::to_string(type) + ", not " + std::to_string(T::kId));
    }
    typename T::Payload p;
    std::memcpy(&p, payload, sizeof p);
    return p;
  }
  [[nodiscard]] bool ok() const noexcept { return status == TaskStatus::ok; }
};

/// Counters of a pool's life (approximate while it runs).
struct PoolStats {
  std::uint64_t pushed = 0;
  std::uint64_t completed = 0;  // delivered with any status
  std::uint64_t failed = 0;     // delivered with a status other than ok
  std::uint64_t timed_out = 0;  // delivered as timed_out by the watchdog
  std::uint64_t scheduler_sleeps = 0;
  std::uint64_t slots_lost = 0;     // slots whose task passed the deadline and has not ended yet
  std::uint64_t host_polls = 0;     // device backend: reads of host memory by the blocks
  std::uint64_t direct_loads = 0;   // single pushes that loaded an idle standby slot themselves
  std::uint64_t mailbox_tasks = 0;  // single pushes that went through the lone-task mailbox
  std::uint64_t mailbox_taken = 0;  // ... of which a consumer collected itself (the rest: a lane)
};

namespace detail {

/// Copies a payload of `size` bytes between buffers of at least `Capacity` bytes (records,
/// queue entries, slots). Small capacities are copied whole, as fixed-size moves the compiler
/// turns into a few vector instructions: a memcpy call of a run-time size made a queue entry's
/// copy 3x slower (2.5 against 7.8-9.3 ns per record in cache on the 2-core VM,
/// bench/results/cpu2/probes/push_copy_probe-c4680b1.txt). The bytes past `size` carry no
/// meaning.
template <std::size_t Capacity>
inline void copy_payload(void* to, const void* from, std::size_t size) noexcept {
  if constexpr (Capacity <= 64) {
    (void)size;
    std::memcpy(to, from, Capacity);
  } else {
    std::memcpy(to, from, size);
  }
}

#if defined(WEFT_POOL_PROFILE)
// scripts/probes/lane_profile.cu: TSC cycles pushing threads spent in push() copying a batch
// into an entry vector, waiting for their shard's lock, and in all.
inline std::atomic<std::uint64_t> g_push_copy_cycles{0}, g_push_lock_cycles{0},
    g_push_total_cycles{0};
#endif

#if defined(WEFT_PROBE_RING_LEVELS)
// scripts/probes/busy_probe.cu: how many tasks a block's ring still held each time a lane
// collected from it (index: tasks left in flight, the last counts 32 and more).
inline std::atomic<std::uint64_t> g_probe_ring_levels[33];
// ... and how many it held before that collection.
inline std::atomic<std::uint64_t> g_probe_ring_before[33];
#endif

#if defined(WEFT_POOL_TRACE)
// scripts/probes/latency_trace.cu: steady-clock ns when a lane last stored READY, last saw
// FINISHED, and last delivered to an output queue.
inline std::atomic<long long> g_trace_taken{0}, g_trace_loaded{0}, g_trace_seen{0},
    g_trace_delivered{0};
inline long long trace_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
#endif

/// How the scheduler lanes and consumers behave (from PoolOptions; validated by Pool).
struct SchedulerConfig {
  std::size_t lanes = 0;  // 0: automatic
  std::chrono::nanoseconds idle_spin{std::chrono::microseconds(1000)};
  std::chrono::nanoseconds consumer_spin{std::chrono::microseconds(50)};
  std::chrono::nanoseconds task_deadline{0};  // 0: no watchdog
  // Device backend: ring the doorbell after loading a slot whose block has been idle at least
  // this long (it may be in deep idle); 0: after every batch.
  std::chrono::nanoseconds ring_after{0};
  // Device backend: each lane's first block is a standby block (never in deep idle), and the
  // lane gives it a task before any other block while it is free.
  bool standby = false;
  // Where every block's counts of loaded and collected tasks start. Only tests set it: near
  // 2^32, so that a short run crosses the counts' wrap-around.
  std::uint32_t count_origin = 0;
  // Under a backlog, a lane with more blocks than this listed fills each block's whole ring at
  // once instead of one level at a time (lane_main). Tests set 0, so that the host backend's
  // few blocks take that path too.
  std::size_t whole_ring_blocks = 256;
};

template <std::size_t Capacity>
class PoolCore {
 public:
  using Record = TaskRecord<Capacity>;
  using Callback = std::function<void(Record&)>;
  using Clock = std::chrono::steady_clock;

  PoolCore(std::unique_ptr<BlockRuntime> blocks, std::size_t output_queues, QueueOrder order,
           SchedulerConfig config)
      : blocks_(std::move(blocks)),
        layout_(blocks_->rings()),
        depth_(static_cast<std::uint32_t>(layout_.depth)),
        order_(order),
        config_(config),
        input_(kInputShards) {
    if (output_queues == 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::output_queues must be >= 1 (got 0)");
    }
    const std::size_t n = blocks_->num_blocks();
    // Auto: one lane for the host backend (its blocks are threads already), else one per 64
    // blocks, at most 8 and at most half the hardware threads (each lane keeps a core busy
    // while tasks flow). On the H100 machine (16 cores, 792 blocks), 8 lanes against 4:
    // busy at 10 us 0.35-0.47 -> 0.65-0.71, batched empty tasks 18.7-21.7 -> 12.8-13.5 ns,
    // idle host traffic 0.4% -> 0.7% of the pinned bandwidth (a standby block per lane);
    // single tasks as fast once consumers' home shards are ones lanes deliver to
    // (kOutputShardsMax) (docs/gpu.md "Scheduler lanes"). Rounded down to a power of two, so
    // that every lane is home to as many input shards as the others and lane k's output
    // shard (k mod 4) takes as many lanes' tasks as the others: with 6 lanes, single tasks
    // took 166-365 ns against 110-149 with 8 and 76-129 with 4
    // (bench/results/h100/probes/home_only_single_ab-ecfd740.txt).
    const std::size_t cores = std::max<std::size_t>(1, std::thread::hardware_concurrency() / 2);
    const std::size_t wanted =
        config_.lanes != 0 ? config_.lanes
        : blocks_->host_polls_counted()
            ? std::bit_floor(std::min<std::size_t>({8, (n + 63) / 64, cores}))
            : 1;
    const std::size_t lanes = std::clamp<std::size_t>(wanted, 1, n);
    lanes_.reserve(lanes);
    for (std::size_t k = 0; k < lanes; ++k) {
      auto lane = std::make_unique<Lane>();
      lane->first = k * n / lanes;
      const std::size_t count = (k + 1) * n / lanes - lane->first;
      lane->blocks.resize(count);  // idle_since: the epoch, long ago: ring
      for (BlockMeta& bm : lane->blocks) bm.loaded = bm.collected = config_.count_origin;
      lane->meta.resize(count * depth_);
      lane->heads.assign(depth_, kNil);
      lane->level_size.assign(depth_, 0);
      lane->active.reserve(count);
      lane->finishing.reserve(count);
      // Every block starts empty, in the level-0 list; pushed from the last so that the lowest
      // index is on top (light load goes to the same few blocks, which keep polling fast).
      for (std::size_t b = count; b-- > 0;) link(*lane, static_cast<std::uint32_t>(b));
      lane->idle_blocks.store(count, std::memory_order_relaxed);  // relaxed: before the threads
      lane->staged.resize(output_queues);
      lane->index = k;
      lane->cursor = k;  // lanes start their sweeps of the input shards at different shards
      lanes_.push_back(std::move(lane));
    }
    outputs_.reserve(output_queues);
    for (std::size_t q = 0; q < output_queues; ++q) {
      outputs_.push_back(std::make_unique<Output>(std::min(lanes, kOutputShardsMax), kInputShards));
    }
    if (config_.standby) {
      std::vector<std::size_t> standby;
      for (const auto& lane : lanes_) standby.push_back(lane->first);
      blocks_->set_standby(standby);
    }
    mbox_ = blocks_->mailbox();
    // relaxed: before the threads start.
    mbox_state_.store(mbox_ != nullptr ? kMboxFree : kMboxClosed, std::memory_order_relaxed);
    blocks_->start();
    for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { lane_main(*l); });
  }

  ~PoolCore() { shutdown(); }

  // ---- input ----
  void push(const Record* records, std::size_t count, std::size_t out, int priority,
            Callback callback = nullptr) {
#if defined(WEFT_POOL_PROFILE)
    const std::uint64_t t_start = __rdtsc();
    struct AddTotal {
      std::uint64_t start;
      ~AddTotal() { g_push_total_cycles.fetch_add(__rdtsc() - start, std::memory_order_relaxed); }
    } add_total{t_start};
#endif
    check_out(out, "push");
    if (count == 0) return;
    // A long batch is copied outside the lock and handed over as one chunk. The vector is the
    // thread's own, swapped for an emptied one from the queue each time: a steady pusher
    // neither allocates nor touches fresh pages.
    const bool fifo = order_ == QueueOrder::fifo;
    const bool as_chunk = fifo && count > kShortBatch;
    thread_local std::vector<Entry> chunk;
    if (as_chunk) {
      chunk.clear();
      chunk.reserve(count);
      for (std::size_t k = 0; k < count; ++k) {
        check_record(records[k]);  // in the copy's pass: one read of the caller's records
        chunk.push_back(Entry::of(records[k], out, 0));
      }
    } else {
      for (std::size_t k = 0; k < count; ++k) check_record(records[k]);
    }
#if defined(WEFT_POOL_PROFILE)
    const std::uint64_t t_copied = __rdtsc();
    g_push_copy_cycles.fetch_add(t_copied - t_start, std::memory_order_relaxed);
#endif
    const std::uint32_t cb = callback ? add_callback(std::move(callback)) : 0;
    const std::size_t home = input_.home();
    bool refused = false;
    std::size_t queued = 0;  // FIFO: the shard's size after this push (under its lock)
    Lane* direct = nullptr;  // the lane whose standby slot this thread loaded (push_direct)
    bool mailed = false;     // the task went into the mailbox (mailbox_push)
    if (fifo) {
      auto& shard = input_.shard(home);
      std::lock_guard<AdaptiveMutex> lock(shard.mutex);
#if defined(WEFT_POOL_PROFILE)
      g_push_lock_cycles.fetch_add(__rdtsc() - t_copied, std::memory_order_relaxed);
#endif
      // relaxed: closed_ is stored before close() takes every shard lock; under this lock it
      // is seen, or this push finishes before close() returns (sharded_fifo.hpp).
      refused = closed_.load(std::memory_order_relaxed);
      // A single task with nothing of this thread's queued before it: straight into an idle
      // standby slot, if a lane offers one. Under the shard lock, so that close() (which
      // takes it) returns only after a direct load has been handed to its lane.
      // The mailbox first (a task of its own, collected by whoever waits for it), else an
      // offered standby slot. Not for futures and callbacks: those are delivered by a lane.
      if (!refused && count == 1 && shard.queue.empty()) {
        mailed = cb == 0 && mailbox_push(home, records[0], out);
        if (!mailed) direct = push_direct(home, records[0], out, cb);
      }
      if (!refused && direct == nullptr && !mailed) {
        count_accepted(home, out, count, cb);
        if (as_chunk) {
          shard.queue.push_chunk(chunk);
        } else {
          for (std::size_t k = 0; k < count; ++k) {
            shard.queue.push_one(Entry::of(records[k], out, cb));
          }
        }
        queued = shard.queue.size();
      }
    }
    // A mailbox task wakes no lane unless a thread sleeps for its queue (or in synchronize):
    // the thread that waits for it collects it itself. Waking the lane for every one, when it
    // slept after its idle spin, cost each lone push a futex call (latency p50 7.1-7.8 us
    // without the mailbox, 9.8-10.1 with it and that wake-up, on one H100 instance:
    // bench/results/h100/probes/mailbox_probe-73a4785.txt). But a consumer already asleep on
    // the queue (it registered, saw no mailbox task, slept) must get it: then the lane
    // delivers it. seq_cst: the waiter counts pair with the mailbox's IN_FLIGHT, stored
    // before (a sleeper registers, then looks at the mailbox: ShardedOutput::wait,
    // synchronize); one side sees the other. Found by CI: Mailbox.LoneTasksFromManyThreads
    // hung under ThreadSanitizer with a consumer and both lanes asleep.
    if (mailed) {
      if (outputs_[out]->has_waiters() || sync_waiters_.load(std::memory_order_seq_cst) > 0) {
        wake_mailbox_lane(kAnyQueue);
      }
      return;
    }
    if (direct != nullptr) {
      // seq_cst: pairs with sleep_until_work (the lane sets napping, then looks at its offer;
      // push_direct stored FILLED, this looks at napping). Only that lane needs to wake: a
      // look at the count of all sleepers made every direct push pay a futex call while
      // other lanes slept (push() 4.7 us, bench/results/h100/probes/latency_ab-bff043d.txt).
      if (direct->napping.load(std::memory_order_seq_cst)) {
        { std::lock_guard<std::mutex> lock(in_mutex_); }  // the sleeper is in its wait, or sees us
        in_cv_.notify_all();  // the lane that offered must wake, not just any lane
      }
      return;
    }
    if (fifo && !refused) {
      // Stored after the unlock: lanes that see it find the lock free. Stored under the lock,
      // it sent every spinning lane to try_lock a mutex the pusher still held, and the
      // pusher's unlock then waited for the mutex's cache line among them: push() took 2.95 us
      // (p50) with 4 lanes, 0.94 with 1 (bench/results/h100/probes/latency_trace-48d179e.txt).
      // The value may be stale when it lands, but it is never 0: only a lane stores 0, under
      // the lock, when the shard is empty, and every push after that stores after it. A
      // stale value only sends a lane to take (it stores the true size under the lock). The
      // window between the unlock and this store is covered by the pairing below.
      // seq_cst: pairs with sleep_until_work (a lane counts itself asleep, then looks at the
      // shards; this push stores the size, then looks at the count of sleepers).
      input_.shard(home).size.store(queued, std::memory_order_seq_cst);
    } else if (!fifo) {
      std::lock_guard<std::mutex> lock(in_mutex_);
      refused = closed_.load(std::memory_order_relaxed);  // relaxed: as above (in_mutex_)
      if (!refused) {
        count_accepted(home, out, count, cb);
        for (std::size_t k = 0; k < count; ++k) {
          heap_.push_back(Ranked{Entry::of(records[k], out, cb), priority, next_seq_++});
          std::push_heap(heap_.begin(), heap_.end(), RankedLess{});
        }
        heap_size_.store(heap_.size(), std::memory_order_seq_cst);  // seq_cst: as above
      }
    }
    if (refused) {
      if (cb != 0) (void)take_callback(cb);
      std::vector<Entry>().swap(chunk);  // a refused batch keeps no memory
      throw ShutDown("weft::gpu::Pool::push: no_more_tasks() was called; nothing more is accepted");
    }
    // When the shard's home lane takes these tasks itself (home_takes; the other lanes leave
    // them to it), nobody needs waking, however many other lanes sleep (lanes sleep after
    // their own idle_spin, lane_main), and a thread pushing single tasks pays no futex call.
    if (fifo && home_takes(home, queued)) return;
    // seq_cst: see the size store above.
    if (sleeping_lanes_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(in_mutex_); }  // the sleeper is in its wait, or sees us
      if (count > 1) {
        in_cv_.notify_all();
      } else {
        in_cv_.notify_one();
      }
    }
  }

  // ---- output ----
  Record pop(std::size_t out) {
    check_out(out, "pop");
    Output& q = *outputs_[out];
    const std::size_t home = q.home();
    Record r;
    // The queue before the mailbox (here and in pop_batch): a consumer woken by a delivery's
    // notify_one must take that record, or another consumer may sleep on beside it
    // (spec/mailbox_wake.pml, mutant 4).
    take_waiting(q, out, "pop", [&] {
      return q.try_take_one(r, home) || mailbox_take_for(out, r) ? std::size_t{1} : 0;
    });
    return r;
  }

  bool try_pop(Record& r, std::size_t out) {
    check_out(out, "try_pop");
    Output& q = *outputs_[out];
    if (!q.try_take_one(r, q.home()) && !mailbox_take_for(out, r)) {
      mailbox_nudge(out);
      return false;
    }
    after_take(q);
    return true;
  }

  std::size_t pop_batch(std::span<Record> into, std::size_t out) {
    check_out(out, "pop_batch");
    if (into.empty()) return 0;
    Output& q = *outputs_[out];
    const std::size_t home = q.home();
    return take_waiting(q, out, "pop_batch", [&] {
      const std::size_t n = q.take_into(into.data(), into.size(), home);
      return n != 0 ? n : mailbox_take_for(out, into[0]) ? std::size_t{1} : 0;
    });
  }

  [[nodiscard]] std::size_t unfinished(std::size_t out) const {
    check_out(out, "unfinished");
    return outputs_[out]->unfinished();
  }

  void no_more_tasks() {
    close();
    wake_all_outputs();
  }

  /// Waits until every task pushed so far has been delivered.
  void synchronize() {
    std::unique_lock<std::mutex> lock(idle_mutex_);
    // seq_cst: pairs with finish_pending (it counts deliveries, then looks for waiters; this
    // counts itself a waiter, then looks at the deliveries).
    sync_waiters_.fetch_add(1, std::memory_order_seq_cst);
    wake_mailbox_lane(kAnyQueue);  // a mailbox task is delivered by its lane then
    idle_cv_.wait(lock, [&] { return pending() == 0; });
    sync_waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a hint downward
  }

  /// Stops the pool: tasks not yet in a slot are delivered as cancelled, tasks in slots finish
  /// (or time out), the blocks exit and the lanes join. Idempotent.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      if (stopping_ && lanes_joined_) return;
      stopping_ = true;
    }
    close();  // every push from now on is refused; every accepted one is in a queue
    // release: pairs with the lanes' acquire loads; a lane that sees it also sees the close
    // (and so finds every accepted task when it cancels what is queued).
    stop_flag_.store(true, std::memory_order_release);
    { std::lock_guard<std::mutex> lock(in_mutex_); }  // sleeping lanes are in their wait
    in_cv_.notify_all();
    for (auto& lane : lanes_) {
      if (lane->thread.joinable()) lane->thread.join();
    }
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      lanes_joined_ = true;
    }
    if (blocks_) {
      std::size_t lost = 0;
      for (auto& lane : lanes_) {
        for (const BlockMeta& b : lane->blocks) lost += b.lost;
      }
      if (mbox_ != nullptr) {
        // relaxed: the lanes have been joined.
        if (mbox_state_.load(std::memory_order_relaxed) == kMboxLost) ++lost;
        // The server returns at the next use's EXIT (after the timed-out task, if it ever
        // ends).
        mailbox_write_exit(mbox_, mbox_use_.load(std::memory_order_relaxed) + 1);
      }
      if (lost == 0) {
        blocks_->join();
      } else {
        // A task that never ends cannot be stopped: its block (GPU) or thread (host) keeps the
        // slot memory in use, so the runtime is abandoned, not destroyed (documented).
        std::fprintf(stderr,
                     "weft::gpu::Pool: %zu task(s) passed the watchdog deadline and never "
                     "ended; their blocks are abandoned (the pool's slot memory is leaked)\n",
                     lost);
        blocks_->abandon();
        (void)blocks_.release();
      }
    }
    wake_all_outputs();
  }

  [[nodiscard]] PoolStats stats() const {
    PoolStats s;
    s.pushed = input_.accepted();
    // relaxed: statistics.
    for (const auto& lane : lanes_) {
      s.completed += lane->completed.load(std::memory_order_relaxed);
      s.failed += lane->failed.load(std::memory_order_relaxed);
    }
    s.completed += mbox_completed_.load(std::memory_order_relaxed);
    s.failed += mbox_failed_.load(std::memory_order_relaxed);
    s.mailbox_tasks = mbox_tasks_.load(std::memory_order_relaxed);
    s.mailbox_taken = mbox_taken_.load(std::memory_order_relaxed);
    s.timed_out = timed_out_.load(std::memory_order_relaxed);
    s.scheduler_sleeps = scheduler_sleeps_.load(std::memory_order_relaxed);
    s.slots_lost = slots_lost_.load(std::memory_order_relaxed);
    for (const auto& lane : lanes_) {
      s.direct_loads += lane->direct_loads.load(std::memory_order_relaxed);  // relaxed: statistic
    }
    if (blocks_) s.host_polls = blocks_->host_polls();
    return s;
  }

  [[nodiscard]] std::string describe() const { return blocks_ ? blocks_->describe() : ""; }
  [[nodiscard]] std::size_t num_blocks() const { return blocks_ ? blocks_->num_blocks() : 0; }
  [[nodiscard]] std::size_t ring_depth() const { return depth_; }
  [[nodiscard]] std::size_t num_slots() const { return num_blocks() * depth_; }
  [[nodiscard]] std::size_t num_lanes() const { return lanes_.size(); }

 private:
  static constexpr std::uint32_t kNil = ~std::uint32_t{0};
  static constexpr std::uint32_t kExpressNone = 0, kExpressOffered = 1, kExpressClaimed = 2,
                                 kExpressFilled = 3;
  static constexpr std::size_t kShortBatch = 8;  // pushed entry by entry under the lock
  // An input shard holding fewer tasks than this is served by its home lane alone (take_batch).
  static constexpr std::size_t kHomeOnlyBelow = 64;
  // The most records a lane's staging vector is given room for at once (48 KB with 16-byte
  // payloads: below glibc's mmap threshold, so the reservation is not a fresh mapping).
  static constexpr std::size_t kStagedReserveMax = 1024;
  // A quiet lane asks the blocks whether they are alive this often (a dead kernel's tasks are
  // then delivered as device_failed within about this long).
  static constexpr std::chrono::milliseconds kHealthCheckPeriod{1};

  // A queued task: a record's fields but its status, and where it goes. Trivially copyable
  // (batches move as memcpy; a callback lives in the callback table and the entry holds its
  // id, 0: none), and smaller than a record: 40 bytes with 16-byte payloads. It was 80 (a
  // whole record, a priority and a sequence number), and the pusher's copy of a batch is most
  // of what a batched push costs.
  struct Entry {
    std::uint32_t type;
    std::uint32_t payload_size;
    std::uint64_t tag;
    std::uint32_t out;
    std::uint32_t callback;
    // Not 16-byte aligned: 40 bytes per entry with 16-byte payloads instead of 48 (copies
    // need no alignment, and the copy of a batch is all of the pusher's time in push_batch:
    // bench/results/h200/probes/lane_profile-fc6e9c3.txt; the smaller entry's own gain was not
    // measurable on a noisy instance, bench/results/h100/probes/entry_ab-d3a6b84.txt).
    unsigned char payload[Capacity];  // payload_size bytes are meaningful

    static Entry of(const Record& r, std::size_t out, std::uint32_t callback) {
      Entry e;
      e.type = r.type;
      e.payload_size = r.payload_size;
      e.tag = r.tag;
      e.out = static_cast<std::uint32_t>(out);
      e.callback = callback;
      copy_payload<Capacity>(e.payload, r.payload, r.payload_size);  // checked <= Capacity by push
      return e;
    }
  };
  static_assert(Capacity != 16 || sizeof(Entry) == 40, "an entry grew: see the comment above");
  // The priority queue's element.
  struct Ranked {
    Entry entry;
    int priority;
    std::uint64_t seq;
  };
  struct RankedLess {  // max-heap: higher priority first, then lower sequence (FIFO)
    bool operator()(const Ranked& a, const Ranked& b) const {
      return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
    }
  };
  // What the lane remembers of the task in a slot (the payload lives in the slot itself).
  struct SlotMeta {
    std::uint64_t tag = 0;
    std::uint32_t out = 0;
    std::uint32_t type = 0;
    std::uint32_t size = 0;
    std::uint32_t callback = 0;
    bool lost = false;  // delivered as timed_out; the block still runs it
    Clock::time_point loaded{};

    static SlotMeta of(std::uint64_t tag, std::uint32_t out, std::uint32_t type, std::uint32_t size,
                       std::uint32_t callback, Clock::time_point loaded) {
      return SlotMeta{tag, out, type, size, callback, false, loaded};
    }
    static SlotMeta of(const Entry& e, Clock::time_point loaded) {
      return of(e.tag, e.out, e.type, e.payload_size, e.callback, loaded);
    }
  };
  // A block's ring as its lane sees it. Slots are loaded and collected in ring order, so two
  // counts and two ring indexes say everything: load_slot is the next to load, collect_slot
  // the next to collect, loaded - collected are in flight.
  struct BlockMeta {
    // The counts wrap after 2^32 tasks; only their difference is used. The slots are not the
    // counts modulo the depth: a depth that does not divide 2^32 would lose its place at the
    // wrap.
    std::uint32_t loaded = 0;
    std::uint32_t collected = 0;
    std::uint32_t load_slot = 0;
    std::uint32_t collect_slot = 0;
    std::uint32_t lost = 0;      // slots of the ring whose task the watchdog gave up on
    std::uint32_t level = kNil;  // the free-slot list it is in (= in flight), kNil: none
    std::uint32_t prev = kNil, next = kNil;
    std::uint32_t active_at = kNil;  // index in Lane::active, kNil: nothing in flight
    Clock::time_point idle_since{};  // when its ring last became empty (or the epoch)
    [[nodiscard]] std::uint32_t in_flight() const { return loaded - collected; }
  };
  using Output = ShardedOutput<Record>;
  struct Lane {
    std::size_t index = 0;          // which lane (its shard of every output queue)
    std::size_t cursor = 0;         // the input shard its next sweep starts at
    std::size_t first = 0;          // global index of its first block
    std::vector<BlockMeta> blocks;  // lane-local block index
    std::vector<SlotMeta> meta;     // block * depth + j
    // Loadable blocks (no lost slot, ring not full) by how many tasks they have in flight:
    // heads[d] starts the list of level d. A task goes to the lowest level: spread over idle
    // blocks first, and only then queued behind another task in a ring.
    std::vector<std::uint32_t> heads;
    std::vector<std::uint32_t> level_size;    // blocks in each list
    std::size_t listed = 0;                   // blocks in all lists
    std::size_t free_capacity = 0;            // free slots of the listed blocks
    std::vector<std::uint32_t> active;        // blocks with tasks in flight
    std::size_t unresolved = 0;               // tasks in flight not yet delivered
    std::vector<std::vector<Record>> staged;  // per output queue, delivered in one lock each
    std::vector<std::pair<std::uint32_t, Record>> callbacks;  // (callback id, record)
    std::uint64_t staged_failed = 0;  // staged or callback records whose status is not ok
    std::vector<Entry> batch;         // taken from the input queue, not yet loaded
    std::vector<std::pair<std::uint32_t, std::uint32_t>> targets;  // (block, slot) per entry
    std::vector<std::uint32_t> finishing;  // collect: active blocks whose next slot ended
    bool ring = false;                     // a block loaded this round may be in deep idle
    std::thread thread;
    // level_size[0] as the other lanes see it (written by this lane once per round when it
    // changed; on a line of its own, since the others read it when they take input).
    alignas(64) std::atomic<std::size_t> idle_blocks{0};
    // The lane sleeps (on in_cv_, or between polls of long tasks): the other lanes take even
    // a lone task from the shards it is home to (see take_batch).
    std::atomic<bool> napping{false};
    // The direct load (see push_direct): the standby block's next slot, offered by the lane
    // to a pushing thread. `express` moves NONE -> OFFERED (the lane) -> CLAIMED -> FILLED (a
    // pusher) -> NONE (the lane adopts the task), or OFFERED -> NONE (the lane takes the
    // offer back). The fields after it are written by whoever moves it last: express_slot by
    // the lane before OFFERED, the task's by the pusher before FILLED. One line: the pusher
    // touches nothing else of the lane.
    alignas(64) std::atomic<std::uint32_t> express{kExpressNone};
    std::uint32_t express_slot = 0;
    SlotMeta express_meta;  // the filled task's record; `loaded` set when adopted
    std::atomic<std::uint64_t> direct_loads{0};  // PoolStats::direct_loads, this lane's share
    // This lane's share of the pool's counts of delivered tasks (PoolCore::pending) and of
    // PoolStats::completed / failed. Written by the lane once per round that delivers, read
    // only by synchronize() and stats(): a line of its own. They were pool-wide counters that
    // every lane added to every round, on a line that consumers and pushers read (no speed
    // difference measurable on the H100 machine's noisy instances:
    // bench/results/h100/probes/false_sharing_single_ab-e444ee3.txt).
    alignas(64) std::atomic<std::uint64_t> delivered{0};
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};
#if defined(WEFT_POOL_PROFILE)
    // scripts/probes/lane_profile.cu: TSC cycles per phase (collect, flush, take, load, ring,
    // idle) and counts (rounds, tasks ended, blocks scanned, tasks loaded).
    std::uint64_t cycles[6] = {}, last = 0, rounds = 0, ended = 0, scanned = 0, loaded = 0;
    // Inside the phases: collect's prefetch pass, its staging of records, its IDLE stores and
    // relinks; load's first pass (bookkeeping, prefetch) and second (writing slots); and the
    // work done once per round: flush's statistics, its deliveries, its
    // finish_pending; the round's adopt_express, its look at the input (queued_count and
    // revoke_express), and take_batch's visit of the input shards.
    std::uint64_t sub[11] = {};
    void mark(int phase) {
      const std::uint64_t t = __rdtsc();
      cycles[phase] += t - last;
      last = t;
    }
#else
    void mark(int) {}
#endif
  };
// WEFT_POOL_PROFILE_COARSE leaves out the timers inside the phases (some run per task and
// cost ~30 cycles each), for a truer split between the phases themselves.
#if defined(WEFT_POOL_PROFILE) && !defined(WEFT_POOL_PROFILE_COARSE)
#define WEFT_POOL_SUB_BEGIN(name) const std::uint64_t name = __rdtsc()
#define WEFT_POOL_SUB_END(lane, k, name) (lane).sub[k] += __rdtsc() - (name)
#else
#define WEFT_POOL_SUB_BEGIN(name) \
  do {                            \
  } while (0)
#define WEFT_POOL_SUB_END(lane, k, name) \
  do {                                   \
  } while (0)
#endif

  void check_out(std::size_t out, const char* who) const {
    if (out >= outputs_.size()) {
      throw InvalidArgument(std::string("weft::gpu::Pool::") + who + ": output queue " +
                            std::to_string(out) + " does not exist (the pool has " +
                            std::to_string(outputs_.size()) + ")");
    }
  }
  static void check_record(const Record& r) {
    if (r.payload_size > Capacity) {
      throw InvalidArgument("weft::gpu::Pool::push: payload_size " +
                            std::to_string(r.payload_size) + " exceeds the capacity " +
                            std::to_string(Capacity));
    }
  }

  // ---- callbacks (futures and push_then; rare, so one mutex) ----
  std::uint32_t add_callback(Callback cb) {
    std::lock_guard<std::mutex> lock(callbacks_mutex_);
    std::uint32_t id;
    if (!free_callbacks_.empty()) {
      id = free_callbacks_.back();
      free_callbacks_.pop_back();
      callbacks_[id] = std::move(cb);
    } else {
      id = static_cast<std::uint32_t>(callbacks_.size());
      callbacks_.push_back(std::move(cb));
    }
    return id + 1;
  }
  Callback take_callback(std::uint32_t handle) {
    std::lock_guard<std::mutex> lock(callbacks_mutex_);
    Callback cb = std::move(callbacks_[handle - 1]);
    callbacks_[handle - 1] = nullptr;
    free_callbacks_.push_back(handle - 1);
    return cb;
  }

  // ---- consumers ----
  // No task will ever reach q: no more tasks (or the blocks failed) and none unfinished.
  bool hopeless(const Output& q) const {
    // acquire: pairs with wake_all_outputs' release store (failure_ and the close are visible
    // after it, so the accepted counts are final).
    return no_more_or_failed_.load(std::memory_order_acquire) && q.unfinished() == 0;
  }
  [[noreturn]] void throw_hopeless(std::size_t out, const char* who) const {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      why = failure_;
    }
    throw ShutDown(std::string("weft::gpu::Pool::") + who + ": output queue " +
                   std::to_string(out) +
                   " will never receive a task (no more tasks, none unfinished" +
                   (why.empty() ? std::string(")") : "; " + why + ")"));
  }
  // Runs take() (which returns how many records it took) until it takes some, or throws
  // ShutDown when nothing can ever come. A consumer spins up to consumer_spin first: a futex
  // wake-up costs more than most tasks take. After a sleep it does not spin again (going
  // back to spinning after losing a record to another consumer made an oversubscribed 2-core
  // machine 3-4x slower, starving the threads that make the records).
  template <class Take>
  std::size_t take_waiting(Output& q, std::size_t out, const char* who, Take take) {
    if (const std::size_t n = take()) return after_take(q), n;
    spin_for_output(q, out, Clock::now() + config_.consumer_spin);
    for (;;) {
      if (const std::size_t n = take()) return after_take(q), n;
      if (hopeless(q)) throw_hopeless(out, who);
      // Registered as a waiter, wake the mailbox's lane if the mailbox holds a task of q: it
      // delivers that task to q while this thread sleeps.
      q.wait([&] { return q.any_available() || hopeless(q); }, [&] { wake_mailbox_lane(out); });
    }
  }
  void spin_for_output(const Output& q, std::size_t out, Clock::time_point until) {
    if (config_.consumer_spin.count() <= 0) return;
    for (std::uint32_t i = 1;; ++i) {
      if (q.any_available() || mailbox_ready_for(out)) return;
      // acquire: pairs with wake_all_outputs' release store.
      if (no_more_or_failed_.load(std::memory_order_acquire)) return;
      weft::cpu::detail::cpu_relax();
      if ((i & 63) == 0) {
        if (Clock::now() >= until) return;
        // On a machine with more runnable threads than cores, a spinning consumer would keep
        // the thread that makes its record (a lane, a host block) off the CPU.
        if ((i & 1023) == 0) std::this_thread::yield();
      }
    }
  }
  // Records left q. When that was the last one anybody can ever get, the consumers sleeping
  // on q learn it now instead of waiting forever.
  void after_take(Output& q) {
    // acquire: pairs with wake_all_outputs' release store.
    if (no_more_or_failed_.load(std::memory_order_acquire) && q.has_waiters() &&
        q.unfinished() == 0) {
      q.wake_all();
    }
  }
  void wake_all_outputs() {
    // release: pairs with the acquire loads in hopeless/spin_for_output/after_take.
    no_more_or_failed_.store(true, std::memory_order_release);
    for (auto& q : outputs_) q->wake_all();  // under each queue's wait lock: none misses it
  }

  // ---- input ----
  // Refuses every later push; returns once every push that was accepted is in a queue.
  void close() {
    // relaxed: the locks taken below publish it (see push).
    closed_.store(true, std::memory_order_relaxed);
    input_.for_each_locked([](auto&) {});
    { std::lock_guard<std::mutex> lock(in_mutex_); }
  }
  // Under the lock of input shard `shard` (or in_mutex_): counts tasks before they can be
  // taken, so that delivered never passes accepted.
  void count_accepted(std::size_t shard, std::size_t out, std::size_t count, std::uint32_t cb) {
    // relaxed: the lock orders it before the tasks are taken; see pending().
    input_.shard(shard).accepted.fetch_add(count, std::memory_order_relaxed);
    if (cb == 0) outputs_[out]->accepted(shard, count);
  }
  // Tasks accepted and not yet delivered: sums of per-lane and per-shard counters, each read
  // once, delivered ones first. Every counter only grows and every task is counted accepted
  // before it can be delivered, so the difference is never negative, and zero only if, when
  // the first accepted count was read, every task accepted by then had been delivered.
  [[nodiscard]] std::uint64_t pending() const {
    std::uint64_t delivered = 0;
    // seq_cst: pairs with finish_pending (see synchronize).
    for (const auto& lane : lanes_) delivered += lane->delivered.load(std::memory_order_seq_cst);
    delivered += mbox_delivered_.load(std::memory_order_seq_cst);  // seq_cst: as the lanes'
    return input_.accepted() - delivered;
  }
  [[nodiscard]] std::size_t queued_count() const {
    // seq_cst: see push and sleep_until_work.
    return order_ == QueueOrder::fifo ? input_.size() : heap_size_.load(std::memory_order_seq_cst);
  }
  bool others_mostly_idle(const Lane& lane) const {
    for (const auto& other : lanes_) {
      if (other.get() == &lane) continue;
      // relaxed: a hint for how much to take (see Lane::idle_blocks). blocks.size() is fixed.
      const std::size_t idle = other->idle_blocks.load(std::memory_order_relaxed);
      if (idle > 0 && 2 * idle >= other->blocks.size()) return true;
    }
    return false;
  }
  // A lane with no idle block wakes a sleeping lane for tasks queued in the shards it is home
  // to: other lanes leave those to it only while it has idle blocks (take_batch), and a push
  // that read a stale count of them woke nobody (push).
  void wake_for_own_shards(const Lane& lane) {
    if (order_ != QueueOrder::fifo || lane.level_size[0] != 0) return;
    // relaxed: a hint. A sleeper missed here is woken in a later round (this lane stays
    // awake while it has tasks in flight); a lane about to sleep counts itself, then looks
    // at the shards, and takes these (this lane has no idle block) instead of sleeping.
    if (sleeping_lanes_.load(std::memory_order_relaxed) == 0) return;
    for (std::size_t s = lane.index; s < kInputShards; s += lanes_.size()) {
      // relaxed: a hint (see ShardedFifo::Shard::size).
      if (input_.shard(s).size.load(std::memory_order_relaxed) != 0) {
        { std::lock_guard<std::mutex> lock(in_mutex_); }  // a sleeper is in its wait
        in_cv_.notify_one();
        return;
      }
    }
  }
  // Whether input shard `shard`, holding `size` tasks, is its home lane's alone: fewer than
  // kHomeOnlyBelow tasks, and the home lane awake (not napping) with an idle block for each.
  // seq_cst (napping): for push, pairs with sleep_until_work as the size store does with
  // sleeping_lanes_ (the lane sets napping, then looks at the shards; the push stored the
  // size, then looks at napping), so a task is never left to a sleeper; for the lanes a hint
  // (a seq_cst load costs a relaxed one's on x86). relaxed (idle_blocks): a hint; when it was
  // stale, the home lane wakes a sleeper itself (wake_for_own_shards). At worst a task waits
  // for its home lane's next round (or 20 us nap).
  bool home_takes(std::size_t shard, std::size_t size) const {
    const Lane& home = *lanes_[shard % lanes_.size()];
    return size < kHomeOnlyBelow && !home.napping.load(std::memory_order_seq_cst) &&
           home.idle_blocks.load(std::memory_order_relaxed) >= size;
  }
  // Whether `lane` leaves input shard `shard` to the shard's home lane (take_batch).
  bool left_to_home(const Lane& lane, std::size_t shard, std::size_t size) const {
    return lanes_[shard % lanes_.size()].get() != &lane && home_takes(shard, size);
  }
  // Whether anything queued is for `lane` to take: a task in a shard it does not leave to the
  // shard's home lane. seq_cst (sizes): the look sleep_until_work pairs with push's.
  [[nodiscard]] bool input_for(const Lane& lane) const {
    if (order_ != QueueOrder::fifo) return heap_size_.load(std::memory_order_seq_cst) > 0;
    for (std::size_t s = 0; s < input_.shards(); ++s) {
      const std::size_t size = input_.shard(s).size.load(std::memory_order_seq_cst);
      if (size != 0 && !left_to_home(lane, s, size)) return true;
    }
    return false;
  }
  // Tells the other lanes how many of this lane's blocks are idle.
  static void publish_idle_blocks(Lane& lane) {
    const std::size_t idle = lane.level_size[0];
    // relaxed: a hint (see Lane::idle_blocks); written only when it changes.
    if (lane.idle_blocks.load(std::memory_order_relaxed) != idle) {
      lane.idle_blocks.store(idle, std::memory_order_relaxed);
    }
  }
  // Moves up to `max` queued entries into lane.batch. Returns whether the pool is stopping.
  // `to_load`: the entries go into slots (not to cancellation), so they are spread.
  bool take_batch(Lane& lane, std::size_t max, bool to_load = false) {
    // While another lane has most of its blocks idle (it may be asleep, and the push that
    // queued these tasks woke it, or busy elsewhere for a moment), queue nothing behind a
    // busy block: this lane fills its own idle blocks and leaves the rest to the others, so
    // a batch spreads over the blocks of every lane. (Any idle block at all would be too
    // strict: under steady load some lane always has a few, and rings would never fill.)
    if (to_load && others_mostly_idle(lane)) {
      max = std::min<std::size_t>(max, lane.level_size[0]);
    }
    if (order_ == QueueOrder::fifo) {
      // A shard holding fewer than kHomeOnlyBelow tasks is left to its home lane while that
      // lane is awake and has an idle block for each (so that none waits behind a busy block
      // while other lanes' blocks idle); a backlog is for everyone. Every lane reaching for
      // one task made them fight over the shard's lock and its lines, which cost a single
      // push on an idle pool ~1 us more with 4 lanes than with 1
      // (bench/results/h100/probes/latency_trace-f7ee4c1.txt); and threads pushing one task
      // at a time had each push's lines taken by whichever lane came by, more of them the
      // more lanes.
      WEFT_POOL_SUB_BEGIN(t_take);
      (void)input_.take(lane.batch, max, lane.cursor, /*skip_busy=*/to_load,
                        [&](std::size_t shard, std::size_t size) {
                          return to_load && left_to_home(lane, shard, size);
                        });
      WEFT_POOL_SUB_END(lane, 10, t_take);
    } else {
      std::lock_guard<std::mutex> lock(in_mutex_);
      while (lane.batch.size() < max && !heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), RankedLess{});
        lane.batch.push_back(heap_.back().entry);
        heap_.pop_back();
      }
      heap_size_.store(heap_.size(), std::memory_order_relaxed);  // relaxed: under in_mutex_
    }
    // acquire: pairs with shutdown's release store (the close before it is visible).
    return stop_flag_.load(std::memory_order_acquire);
  }

  // ---- the lane's blocks: free-slot lists and the active set ----
  void unlink(Lane& lane, std::uint32_t b) {
    BlockMeta& m = lane.blocks[b];
    if (m.level == kNil) return;
    if (m.prev != kNil) {
      lane.blocks[m.prev].next = m.next;
    } else {
      lane.heads[m.level] = m.next;
    }
    if (m.next != kNil) lane.blocks[m.next].prev = m.prev;
    lane.free_capacity -= depth_ - m.level;
    --lane.level_size[m.level];
    --lane.listed;
    m.level = m.prev = m.next = kNil;
  }
  // Puts b at the front of the list of its level, if it can take a task.
  void link(Lane& lane, std::uint32_t b) {
    BlockMeta& m = lane.blocks[b];
    const std::uint32_t level = m.in_flight();
    if (m.lost != 0 || level >= depth_) return;
    m.level = level;
    m.prev = kNil;
    m.next = lane.heads[level];
    if (m.next != kNil) lane.blocks[m.next].prev = b;
    lane.heads[level] = b;
    lane.free_capacity += depth_ - level;
    ++lane.level_size[level];
    ++lane.listed;
  }
  void relink(Lane& lane, std::uint32_t b) {
    unlink(lane, b);
    link(lane, b);
  }
  std::uint32_t pick_block(const Lane& lane) const {
    // The standby block (lane-local 0) polls its ring all the time: a task there starts first.
    if (config_.standby && lane.blocks[0].level == 0) return 0;
    for (std::uint32_t d = 0; d < depth_; ++d) {
      if (lane.heads[d] != kNil) return lane.heads[d];
    }
    return kNil;  // unreachable while free_capacity > 0
  }
  void activate(Lane& lane, std::uint32_t b) {
    BlockMeta& m = lane.blocks[b];
    if (m.active_at != kNil) return;
    m.active_at = static_cast<std::uint32_t>(lane.active.size());
    lane.active.push_back(b);
  }
  void deactivate(Lane& lane, std::uint32_t b) {
    BlockMeta& m = lane.blocks[b];
    const std::uint32_t at = m.active_at;
    const std::uint32_t last = lane.active.back();
    lane.active[at] = last;
    lane.blocks[last].active_at = at;
    lane.active.pop_back();
    m.active_at = kNil;
  }

  // ---- slots ----
  std::atomic_ref<std::uint32_t> state_of(const Lane& lane, std::uint32_t b, std::uint32_t j) {
    return std::atomic_ref<std::uint32_t>(layout_.states(lane.first + b)[j]);
  }
  unsigned char* slot_of(const Lane& lane, std::uint32_t b, std::uint32_t j) {
    return layout_.slot(lane.first + b, j);
  }

  // Asks for the cache lines of slot j of block b (header and `bytes` of payload). The lanes'
  // slot reads and writes are cache misses (the GPU wrote the lines over PCIe, which
  // invalidated the host's copies); asked for together, the misses overlap instead of each
  // stalling the lane in turn (which was most of a lane's cost per task).
  void prefetch_slot(const Lane& lane, std::uint32_t b, std::uint32_t j, std::size_t bytes,
                     bool for_write) const {
    const unsigned char* p = layout_.slot(lane.first + b, j);
    const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
    const auto end = reinterpret_cast<std::uintptr_t>(p) + kSlotHeaderBytes + bytes;
    for (std::uintptr_t a = first; a < end; a += 64) {
      if (for_write) {
        __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
      } else {
        __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
      }
    }
  }

  // Loads lane.batch into slots in two passes: the first picks every task's slot (bookkeeping
  // only) and asks for the slots' lines, the second writes them and publishes READY.
  // With `whole_rings` (a backlog: every free slot gets a task anyway) each block picked gets
  // as many of the batch as its ring has room for, in consecutive slots: the lane's writes go
  // to adjacent lines and one control line, and the block finds them in one run.
  void load_batch(Lane& lane, Clock::time_point now, bool whole_rings) {
    lane.targets.clear();
    WEFT_POOL_SUB_BEGIN(t_pass1);
    const std::size_t n = lane.batch.size();
    for (std::size_t i = 0; i < n;) {
      const std::uint32_t b = pick_block(lane);
      do {
        const std::uint32_t j = reserve_slot(lane, b, now);
        prefetch_slot(lane, b, j, lane.batch[i].payload_size, true);
        lane.targets.emplace_back(b, j);
        ++i;
        // level kNil: the ring is full (or holds a lost task), no longer listed.
      } while (whole_rings && i < n && lane.blocks[b].level != kNil);
    }
    WEFT_POOL_SUB_END(lane, 3, t_pass1);
    WEFT_POOL_SUB_BEGIN(t_pass2);
    for (std::size_t i = 0; i < lane.batch.size(); ++i) {
      write_slot(lane, lane.targets[i].first, lane.targets[i].second, lane.batch[i], now);
    }
    WEFT_POOL_SUB_END(lane, 4, t_pass2);
  }

  // The ring slot after slot j.
  [[nodiscard]] std::uint32_t next_slot(std::uint32_t j) const noexcept {
    return j + 1 == depth_ ? 0 : j + 1;
  }
  // Takes block b's next slot for a task: the lane's bookkeeping, before the slot is written.
  std::uint32_t reserve_slot(Lane& lane, std::uint32_t b, Clock::time_point now) {
    BlockMeta& bm = lane.blocks[b];
    const std::uint32_t j = bm.load_slot;
    // The standby block never sleeps in deep idle: no doorbell for it (a ring would wake every
    // deep-idle block of its GPU for nothing).
    const bool standby = config_.standby && b == 0;
    if (!standby && bm.in_flight() == 0 && now - bm.idle_since >= config_.ring_after) {
      lane.ring = true;
    }
    ++bm.loaded;
    bm.load_slot = next_slot(bm.load_slot);
    ++lane.unresolved;
    relink(lane, b);
    activate(lane, b);
    return j;
  }

  // Writes a reserved slot and publishes it (READY).
  void write_slot(Lane& lane, std::uint32_t b, std::uint32_t j, const Entry& e,
                  Clock::time_point now) {
    lane.meta[b * depth_ + j] = SlotMeta::of(e, now);
    publish_slot(lane, b, j, e.type, e.payload_size, e.payload);
  }
  // The slot's memory: header and payload, then READY. Touches nothing else of the lane (a
  // pushing thread calls it for a direct load).
  void publish_slot(const Lane& lane, std::uint32_t b, std::uint32_t j, std::uint32_t type,
                    std::uint32_t size, const unsigned char* payload) {
    unsigned char* slot = slot_of(lane, b, j);
    auto* h = reinterpret_cast<SlotHeader*>(slot);
    h->type = type;
    h->payload_size = size;
    h->status = 0;
    copy_payload<Capacity>(slot + kSlotHeaderBytes, payload, size);
    // release: type, size and payload are visible to the block's acquire load of READY.
    state_of(lane, b, j)
        .store(static_cast<std::uint32_t>(SlotState::ready), std::memory_order_release);
#if defined(WEFT_POOL_TRACE)
    g_trace_loaded.store(trace_now());
#endif
  }

  // ---- the direct load: a single push into an idle standby slot (see push) ----
  // Under the pusher's shard lock: claims the standby slot offered by the shard's home lane
  // (the lane that takes lone tasks from it, see take_batch), counts the task accepted,
  // writes the slot, publishes READY and hands the task to the lane. Returns that lane, or nullptr
  // when it offers none. A task on an idle pool so skips two hand-offs between threads (pusher
  // -> queue -> lane), each a few cache-line transfers. Only the home lane is asked: one line
  // read per single push, where asking every lane would read one per lane. (Measured no
  // better or worse: the bench's single-push figures spread 80-210 ns either way, and with 6
  // or 8 lanes they were 270-400 ns before direct loads existed; bench/results/h100/probes/.)
  Lane* push_direct(std::size_t home, const Record& r, std::size_t out, std::uint32_t cb) {
    if (!config_.standby) return nullptr;
    Lane& lane = *lanes_[home % lanes_.size()];
    std::uint32_t offered = kExpressOffered;
    // acquire: pairs with offer_express's release store (the slot index, and the lane's reads
    // of the slot's last results, happen before this thread writes the slot).
    if (lane.express.load(std::memory_order_relaxed) != kExpressOffered ||
        !lane.express.compare_exchange_strong(offered, kExpressClaimed, std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
      return nullptr;
    }
    count_accepted(home, out, 1, cb);
    const std::uint32_t j = lane.express_slot;
#if defined(WEFT_POOL_TRACE)
    g_trace_taken.store(trace_now());
#endif
    publish_slot(lane, 0, j, r.type, r.payload_size, r.payload);  // READY, release
    lane.express_meta =
        SlotMeta::of(r.tag, static_cast<std::uint32_t>(out), r.type, r.payload_size, cb, {});
    // relaxed: a statistic, on the line this thread holds anyway.
    lane.direct_loads.fetch_add(1, std::memory_order_relaxed);
    // seq_cst: a release for the fields above (adopt_express acquires), and pairs with
    // sleep_until_work (the lane counts itself asleep, then looks at this; push then looks at
    // the count of sleepers).
    lane.express.store(kExpressFilled, std::memory_order_seq_cst);
    return &lane;
  }
  // Offers the standby block's next slot to pushing threads, when it is idle and nothing is
  // queued. The block leaves the free lists meanwhile: the lane never loads it while offered.
  void offer_express(Lane& lane) {
    if (!config_.standby) return;
    const BlockMeta& b0 = lane.blocks[0];
    // relaxed: only this lane moves it from NONE.
    if (b0.in_flight() != 0 || b0.lost != 0 || b0.level == kNil ||
        lane.express.load(std::memory_order_relaxed) != kExpressNone || queued_count() != 0) {
      return;
    }
    unlink(lane, 0);
    lane.express_slot = b0.load_slot;
    // release: pairs with the pusher's acquire CAS; the slot's index, and this lane's reads of
    // the slot's last results (collect), happen before the pusher writes the slot.
    lane.express.store(kExpressOffered, std::memory_order_release);
  }
  // Takes the offer back before the lane loads queued tasks (the standby block is the first
  // it would load). A slot claimed meanwhile is adopted when filled.
  void revoke_express(Lane& lane) {
    std::uint32_t offered = kExpressOffered;
    // relaxed: on success nothing was published by anyone; on failure adopt_express acquires.
    if (lane.express.load(std::memory_order_relaxed) == kExpressOffered &&
        lane.express.compare_exchange_strong(offered, kExpressNone, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
      link(lane, 0);
    }
  }
  // Takes a filled slot into the lane's bookkeeping, as if the lane had loaded it. Returns
  // whether there was one.
  bool adopt_express(Lane& lane, Clock::time_point now) {
    // acquire: pairs with the pusher's store of FILLED (the task's fields are visible).
    if (lane.express.load(std::memory_order_acquire) != kExpressFilled) return false;
    const std::uint32_t j = reserve_slot(lane, 0, now);  // = express_slot: nothing moved since
    SlotMeta& m = lane.meta[j];                          // block 0: meta[0 * depth_ + j]
    m = lane.express_meta;
    m.loaded = now;  // the watchdog counts from here, at most a round after the push
    // relaxed: the lane's own state from here on; the next OFFERED releases.
    lane.express.store(kExpressNone, std::memory_order_relaxed);
    return true;
  }
  // At shutdown or failure, after close() returned (so no pusher is between CLAIMED and
  // FILLED: it fills under its shard's lock, which close() takes): adopt or take back.
  void settle_express(Lane& lane, Clock::time_point now) {
    for (;;) {
      if (adopt_express(lane, now)) return;
      revoke_express(lane);
      // relaxed: only this lane moves it to NONE; CLAIMED lasts while a pusher fills it.
      if (lane.express.load(std::memory_order_relaxed) == kExpressNone) return;
      std::this_thread::yield();
    }
  }

  // ---- the lone-task mailbox (detail/mailbox.hpp; docs/gpu.md "The mailbox") ----
  // One task at a time, in a record of its own that a block serving no ring polls. Its state
  // word moves FREE -> FILLING (a pusher, acquire CAS) -> IN_FLIGHT (the pusher, seq_cst, once
  // the request and mbox_meta_ are written) -> COLLECTING (a consumer of its queue or the
  // mailbox's lane, lanes_[0], acquire CAS) -> FREE (the collector, release, once it has read
  // the result). The lane also moves IN_FLIGHT -> COLLECTING -> LOST when the task passes the
  // watchdog's deadline (LOST -> FREE when its result comes back after all), and FREE or LOST
  // -> CLOSED at shutdown or failure (FILLING cannot be seen then: pushers fill under their
  // input shard's lock, which close() takes). Whoever wins the CAS delivers the task: exactly
  // once.

  // Under input shard `home`'s lock: puts a lone task into the mailbox if it is free.
  bool mailbox_push(std::size_t home, const Record& r, std::size_t out) {
    if (mbox_ == nullptr || r.payload_size > kMailboxPayloadMax) return false;
    // Only a lone task: one from a thread that pushed nothing in the last kLoneGapTicks (a thread
    // waiting for each task's result pushes every few microseconds at most). Threads that
    // stream single tasks leave it alone: with them taking it whenever it was free, 4 + 4
    // threads pushing and popping single tasks took 117-142 ns per task against 89-110
    // without the mailbox (bench/results/h100/probes/mailbox_probe-019185b.txt).
    thread_local std::uint64_t last_push = 0;
    const std::uint64_t stamp = lone_stamp();
    const bool lone = stamp - last_push >= kLoneGapTicks;
    last_push = stamp;
    if (!lone) return false;
    std::uint32_t expected = kMboxFree;
    // relaxed load: a filter. acquire CAS: pairs with the last collector's release store of
    // FREE (its reads of the result words and of mbox_meta_ happen before this rewrites them).
    if (mbox_state_.load(std::memory_order_relaxed) != kMboxFree ||
        !mbox_state_.compare_exchange_strong(expected, kMboxFilling, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
      return false;
    }
    count_accepted(home, out, 1, 0);
    // relaxed (these three): hints for collectors, who read them again after their acquire
    // CAS; published by the seq_cst store of IN_FLIGHT below.
    const std::uint32_t use = mbox_use_.load(std::memory_order_relaxed) + 1;
    mbox_use_.store(use, std::memory_order_relaxed);
    mbox_out_.store(static_cast<std::uint32_t>(out), std::memory_order_relaxed);
    mbox_size_.store(r.payload_size, std::memory_order_relaxed);
    const Clock::time_point now = Clock::now();  // the watchdog's start
    mbox_loaded_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    mbox_meta_ =
        SlotMeta::of(r.tag, static_cast<std::uint32_t>(out), r.type, r.payload_size, 0, now);
    mailbox_write_request(mbox_, use, r.type, r.payload_size, r.payload);
    mbox_tasks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    // seq_cst: a release for the fields above (collectors acquire by CAS), and pairs with
    // sleep_until_work (the mailbox's lane counts itself napping, then looks at this; push
    // then looks at napping).
    mbox_state_.store(kMboxInFlight, std::memory_order_seq_cst);
    return true;
  }
  // The lone-task rule's clock: the TSC where there is one (one instruction, no call), else
  // steady_clock's nanoseconds (44 ns a read on the H100 machine's VM,
  // bench/results/h100/probes/clock-trace-lanes-a1148f1.txt: paid by every single push).
  static std::uint64_t lone_stamp() noexcept {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
#endif
  }
  // Whether the mailbox holds a task for queue `out` whose result is back (a snapshot).
  bool mailbox_ready_for(std::size_t out) const {
    // relaxed (all): a hint; mailbox_take checks again after its CAS.
    return mbox_state_.load(std::memory_order_relaxed) == kMboxInFlight &&
           mbox_out_.load(std::memory_order_relaxed) == out &&
           mailbox_result_ready(mbox_, mbox_use_.load(std::memory_order_relaxed),
                                mbox_size_.load(std::memory_order_relaxed));
  }
  // Takes the mailbox's task if its result is back (and, unless `any`, it is for queue
  // `out`): fills `r` and `m` and frees the mailbox. Returns whether it took it.
  bool mailbox_take(std::size_t out, bool any, Record& r, SlotMeta& m) {
    if (!any && !mailbox_ready_for(out)) return false;
    std::uint32_t expected = kMboxInFlight;
    // acquire: pairs with the pusher's seq_cst store of IN_FLIGHT (mbox_meta_ and the use are
    // visible).
    if (!mbox_state_.compare_exchange_strong(expected, kMboxCollecting, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
      return false;
    }
    m = mbox_meta_;
    // The hints above may have been of an earlier use: check the task this CAS took.
    // relaxed: written before the IN_FLIGHT this CAS acquired.
    if ((!any && m.out != out) ||
        !mailbox_result_ready(mbox_, mbox_use_.load(std::memory_order_relaxed), m.size)) {
      // release: nothing was written; the next collector acquires IN_FLIGHT again.
      mbox_state_.store(kMboxInFlight, std::memory_order_release);
      return false;
    }
    finish_take(m, r);
    return true;
  }
  // The collector holding the mailbox (COLLECTING) with its task's result back: reads the
  // result into `r` and frees the mailbox.
  void finish_take(const SlotMeta& m, Record& r) {
    r.type = m.type;
    r.payload_size = m.size;
    r.tag = m.tag;
    r.status = mailbox_read_result(mbox_, m.size, r.payload);
    // release: pairs with the next pusher's acquire CAS (this thread's reads of the result
    // happen before the next request overwrites it).
    mbox_state_.store(kMboxFree, std::memory_order_release);
  }
  // A consumer of queue `out` collects the mailbox's task itself: no lane, no queue.
  bool mailbox_take_for(std::size_t out, Record& r) {
    SlotMeta m;
    if (mbox_ == nullptr || !mailbox_take(out, false, r, m)) return false;
    // Counted as a lane counts what it delivers (flush, finish_pending).
    // relaxed: statistics.
    mbox_completed_.fetch_add(1, std::memory_order_relaxed);
    if (r.status != TaskStatus::ok) mbox_failed_.fetch_add(1, std::memory_order_relaxed);
    mbox_taken_.fetch_add(1, std::memory_order_relaxed);
    outputs_[out]->took_directly(1);
    // seq_cst: as finish_pending (synchronize() sees the delivery, or this sees the waiter).
    mbox_delivered_.fetch_add(1, std::memory_order_seq_cst);
    wake_sync_waiters();
    return true;
  }
  // A thread about to sleep until the mailbox's task (for queue `out`, or any) is delivered
  // wakes the mailbox's lane if it sleeps (a push into the mailbox wakes it only for threads
  // already asleep). seq_cst: pairs with sleep_until_work (the lane sets napping, then looks
  // at the mailbox's state; mailbox_push stored IN_FLIGHT before this looks at napping).
  void wake_mailbox_lane(std::size_t out) {
    if (mbox_ == nullptr) return;
    const std::uint32_t s = mbox_state_.load(std::memory_order_seq_cst);
    if (s != kMboxInFlight && s != kMboxCollecting) return;
    // relaxed: a hint; a wake-up too many costs a futex call, never a lost task.
    if (out != kAnyQueue && mbox_out_.load(std::memory_order_relaxed) != out) return;
    if (!lanes_[0]->napping.load(std::memory_order_seq_cst)) return;
    { std::lock_guard<std::mutex> lock(in_mutex_); }  // the sleeper is in its wait, or sees us
    in_cv_.notify_all();  // the mailbox's lane must wake, not just any lane
  }
  // try_pop found nothing: if the mailbox has held a task for queue `out` for over
  // kMailboxNudgeAfter, make sure its lane is awake, for the lane is what notices a task past
  // the watchdog's deadline or a dead kernel (a thread that only polls with try_pop never
  // sleeps, so wake_mailbox_lane is not called otherwise).
  void mailbox_nudge(std::size_t out) {
    // relaxed: hints; wake_mailbox_lane looks again.
    if (mbox_ == nullptr || mbox_state_.load(std::memory_order_relaxed) != kMboxInFlight ||
        mbox_out_.load(std::memory_order_relaxed) != out) {
      return;
    }
    const Clock::time_point loaded{Clock::duration(mbox_loaded_.load(std::memory_order_relaxed))};
    if (Clock::now() - loaded > kMailboxNudgeAfter) wake_mailbox_lane(out);
  }
  // Whether `lane` is the mailbox's lane (lanes_[0], where the pool has a mailbox).
  bool serves_mailbox(const Lane& lane) const {
    return mbox_ != nullptr && &lane == lanes_[0].get();
  }
  // Whether `lane` serves the mailbox and it has a task it has not delivered.
  bool mailbox_busy(const Lane& lane) const {
    if (!serves_mailbox(lane)) return false;
    // relaxed: a hint for the lane's idling; the states it acts on are taken by CAS.
    const std::uint32_t s = mbox_state_.load(std::memory_order_relaxed);
    return s == kMboxInFlight || s == kMboxCollecting || s == kMboxLost;
  }
  // The mailbox's lane, each round: delivers a task whose result has waited kMailboxGrace
  // for a consumer (at once when `now_or_never`: stopping), times one out, frees the mailbox
  // when a timed-out task ends after all. Returns how many tasks it staged (0 or 1).
  std::size_t mailbox_round(Lane& lane, Clock::time_point now, bool now_or_never) {
    if (!serves_mailbox(lane)) return 0;
    // acquire: pairs with the releases of FREE/IN_FLIGHT/LOST (LOST is only stored by this
    // lane; the acquire matters for the use read below).
    const std::uint32_t s = mbox_state_.load(std::memory_order_acquire);
    if (s == kMboxLost) {
      // relaxed: the use and size of the lost task, written before it went IN_FLIGHT.
      if (mailbox_result_ready(mbox_, mbox_use_.load(std::memory_order_relaxed),
                               mbox_size_.load(std::memory_order_relaxed))) {
        slots_lost_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: statistic
        // release: as mailbox_take's store of FREE.
        mbox_state_.store(kMboxFree, std::memory_order_release);
      }
      return 0;
    }
    if (s != kMboxInFlight) return 0;
    const std::uint32_t use = mbox_use_.load(std::memory_order_relaxed);  // relaxed: a hint
    Record r;
    SlotMeta m;
    if (mailbox_result_ready(mbox_, use, mbox_size_.load(std::memory_order_relaxed))) {
      // A consumer that waits for it takes it within a poll; give it the chance.
      if (!now_or_never) {
        if (mbox_seen_use_ != use) {
          mbox_seen_use_ = use;
          mbox_seen_ = now;
          return 0;
        }
        if (now - mbox_seen_ < kMailboxGrace) return 0;
      }
      if (!mailbox_take(0, true, r, m)) return 0;  // a consumer took it meanwhile
      stage(lane, m, r.status, r.payload);
      return 1;
    }
    if (config_.task_deadline.count() <= 0) return 0;
    // relaxed: a hint; checked again below after the CAS.
    const Clock::time_point loaded{Clock::duration(mbox_loaded_.load(std::memory_order_relaxed))};
    if (now - loaded <= config_.task_deadline) return 0;
    std::uint32_t expected = kMboxInFlight;
    // acquire: as in mailbox_take.
    if (!mbox_state_.compare_exchange_strong(expected, kMboxCollecting, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
      return 0;
    }
    m = mbox_meta_;
    if (now - m.loaded <= config_.task_deadline) {
      mbox_state_.store(kMboxInFlight, std::memory_order_release);  // release: as mailbox_take
      return 0;
    }
    if (mailbox_result_ready(mbox_, mbox_use_.load(std::memory_order_relaxed), m.size)) {
      finish_take(m, r);  // it ended after all, between the two looks
      stage(lane, m, r.status, r.payload);
      return 1;
    }
    stage(lane, m, TaskStatus::timed_out, nullptr);
    timed_out_.fetch_add(1, std::memory_order_relaxed);   // relaxed: statistic
    slots_lost_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    // release: only this lane moves it on from LOST.
    mbox_state_.store(kMboxLost, std::memory_order_release);
    return 1;
  }
  // Failure (the blocks died): the mailbox's task, if any, is delivered as device_failed and
  // the mailbox closed. After close() (no pusher is filling it). Returns how many it staged.
  std::size_t mailbox_fail(Lane& lane) {
    if (!serves_mailbox(lane)) return 0;
    for (;;) {
      // acquire: as in mailbox_round.
      std::uint32_t s = mbox_state_.load(std::memory_order_acquire);
      if (s == kMboxCollecting) {  // a consumer is reading it; it frees it in a moment
        std::this_thread::yield();
        continue;
      }
      if (s == kMboxInFlight) {
        // acquire: as in mailbox_take.
        if (!mbox_state_.compare_exchange_strong(s, kMboxCollecting, std::memory_order_acquire,
                                                 std::memory_order_relaxed)) {
          continue;
        }
        stage(lane, mbox_meta_, TaskStatus::device_failed, nullptr);
        mbox_state_.store(kMboxClosed, std::memory_order_release);  // release: terminal
        return 1;
      }
      // FREE, LOST (the block that ran it is gone) or CLOSED already.
      if (s == kMboxClosed ||
          mbox_state_.compare_exchange_strong(s, kMboxClosed, std::memory_order_relaxed,
                                              std::memory_order_relaxed)) {
        return 0;
      }
    }
  }

  // A task ended (finished, timed out or failed): stage it for delivery.
  void stage(Lane& lane, const SlotMeta& m, TaskStatus status, const unsigned char* results) {
    Record* r;
    if (m.callback != 0) {
      lane.callbacks.emplace_back(m.callback, Record{});
      r = &lane.callbacks.back().second;
    } else {
      r = &lane.staged[m.out].emplace_back();
    }
    r->type = m.type;
    r->payload_size = m.size;
    r->tag = m.tag;
    r->status = status;
    if (results != nullptr) copy_payload<Capacity>(r->payload, results, m.size);
    lane.staged_failed += status != TaskStatus::ok;  // counted here: flush need not re-read
  }

  // Collects the finished slots of every block with tasks in flight (and, with a watchdog,
  // gives up on tasks past the deadline). Returns how many tasks ended.
  std::size_t collect(Lane& lane, Clock::time_point now) {
    // The control lines a block wrote are cache misses (the GPU's write over PCIe invalidated
    // them): ask for all of them first, so that the misses overlap instead of queueing.
    // Likewise the first slot each block may have finished (header, status and results).
    WEFT_POOL_SUB_BEGIN(t_prefetch);
    for (const std::uint32_t b : lane.active) {
      __builtin_prefetch(layout_.states(lane.first + b), 0, 0);
      const std::uint32_t j = lane.blocks[b].collect_slot;
      prefetch_slot(lane, b, j, lane.meta[b * depth_ + j].size, false);
    }
    WEFT_POOL_SUB_END(lane, 0, t_prefetch);
    // Then find the blocks whose next slot ended, in a loop with nothing else in it: its loads
    // of the control lines (the prefetches above cannot all be in flight at once) overlap
    // with each other. Looked for inside the collecting loop below, whose body is long, they
    // were taken one after another: with one lane and 792 blocks, 477 blocks looked at and
    // 226 tasks collected per round, collecting cost 673 TSC cycles per task
    // (bench/results/h100/probes/lane_profile-09d8c70.txt); found first, batched empty tasks
    // went from 76-86 to 58-61 ns per task with 4 lanes in an A/B on one machine instance
    // (collect_ab-d0c5394.txt; medians 41.6 -> 33.3 on another, collect_ab2-70dd600.txt).
    // With a watchdog every active block is visited, for its deadlines.
    lane.finishing.clear();
    const bool watchdog = config_.task_deadline.count() > 0;
    for (const std::uint32_t b : lane.active) {
      const std::uint32_t j = lane.blocks[b].collect_slot;
      // relaxed: a filter only; collect_block loads the state again with acquire.
      if (watchdog || state_of(lane, b, j).load(std::memory_order_relaxed) ==
                          static_cast<std::uint32_t>(SlotState::finished)) {
        lane.finishing.push_back(b);
      }
    }
    std::size_t ended = 0;
    for (const std::uint32_t b : lane.finishing) {
      ended += collect_block(lane, b, now);
      BlockMeta& bm = lane.blocks[b];
      if (bm.in_flight() == 0) {
        bm.idle_since = now;
        deactivate(lane, b);  // moves the last active block to b's place in lane.active
      }
    }
    return ended;
  }

  std::size_t collect_block(Lane& lane, std::uint32_t b, Clock::time_point now) {
    BlockMeta& bm = lane.blocks[b];
    std::size_t ended = 0;
    bool changed = false;
#if defined(WEFT_PROBE_RING_LEVELS)
    const std::uint32_t before = bm.in_flight();
#endif
    while (bm.collected != bm.loaded) {
      const std::uint32_t j = bm.collect_slot;
      // acquire: pairs with the block's release store of FINISHED; status and results are
      // visible.
      if (state_of(lane, b, j).load(std::memory_order_acquire) !=
          static_cast<std::uint32_t>(SlotState::finished)) {
        break;
      }
      SlotMeta& m = lane.meta[b * depth_ + j];
#if defined(WEFT_POOL_TRACE)
      g_trace_seen.store(trace_now());
#endif
      if (m.lost) {
        // Delivered as timed_out already: the late result is dropped (exactly once).
        --bm.lost;
        slots_lost_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: statistic
      } else {
        WEFT_POOL_SUB_BEGIN(t_stage);
        const unsigned char* slot = slot_of(lane, b, j);
        stage(lane, m, static_cast<TaskStatus>(reinterpret_cast<const SlotHeader*>(slot)->status),
              slot + kSlotHeaderBytes);
        WEFT_POOL_SUB_END(lane, 1, t_stage);
        --lane.unresolved;
        ++ended;
      }
      WEFT_POOL_SUB_BEGIN(t_idle);
      // relaxed: the block does not act on IDLE; the next READY publishes the next task.
      state_of(lane, b, j)
          .store(static_cast<std::uint32_t>(SlotState::idle), std::memory_order_relaxed);
      WEFT_POOL_SUB_END(lane, 2, t_idle);
      ++bm.collected;
      bm.collect_slot = next_slot(j);
      changed = true;
    }
    if (config_.task_deadline.count() > 0) {
      // Loaded in ring order, so the deadlines pass in ring order too.
      for (std::uint32_t p = bm.collected, j = bm.collect_slot; p != bm.loaded;
           ++p, j = next_slot(j)) {
        SlotMeta& m = lane.meta[b * depth_ + j];
        if (m.lost) continue;
        if (now - m.loaded <= config_.task_deadline) break;
        // The block is still running it (or a task before it): deliver timed_out now and keep
        // the ring out of use until the block finishes it.
        stage(lane, m, TaskStatus::timed_out, nullptr);
        m.lost = true;
        ++bm.lost;
        --lane.unresolved;
        ++ended;
        timed_out_.fetch_add(1, std::memory_order_relaxed);   // relaxed: statistic
        slots_lost_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
        changed = true;
      }
    }
#if defined(WEFT_PROBE_RING_LEVELS)
    if (ended > 0) {
      g_probe_ring_levels[std::min<std::uint32_t>(bm.in_flight(), 32)].fetch_add(
          1, std::memory_order_relaxed);
      g_probe_ring_before[std::min<std::uint32_t>(before, 32)].fetch_add(1,
                                                                         std::memory_order_relaxed);
    }
#endif
    WEFT_POOL_SUB_BEGIN(t_relink);
    if (changed) relink(lane, b);
    WEFT_POOL_SUB_END(lane, 2, t_relink);
    return ended;
  }

  // Delivers what the lane staged: one lock per output queue, callbacks outside any lock.
  void flush(Lane& lane, std::size_t ended) {
    if (ended == 0) return;
    // Counted before anything is delivered: a consumer that got a record sees it counted.
    WEFT_POOL_SUB_BEGIN(t_count);
    // relaxed: statistics (the queue locks below order them before the records' delivery).
    // Only this lane writes its counters: a load and a store, no read-modify-write.
    lane.completed.store(lane.completed.load(std::memory_order_relaxed) + ended,
                         std::memory_order_relaxed);
    if (lane.staged_failed > 0) {
      lane.failed.store(lane.failed.load(std::memory_order_relaxed) + lane.staged_failed,
                        std::memory_order_relaxed);
      lane.staged_failed = 0;
    }
    WEFT_POOL_SUB_END(lane, 5, t_count);
    WEFT_POOL_SUB_BEGIN(t_deliver);
    for (std::size_t out = 0; out < lane.staged.size(); ++out) {
      std::vector<Record>& st = lane.staged[out];
      if (st.empty()) continue;
      // st comes back empty: a recycled vector, or a new one when the queue has none spare.
      // Given room for a round's results at once, so that stage() does not grow it by
      // doubling (up to seven allocations and copies per round, seen under perf in the host
      // backend; no difference measured on the H100 machine,
      // bench/results/h100/probes/staged_ab-f8d4215.txt).
      const std::size_t round = st.size();
      outputs_[out]->deliver(lane.index, st);
      if (st.capacity() < round) st.reserve(std::min(round, kStagedReserveMax));
    }
    WEFT_POOL_SUB_END(lane, 6, t_deliver);
#if defined(WEFT_POOL_TRACE)
    g_trace_delivered.store(trace_now());
#endif
    for (auto& [id, r] : lane.callbacks) {
      Callback cb = take_callback(id);
      cb(r);
    }
    lane.callbacks.clear();
    WEFT_POOL_SUB_BEGIN(t_finish);
    finish_pending(lane, ended);
    WEFT_POOL_SUB_END(lane, 7, t_finish);
  }

  void finish_pending(Lane& lane, std::size_t n) {
    // seq_cst store: the deliveries above happen before a synchronize() that sees the count;
    // and with synchronize's count of waiters, one side sees the other's write. The relaxed
    // load: only this lane writes its count.
    lane.delivered.store(lane.delivered.load(std::memory_order_relaxed) + n,
                         std::memory_order_seq_cst);
    wake_sync_waiters();
  }
  // After a delivery was counted (seq_cst): wakes threads in synchronize(), which count
  // themselves waiters and then look at the deliveries; one side sees the other's write.
  void wake_sync_waiters() {
    if (sync_waiters_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(idle_mutex_); }  // the waiter is in its wait
      idle_cv_.notify_all();
    }
  }

  // Delivers every task still in the input queue as cancelled. Returns how many.
  std::size_t cancel_queued(Lane& lane) {
    std::size_t n = 0;
    for (;;) {
      lane.batch.clear();
      take_batch(lane, 4096);
      if (lane.batch.empty()) return n;
      n += cancel_batch(lane);
    }
  }
  std::size_t cancel_batch(Lane& lane) {
    const std::size_t n = lane.batch.size();
    for (const Entry& e : lane.batch) {
      stage(lane, SlotMeta::of(e, Clock::time_point{}), TaskStatus::cancelled, e.payload);
    }
    lane.batch.clear();
    flush(lane, n);
    return n;
  }

  // The blocks died (a device task trapped or faulted: the kernel is gone): tasks in flight
  // are delivered as device_failed, queued ones as cancelled, and waiters learn the cause.
  // Any lane may detect it; each then fails its own slots. Returns whether that happened.
  bool check_failure(Lane& lane) {
    // acquire: pairs with the release store below by the lane that detected it.
    if (!blocks_failed_.load(std::memory_order_acquire)) {
      std::string why;
      {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        why = blocks_->failure();
        if (why.empty()) return false;
        if (failure_.empty()) failure_ = why;
      }
      close();
      blocks_failed_.store(true, std::memory_order_release);
      { std::lock_guard<std::mutex> lock(in_mutex_); }  // sleeping lanes are in their wait
      in_cv_.notify_all();                              // they fail their slots too
    }
    settle_express(lane, Clock::now());  // the input is closed (above, or by the lane that saw it)
    std::size_t n = 0;
    for (const std::uint32_t b : lane.active) {
      BlockMeta& bm = lane.blocks[b];
      for (std::uint32_t p = bm.collected, j = bm.collect_slot; p != bm.loaded;
           ++p, j = next_slot(j)) {
        const SlotMeta& m = lane.meta[b * depth_ + j];
        if (m.lost) continue;
        stage(lane, m, TaskStatus::device_failed, nullptr);
        ++n;
      }
      bm.collected = bm.loaded;
      bm.collect_slot = bm.load_slot;
      bm.lost = 0;
      bm.active_at = kNil;
    }
    lane.active.clear();
    lane.unresolved = 0;
    n += mailbox_fail(lane);
    flush(lane, n);
    cancel_queued(lane);
    wake_all_outputs();
    return true;
  }

  void lane_main(Lane& lane) {
    Clock::time_point last_activity = Clock::now();
    // When this lane last asked whether the blocks are alive: a CUDA call (cudaStreamQuery)
    // each time, so by the clock, not every 1024 quiet rounds as before (at 16 pauses of ~21 ns
    // a round, bench/results/h100/probes/clock-trace-lanes-a1148f1.txt, that was some thousands of
    // driver calls a second per lane, each delaying a collection).
    Clock::time_point last_health_check = last_activity;
#if defined(WEFT_POOL_PROFILE)
    lane.last = __rdtsc();
#endif
    for (;;) {
      const Clock::time_point now = Clock::now();
#if defined(WEFT_POOL_PROFILE)
      ++lane.rounds;
      lane.scanned += lane.active.size();
#endif
      WEFT_POOL_SUB_BEGIN(t_adopt);
      const bool adopted = adopt_express(lane, now);
      WEFT_POOL_SUB_END(lane, 8, t_adopt);
      const std::size_t ended = collect(lane, now) + mailbox_round(lane, now, false);
      lane.mark(0);
      flush(lane, ended);
      lane.mark(1);

      bool stopping = false;
      bool whole_rings = false;
      lane.batch.clear();
      // queued_count() is a hint here (the shard locks in take_batch order the entries).
      WEFT_POOL_SUB_BEGIN(t_look);
      const std::size_t queued = queued_count();
      const bool input = queued > 0;
      if (input) revoke_express(lane);
      WEFT_POOL_SUB_END(lane, 9, t_look);
      if (lane.free_capacity > 0 && input) {
        // At most one task per block per round: rings fill one level at a time, and a lane
        // that comes back quickly does not take what other lanes are about to. Unless more is
        // queued than all lanes' free slots together (this lane's times the lanes): then every
        // free slot gets a task whatever the order, so the lane fills its rings (up to
        // kRoundTasksMax a round), and a block runs several tasks per read of host memory and
        // the lane collects several per control line. One task per block per round kept the
        // rings about one deep under load: batched empty tasks 23.0-24.9 -> 15.8-23.5 ns per
        // task with 4 lanes, 29.6-34.0 -> 18.5-20.5 at 2 blocks per SM in a same-instance A/B
        // (bench/results/h100/probes/round_max_ab-ab9676a.txt, rounds of up to 512).
        std::size_t want = std::min(lane.free_capacity, lane.listed);
        const bool backlog = queued >= lanes_.size() * lane.free_capacity;
        if (backlog) want = std::min(lane.free_capacity, std::max(lane.listed, kRoundTasksMax));
        // A lane with many blocks (more than config_.whole_ring_blocks listed) gives each block
        // it picks its whole free ring, so that a round touches fewer blocks: with one task per
        // block per level a round of one lane visited all its 792 blocks once each. One lane
        // 133-231 -> 59-65 ns per task, two lanes 48-59 -> 34-39; with 4 lanes (198 blocks
        // each) whole rings were 10-15% slower, so below the threshold rings fill level by
        // level (bench/results/h100/probes/whole_rings_ab-7492f95.txt,
        // whole_rings_hybrid_ab-7a1999c.txt).
        whole_rings = backlog && lane.listed > config_.whole_ring_blocks;
        stopping = take_batch(lane, want, true);
      } else {
        // acquire: pairs with shutdown's release store.
        stopping = stop_flag_.load(std::memory_order_acquire);
      }
      lane.mark(2);
      if (stopping) {
        print_profile(lane);
        stop_lane(lane);
        return;
      }
#if defined(WEFT_POOL_TRACE)
      if (!lane.batch.empty()) g_trace_taken.store(trace_now());
#endif
      load_batch(lane, now, whole_rings);
      lane.mark(3);
      if (lane.ring) {
        blocks_->after_loads();
        lane.ring = false;
      }
      offer_express(lane);
      publish_idle_blocks(lane);
      wake_for_own_shards(lane);
      lane.mark(4);
#if defined(WEFT_POOL_PROFILE)
      lane.ended += ended;
      lane.loaded += lane.batch.size();
#endif

      if (ended > 0 || !lane.batch.empty() || adopted) {
        last_activity = now;
        continue;
      }
      // A quiet round. Now and then ask whether the blocks are still alive.
      // relaxed: a hint; check_failure reads it again with acquire.
      if (now - last_health_check >= kHealthCheckPeriod ||
          blocks_failed_.load(std::memory_order_relaxed)) {
        last_health_check = now;
        if (check_failure(lane)) return;
      }
      // A lane keeps spinning until it has been quiet for idle_spin itself. It used to spin
      // while any lane had been busy, because a sleeping lane made every push pay a futex
      // wake-up (2.4 us per single push with 4 lanes, of which one got the pool's occasional
      // tasks and three slept: bench/results/h100/probes/clock-trace-lanes-a1148f1.txt); since
      // a push wakes a lane only when its shard's home lane cannot take the task (push), a
      // trickle of tasks keeps its home lanes spinning and lets the others sleep.
      if (now - last_activity < config_.idle_spin) {
        // Up to 16 pauses between quiet rounds (~0.35 us on the H100 machine's Xeon,
        // bench/results/h100/probes/clock-trace-lanes-a1148f1.txt), ended early by queued input
        // (host memory only). Fewer would re-read the blocks' control lines more often, which slows
        // the blocks' own reads of them (one pause per round: busy fraction at 10 us, depth 8, 0.82
        // -> 0.33-0.44; bench/results/h100/probes/trace-busy-lanes-6ad2503.txt).
        for (int p = 0; p < 16 && queued_count() == 0 &&
                        // relaxed: a hint; adopt_express acquires.
                        lane.express.load(std::memory_order_relaxed) != kExpressFilled;
             ++p) {
          weft::cpu::detail::cpu_relax();
        }
        lane.mark(5);
        continue;
      }
      if (lane.active.empty() && !mailbox_busy(lane)) {
        sleep_until_work(lane);
      } else {
        // Long tasks in flight: poll every 20 us instead of spinning a core.
        lane.napping.store(true, std::memory_order_relaxed);  // relaxed: a hint (take_batch)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        lane.napping.store(false, std::memory_order_relaxed);
      }
      lane.mark(5);
    }
  }

  void print_profile([[maybe_unused]] const Lane& lane) {
#if defined(WEFT_POOL_PROFILE)
    std::uint64_t total = 0;
    for (std::uint64_t c : lane.cycles) total += c;
    const double per = lane.ended != 0 ? 1.0 / static_cast<double>(lane.ended) : 0.0;
    std::fprintf(stderr,
                 "[profile] lane from block %zu: rounds %llu ended %llu (%.1f/round) active "
                 "blocks/round %.1f | cycles/task collect %.0f flush %.0f take %.0f load %.0f "
                 "ring %.0f idle %.0f total %.0f\n",
                 lane.first, static_cast<unsigned long long>(lane.rounds),
                 static_cast<unsigned long long>(lane.ended),
                 static_cast<double>(lane.ended) / static_cast<double>(lane.rounds + 1),
                 static_cast<double>(lane.scanned) / static_cast<double>(lane.rounds + 1),
                 lane.cycles[0] * per, lane.cycles[1] * per, lane.cycles[2] * per,
                 lane.cycles[3] * per, lane.cycles[4] * per, lane.cycles[5] * per, total * per);
    std::fprintf(stderr,
                 "[profile]   inside: collect's prefetch %.0f, staging %.0f, IDLE stores and "
                 "relinks %.0f; load's bookkeeping pass %.0f, writing pass %.0f (cycles/task)\n",
                 lane.sub[0] * per, lane.sub[1] * per, lane.sub[2] * per, lane.sub[3] * per,
                 lane.sub[4] * per);
    const double per_round = 1.0 / static_cast<double>(lane.rounds + 1);
    std::fprintf(stderr,
                 "[profile]   per round: flush's statistics %.0f, deliveries %.0f, finish_pending "
                 "%.0f; adopt_express %.0f, look at the input %.0f, take from the shards %.0f "
                 "(cycles/round)\n",
                 lane.sub[5] * per_round, lane.sub[6] * per_round, lane.sub[7] * per_round,
                 lane.sub[8] * per_round, lane.sub[9] * per_round, lane.sub[10] * per_round);
#endif
  }

  // Lost slots that come back meanwhile are reclaimed at the next collect.
  void sleep_until_work(Lane& lane) {
    std::unique_lock<std::mutex> lock(in_mutex_);
    // Before the look at the shards below: a lone task pushed after that look is seen by a
    // lane woken by the push (under in_mutex_, so it sees this flag) and taken by it even
    // if it is not the task's home lane.
    // seq_cst: also pairs with push's look at napping after a direct load (this sets it, then
    // looks at the offer below; the pusher stores FILLED, then looks at napping).
    lane.napping.store(true, std::memory_order_seq_cst);
    // seq_cst: pairs with push (it stores a shard's size, then looks at this count; this
    // counts itself, then looks at the sizes): a push either sees a sleeper and notifies under
    // in_mutex_, or its task is seen here. Tasks this lane leaves to their shard's home lane
    // (awake, with an idle block for each) do not keep it awake: that lane takes them, or, if
    // it loses its idle blocks first, wakes a sleeper (wake_for_own_shards). (With any queued
    // task counted as work, a lane whose idle spin was over came back through here, taking
    // in_mutex_, every round while any shard held a task.)
    sleeping_lanes_.fetch_add(1, std::memory_order_seq_cst);
    // acquire: pairs with the release stores of shutdown and check_failure.
    // seq_cst (express): pairs with push_direct's store of FILLED, as the sizes do with push.
    // seq_cst (mailbox): pairs with mailbox_push's store of IN_FLIGHT, as the offer's does.
    const bool mailbox_lane = serves_mailbox(lane);
    auto work = [&] {
      return stop_flag_.load(std::memory_order_acquire) || input_for(lane) ||
             blocks_failed_.load(std::memory_order_acquire) ||
             lane.express.load(std::memory_order_seq_cst) == kExpressFilled ||
             (mailbox_lane && mbox_state_.load(std::memory_order_seq_cst) == kMboxInFlight);
    };
    if (!work()) {
      scheduler_sleeps_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
      in_cv_.wait(lock, work);
    }
    sleeping_lanes_.fetch_sub(1, std::memory_order_seq_cst);
    lane.napping.store(false, std::memory_order_relaxed);  // relaxed: a hint
  }

  // Shutdown: queued tasks are cancelled, exactly once each (whichever lane takes them);
  // tasks in slots run to the end or time out; then every slot of the lane gets EXIT.
  void stop_lane(Lane& lane) {
    settle_express(lane, Clock::now());  // shutdown() closed the input before it stopped us
    cancel_batch(lane);
    cancel_queued(lane);
    // The mailbox's task too (its lane only): delivered at once, or timed out.
    // (Not a LOST one: shutdown abandons it.)
    const bool mailbox_lane = serves_mailbox(lane);
    auto undelivered = [&] {
      // relaxed: a hint; mailbox_round acts by CAS.
      const std::uint32_t s = mbox_state_.load(std::memory_order_relaxed);
      return mailbox_lane && (s == kMboxInFlight || s == kMboxCollecting);
    };
    for (std::uint32_t round = 0; lane.unresolved > 0 || undelivered(); ++round) {
      const Clock::time_point now = Clock::now();
      const std::size_t ended = collect(lane, now) + mailbox_round(lane, now, true);
      flush(lane, ended);
      if (ended == 0) {
        if ((round & 1023) == 1023 && check_failure(lane)) break;
        std::this_thread::yield();
      }
    }
    for (std::uint32_t b = 0; b < lane.blocks.size(); ++b) {
      for (std::uint32_t j = 0; j < depth_; ++j) {
        std::uint32_t expected = state_of(lane, b, j).load(std::memory_order_relaxed);
        // release: nothing to publish but the state itself; the block acquires it. A lost
        // slot's block may be finishing right now: the CAS loop makes sure EXIT is the last
        // word (the block's own FINISHED store is a CAS from READY when a watchdog is on, so
        // it sees EXIT and returns).
        while (!state_of(lane, b, j)
                    .compare_exchange_weak(expected, static_cast<std::uint32_t>(SlotState::exit),
                                           std::memory_order_release, std::memory_order_relaxed)) {
        }
      }
    }
    blocks_->after_loads();
  }

  // The members fall into groups by who writes them how often, each group starting a cache
  // line, so that what one thread writes often does not share a line with what others read
  // all the time (the counters every lane added to every round shared lines with what every
  // push and every waiting consumer reads).

  // Set at construction, or written once when the pool closes, stops or fails; read by every
  // push, pop and round.
  std::unique_ptr<BlockRuntime> blocks_;
  RingLayout layout_;
  std::uint32_t depth_;
  QueueOrder order_;
  SchedulerConfig config_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::unique_ptr<Output>> outputs_;
  std::atomic<bool> closed_{false};  // no more pushes (see close())
  std::atomic<bool> stop_flag_{false};
  std::atomic<bool> no_more_or_failed_{false};
  std::atomic<bool> blocks_failed_{false};

  // The most tasks a lane loads in one round when a backlog lets it fill rings (it loads one
  // per listed block otherwise, whatever this says). One lane of 792 blocks taking up to 1024
  // or 2048 tasks a round ran at 210-260 ns per task against 80-100 (why was not measured;
  // such a round lasts about as long as warm_idle, 100 us, after which blocks sleep until the
  // doorbell); 512 is as fast as before with one lane and gains as much as 2048 with four
  // (bench/results/h100/probes/round_max_ab-ab9676a.txt).
  static constexpr std::size_t kRoundTasksMax = 512;
  // Input shards: enough that a few pushing threads rarely share one (a shared one costs
  // only contention, not correctness).
  static constexpr std::size_t kInputShards = 8;
  // Output shards per queue: one per lane, up to this many (lane k delivers to shard k mod
  // this). A consumer finds its records at home only in a shard that some lane delivers to;
  // with 8 lanes and 8 shards, four threads pushing one task at a time fed four lanes and so
  // four shards, and four consumers' home shards (their ticket mod 8) need not be those: such
  // consumers hunted in the others' shards (single tasks 290-378 -> 94-98 ns per task with
  // the cap, bench/results/h100/probes/out_shards_bench_ab-ac530d0/).
  static constexpr std::size_t kOutputShardsMax = 4;
  ShardedFifo<Entry> input_;  // QueueOrder::fifo; its shards count accepted tasks in both orders

  // Read by pushes; written when a lane goes to sleep or wakes.
  alignas(64) std::atomic<std::size_t> sleeping_lanes_{0};

  // Sleeping lanes and the priority queue.
  alignas(64) mutable std::mutex in_mutex_;  // the heap; lanes sleep under it
  std::condition_variable in_cv_;            // lanes sleep here for work
  std::vector<Ranked> heap_;                 // QueueOrder::priority (under in_mutex_)
  std::atomic<std::size_t> heap_size_{0};    // heap_.size(), readable without the lock
  std::uint64_t next_seq_ = 0;               // under in_mutex_
  bool stopping_ = false;                    // under in_mutex_
  bool lanes_joined_ = false;                // under in_mutex_

  alignas(64) std::mutex callbacks_mutex_;
  std::vector<Callback> callbacks_;  // by id - 1
  std::vector<std::uint32_t> free_callbacks_;

  // synchronize(); delivered tasks are counted per lane (Lane::delivered). Lanes read
  // sync_waiters_ every round that delivers.
  alignas(64) std::mutex idle_mutex_;
  std::condition_variable idle_cv_;           // synchronize() waits here for pending() == 0
  std::atomic<std::size_t> sync_waiters_{0};  // threads in synchronize()

  // Rare: failures, the watchdog, lanes going to sleep.
  alignas(64) mutable std::mutex failure_mutex_;
  std::string failure_;
  std::atomic<std::uint64_t> timed_out_{0};
  std::atomic<std::uint64_t> slots_lost_{0};
  std::atomic<std::uint64_t> scheduler_sleeps_{0};

  // The mailbox (see mailbox_push). Its state and the hints beside it are read by every
  // waiting consumer and written once per mailbox task: a line of their own.
  static constexpr std::uint32_t kMboxFree = 0, kMboxFilling = 1, kMboxInFlight = 2,
                                 kMboxCollecting = 3, kMboxLost = 4, kMboxClosed = 5;
  // How long a finished mailbox task waits for a consumer of its queue to take it before the
  // lane delivers it to the queue (a consumer that waits for it polls it continuously).
  static constexpr std::chrono::microseconds kMailboxGrace{20};
  static constexpr std::size_t kAnyQueue = ~std::size_t{0};
  static constexpr std::chrono::milliseconds kMailboxNudgeAfter{1};
  // A single push is a lone task (mailbox_push) when its thread pushed nothing for this long:
  // in TSC cycles (2.9 us on the H100 machine, whose TSC runs at 2.101 GHz as the probes print,
  // e.g. bench/results/h100/probes/single_lanes-e1e28ed.txt; not calibrated: a heuristic), else
  // nanoseconds (2 us).
#if defined(__x86_64__)
  static constexpr std::uint64_t kLoneGapTicks = 6000;
#else
  static constexpr std::uint64_t kLoneGapTicks = 2000;
#endif
  std::uint64_t* mbox_ = nullptr;  // null: no mailbox (set once, before the lanes start)
  alignas(64) std::atomic<std::uint32_t> mbox_state_{kMboxClosed};
  std::atomic<std::uint32_t> mbox_use_{0};   // the current request's tag
  std::atomic<std::uint32_t> mbox_out_{0};   // its output queue
  std::atomic<std::uint32_t> mbox_size_{0};  // its payload size
  std::atomic<Clock::rep> mbox_loaded_{0};   // when it was pushed (the watchdog's start)
  SlotMeta mbox_meta_;  // written by the pusher in FILLING, read by the collector holding it
  // Deliveries by consumers that collected the mailbox themselves (a lane counts its own).
  alignas(64) std::atomic<std::uint64_t> mbox_delivered_{0};
  std::atomic<std::uint64_t> mbox_completed_{0};
  std::atomic<std::uint64_t> mbox_failed_{0};
  std::atomic<std::uint64_t> mbox_taken_{0};
  std::atomic<std::uint64_t> mbox_tasks_{0};  // written by pushers
  // The mailbox lane's own: the use whose result it first saw back, and when.
  std::uint32_t mbox_seen_use_ = 0;
  Clock::time_point mbox_seen_{};
};

}  // namespace detail
}  // namespace weft::gpu

#undef WEFT_POOL_SUB_BEGIN
#undef WEFT_POOL_SUB_END
