// weft/gpu/detail/pool_core.hpp - the host half of the pool: input queue, scheduler lanes,
// slot bookkeeping, watchdog and output queues (seed 000 §3.2). Independent of where blocks
// run.
//
// The slots are split into contiguous ranges, one per scheduler lane (a host thread). A lane
// owns its slots outright: only it loads them, collects them and keeps their bookkeeping, so
// lanes share nothing but the input queue (one lock per batch taken) and the output queues
// (one lock per batch delivered). Everything per task is lock-free and allocation-free.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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

#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

enum class QueueOrder : std::uint8_t { fifo, priority };

/// A task as pushed and as popped: type id, payload bytes, a user tag, and (popped) how it
/// ended. The payload holds the task's inputs when pushed and its results when popped.
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
  std::uint64_t slots_lost = 0;  // slots whose task passed the deadline and has not ended yet
  std::uint64_t host_polls = 0;  // device backend: reads of host memory by the blocks
};

namespace detail {

/// How the scheduler lanes and consumers behave (from PoolOptions; validated by Pool).
struct SchedulerConfig {
  std::size_t lanes = 0;  // 0: automatic
  std::chrono::nanoseconds idle_spin{std::chrono::microseconds(1000)};
  std::chrono::nanoseconds consumer_spin{std::chrono::microseconds(50)};
  std::chrono::nanoseconds task_deadline{0};  // 0: no watchdog
  // Device backend: ring the doorbell after loading a slot whose block has been idle at least
  // this long (it may be in deep idle); 0: after every batch.
  std::chrono::nanoseconds ring_after{0};
};

template <std::size_t Capacity>
class PoolCore {
 public:
  using Record = TaskRecord<Capacity>;
  using Callback = std::function<void(Record&)>;
  using Clock = std::chrono::steady_clock;

  PoolCore(std::unique_ptr<BlockRuntime> blocks, std::size_t output_queues, QueueOrder order,
           SchedulerConfig config)
      : blocks_(std::move(blocks)), order_(order), config_(config), outputs_(output_queues) {
    if (output_queues == 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::output_queues must be >= 1 (got 0)");
    }
    const std::size_t n = blocks_->num_slots();
    // Auto: one lane for the host backend (its blocks are threads already), else one per
    // 512 slots, at most 4 (measured on an H100: bench/results/h100/gpu-pool.md, lanes sweep).
    const std::size_t wanted =
        config_.lanes != 0
            ? config_.lanes
            : (blocks_->host_polls_counted() ? std::min<std::size_t>(4, (n + 511) / 512) : 1);
    const std::size_t lanes = std::clamp<std::size_t>(wanted, 1, n);
    lanes_.reserve(lanes);
    for (std::size_t k = 0; k < lanes; ++k) {
      auto lane = std::make_unique<Lane>();
      lane->first = k * n / lanes;
      lane->end = (k + 1) * n / lanes;
      lane->meta.resize(lane->end - lane->first);  // idle_since: the epoch, long ago: ring
      // LIFO free list, lowest index on top: under light load the same few blocks get the
      // work and keep polling fast, while the others back off into deep idle.
      for (std::size_t i = lane->end; i-- > lane->first;) {
        lane->free.push_back(static_cast<std::uint32_t>(i));
      }
      lane->in_flight.reserve(lane->end - lane->first);
      lane->staged.resize(output_queues);
      lanes_.push_back(std::move(lane));
    }
    blocks_->start();
    for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { lane_main(*l); });
  }

  ~PoolCore() { shutdown(); }

  // ---- input ----
  void push(const Record* records, std::size_t count, std::size_t out, int priority,
            Callback callback = nullptr) {
    check_out(out, "push");
    for (std::size_t k = 0; k < count; ++k) check_record(records[k]);
    bool wake_one = false, wake_all = false;
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      if (no_more_tasks_) {
        throw ShutDown(
            "weft::gpu::Pool::push: no_more_tasks() was called; nothing more is accepted");
      }
      for (std::size_t k = 0; k < count; ++k) {
        Entry e{records[k], static_cast<std::uint32_t>(out), priority, next_seq_++, nullptr};
        if (callback) e.callback = std::make_unique<Callback>(callback);
        if (order_ == QueueOrder::fifo) {
          fifo_.push_back(std::move(e));
        } else {
          heap_.push_back(std::move(e));
          std::push_heap(heap_.begin(), heap_.end(), EntryLess{});
        }
      }
      // relaxed: a count for the caller's information; the queues' locks order the records.
      if (!callback) outputs_[out].unfinished.fetch_add(count, std::memory_order_relaxed);
      // relaxed: pending_ is only compared with zero by synchronize() under idle_mutex_ after
      // a finisher's acq_rel decrement; this increment is ordered before the entries can be
      // taken (same lock), so it never goes below zero.
      pending_.fetch_add(count, std::memory_order_relaxed);
      pushed_ += count;
      // relaxed: a hint that lets spinning lanes skip the lock while the queue is empty; the
      // entries themselves are read under in_mutex_.
      queued_.store(queued_count(), std::memory_order_relaxed);
      wake_one = sleeping_lanes_ > 0;
      wake_all = wake_one && count > 1;
    }
    if (wake_all) {
      in_cv_.notify_all();
    } else if (wake_one) {
      in_cv_.notify_one();
    }
  }

  // ---- output ----
  Record pop(std::size_t out) {
    check_out(out, "pop");
    Output& q = outputs_[out];
    spin_for_output(q);
    std::unique_lock<std::mutex> lock(q.mutex);
    wait_output(q, lock);
    if (q.ready.empty()) throw_hopeless(out, "pop");
    Record r = std::move(q.ready.front());
    q.ready.pop_front();
    taken(q, 1);
    return r;
  }

  bool try_pop(Record& r, std::size_t out) {
    check_out(out, "try_pop");
    Output& q = outputs_[out];
    // relaxed: a hint; the record is taken under the lock.
    if (q.available.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.ready.empty()) return false;
    r = std::move(q.ready.front());
    q.ready.pop_front();
    taken(q, 1);
    return true;
  }

  std::size_t pop_batch(std::span<Record> into, std::size_t out) {
    check_out(out, "pop_batch");
    if (into.empty()) return 0;
    Output& q = outputs_[out];
    spin_for_output(q);
    std::unique_lock<std::mutex> lock(q.mutex);
    wait_output(q, lock);
    if (q.ready.empty()) throw_hopeless(out, "pop_batch");
    const std::size_t n = std::min(into.size(), q.ready.size());
    std::move(q.ready.begin(), q.ready.begin() + static_cast<std::ptrdiff_t>(n), into.begin());
    q.ready.erase(q.ready.begin(), q.ready.begin() + static_cast<std::ptrdiff_t>(n));
    taken(q, n);
    return n;
  }

  [[nodiscard]] std::size_t unfinished(std::size_t out) const {
    check_out(out, "unfinished");
    // relaxed: a count for the caller's information; the queues' locks order the records.
    return outputs_[out].unfinished.load(std::memory_order_relaxed);
  }

  void no_more_tasks() {
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      no_more_tasks_ = true;
    }
    wake_all_outputs();
  }

  /// Waits until every task pushed so far has been delivered.
  void synchronize() {
    std::unique_lock<std::mutex> lock(idle_mutex_);
    // acquire: pairs with finish_pending's acq_rel decrement; deliveries before it are seen.
    idle_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }

  /// Stops the pool: tasks not yet in a slot are delivered as cancelled, tasks in slots finish
  /// (or time out), the blocks exit and the lanes join. Idempotent.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      if (stopping_ && lanes_joined_) return;
      stopping_ = true;
      no_more_tasks_ = true;
    }
    // release: pairs with the lanes' acquire load; the lock above already orders it for lanes
    // that sleep, this flag is for the ones spinning.
    stop_flag_.store(true, std::memory_order_release);
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
      for (auto& lane : lanes_) lost += lane->lost.size();
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
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      s.pushed = pushed_;
    }
    // relaxed: statistics.
    s.completed = completed_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.timed_out = timed_out_.load(std::memory_order_relaxed);
    s.scheduler_sleeps = scheduler_sleeps_.load(std::memory_order_relaxed);
    s.slots_lost = slots_lost_.load(std::memory_order_relaxed);
    if (blocks_) s.host_polls = blocks_->host_polls();
    return s;
  }

  [[nodiscard]] std::string describe() const { return blocks_ ? blocks_->describe() : ""; }
  [[nodiscard]] std::size_t num_slots() const { return blocks_ ? blocks_->num_slots() : 0; }
  [[nodiscard]] std::size_t num_lanes() const { return lanes_.size(); }

 private:
  struct Entry {
    Record rec;
    std::uint32_t out = 0;
    int priority = 0;
    std::uint64_t seq = 0;
    std::unique_ptr<Callback> callback;  // delivery to a callback/future instead of a queue
  };
  struct EntryLess {  // max-heap: higher priority first, then lower sequence (FIFO)
    bool operator()(const Entry& a, const Entry& b) const {
      return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
    }
  };
  // What the lane remembers of the task in a slot (the payload lives in the slot itself).
  struct SlotMeta {
    std::uint64_t tag = 0;
    std::uint32_t out = 0;
    std::uint32_t type = 0;
    std::uint32_t size = 0;
    std::unique_ptr<Callback> callback;
    Clock::time_point loaded{};
    Clock::time_point idle_since{};  // when the slot was last collected (or the pool started)
  };
  struct Output {
    mutable std::mutex mutex;
    std::condition_variable cv;
    std::deque<Record> ready;
    std::size_t waiters = 0;                 // consumers asleep on cv (under mutex)
    std::atomic<std::size_t> available{0};   // ready.size(), readable without the lock
    std::atomic<std::size_t> unfinished{0};  // pushed to this queue and not yet popped
  };
  struct Lane {
    std::size_t first = 0, end = 0;        // the slots [first, end) belong to this lane
    std::vector<SlotMeta> meta;            // indexed by slot - first
    std::vector<std::uint32_t> free;       // IDLE slots (LIFO)
    std::vector<std::uint32_t> in_flight;  // READY slots whose task is not yet delivered
    std::vector<std::uint32_t> lost;       // past the deadline, delivered as timed_out, still READY
    std::vector<std::vector<Record>> staged;  // per output queue, delivered in one lock each
    std::vector<std::pair<std::unique_ptr<Callback>, Record>> callbacks;
    std::vector<Entry> batch;  // taken from the input queue, not yet loaded
    bool ring = false;         // a block loaded this round may be in deep idle
    std::thread thread;
  };

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

  // ---- consumers ----
  // Under q.mutex: no task will ever reach q.
  bool hopeless(const Output& q) const {
    // acquire: pairs with wake_all_outputs' release store (failure_ is visible after it).
    // relaxed: unfinished is read under the queue's lock.
    return no_more_or_failed_.load(std::memory_order_acquire) &&
           q.unfinished.load(std::memory_order_relaxed) == 0;
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
  // A consumer about to block spins a little first: a futex wake-up costs more than most
  // tasks take, so waiting short ends awake is what keeps push->pop latency low.
  void spin_for_output(const Output& q) const {
    if (config_.consumer_spin.count() <= 0) return;
    const auto until = Clock::now() + config_.consumer_spin;
    for (std::uint32_t i = 1;; ++i) {
      // relaxed: a hint; the record is taken under the lock.
      if (q.available.load(std::memory_order_relaxed) != 0) return;
      // acquire: pairs with wake_all_outputs' release store.
      if (no_more_or_failed_.load(std::memory_order_acquire)) return;
      weft::cpu::detail::cpu_relax();
      if ((i & 63) == 0 && Clock::now() >= until) return;
    }
  }
  void wait_output(Output& q, std::unique_lock<std::mutex>& lock) {
    if (!q.ready.empty() || hopeless(q)) return;
    ++q.waiters;
    q.cv.wait(lock, [&] { return !q.ready.empty() || hopeless(q); });
    --q.waiters;
  }
  // Under q.mutex: n records left queue q. When that was the last one anybody can ever get,
  // the other consumers waiting on q learn it now instead of waiting forever.
  void taken(Output& q, std::size_t n) {
    // relaxed: both are read under q.mutex by waiters, or as hints.
    q.available.store(q.ready.size(), std::memory_order_relaxed);
    const std::size_t left = q.unfinished.fetch_sub(n, std::memory_order_relaxed) - n;
    // acquire: pairs with wake_all_outputs' release store.
    if (left == 0 && no_more_or_failed_.load(std::memory_order_acquire) && q.waiters > 0) {
      q.cv.notify_all();
    }
  }
  void wake_all_outputs() {
    // release: pairs with the acquire loads in hopeless/spin_for_output/taken.
    no_more_or_failed_.store(true, std::memory_order_release);
    for (Output& q : outputs_) {
      std::lock_guard<std::mutex> lock(q.mutex);  // no waiter misses the flag
      q.cv.notify_all();
    }
  }

  // ---- input (under in_mutex_) ----
  std::size_t queued_count() const {
    return order_ == QueueOrder::fifo ? fifo_.size() : heap_.size();
  }
  bool take_entry(Entry& e) {
    if (order_ == QueueOrder::fifo) {
      if (fifo_.empty()) return false;
      e = std::move(fifo_.front());
      fifo_.pop_front();
    } else {
      if (heap_.empty()) return false;
      std::pop_heap(heap_.begin(), heap_.end(), EntryLess{});
      e = std::move(heap_.back());
      heap_.pop_back();
    }
    return true;
  }
  // Moves up to `max` queued entries into lane.batch. Returns whether the pool is stopping.
  bool take_batch(Lane& lane, std::size_t max) {
    std::lock_guard<std::mutex> lock(in_mutex_);
    Entry e;
    while (lane.batch.size() < max && take_entry(e)) lane.batch.push_back(std::move(e));
    // relaxed: see push.
    queued_.store(queued_count(), std::memory_order_relaxed);
    return stopping_;
  }

  // ---- slots ----
  SlotHeader* header(std::size_t i) { return reinterpret_cast<SlotHeader*>(blocks_->slot(i)); }
  std::atomic_ref<std::uint32_t> state_of(std::size_t i) {
    return std::atomic_ref<std::uint32_t>(header(i)->state);
  }

  void load_slot(Lane& lane, std::uint32_t i, Entry& e, Clock::time_point now) {
    SlotHeader* h = header(i);
    h->type = e.rec.type;
    h->payload_size = e.rec.payload_size;
    h->status = 0;
    std::memcpy(blocks_->slot(i) + kSlotHeaderBytes, e.rec.payload, e.rec.payload_size);
    SlotMeta& m = lane.meta[i - lane.first];
    m.tag = e.rec.tag;
    m.out = e.out;
    m.type = e.rec.type;
    m.size = e.rec.payload_size;
    m.callback = std::move(e.callback);
    m.loaded = now;
    if (now - m.idle_since >= config_.ring_after) lane.ring = true;
    // release: type, size and payload are visible to the block's acquire load of READY.
    state_of(i).store(static_cast<std::uint32_t>(SlotState::ready), std::memory_order_release);
    blocks_->wake(i);
  }

  // A task ended (finished, timed out or failed): stage it for delivery.
  void stage(Lane& lane, SlotMeta& m, TaskStatus status, const unsigned char* results) {
    Record r;
    r.type = m.type;
    r.payload_size = m.size;
    r.tag = m.tag;
    r.status = status;
    if (results != nullptr) std::memcpy(r.payload, results, m.size);
    if (m.callback) {
      lane.callbacks.emplace_back(std::move(m.callback), std::move(r));
    } else {
      lane.staged[m.out].push_back(std::move(r));
    }
  }

  // Collects finished slots (and, with a watchdog, tasks past the deadline). Returns how many
  // tasks ended.
  std::size_t collect(Lane& lane, Clock::time_point now) {
    std::size_t ended = 0;
    const bool watchdog = config_.task_deadline.count() > 0;
    // The lines a block wrote are cache misses (the GPU's write over PCIe invalidated them):
    // ask for all of them first, so that the misses overlap instead of queueing one by one.
    for (const std::uint32_t i : lane.in_flight) __builtin_prefetch(header(i), 0, 0);
    for (std::size_t k = 0; k < lane.in_flight.size();) {
      const std::uint32_t i = lane.in_flight[k];
      SlotMeta& m = lane.meta[i - lane.first];
      // acquire: pairs with the block's release store of FINISHED; status and results are
      // visible.
      if (state_of(i).load(std::memory_order_acquire) !=
          static_cast<std::uint32_t>(SlotState::finished)) {
        if (watchdog && now - m.loaded > config_.task_deadline) {
          // The block is still running it: deliver timed_out now, keep the slot out of use
          // until (if ever) the block finishes.
          stage(lane, m, TaskStatus::timed_out, nullptr);
          timed_out_.fetch_add(1, std::memory_order_relaxed);   // relaxed: statistic
          slots_lost_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
          lane.lost.push_back(i);
          lane.in_flight[k] = lane.in_flight.back();
          lane.in_flight.pop_back();
          ++ended;
        } else {
          ++k;
        }
        continue;
      }
      stage(lane, m, static_cast<TaskStatus>(header(i)->status),
            blocks_->slot(i) + kSlotHeaderBytes);
      m.idle_since = now;
      // relaxed: the block does not act on IDLE; the next READY store releases the new task.
      state_of(i).store(static_cast<std::uint32_t>(SlotState::idle), std::memory_order_relaxed);
      lane.free.push_back(i);
      lane.in_flight[k] = lane.in_flight.back();
      lane.in_flight.pop_back();
      ++ended;
    }
    if (!lane.lost.empty()) reclaim_lost(lane);
    return ended;
  }

  // A lost slot whose task did finish after all returns to service; its result is dropped
  // (the task was already delivered as timed_out: exactly once).
  void reclaim_lost(Lane& lane) {
    for (std::size_t k = 0; k < lane.lost.size();) {
      const std::uint32_t i = lane.lost[k];
      // acquire: pairs with the block's release store of FINISHED (nothing read after it but
      // the slot is reused: the block is done with it).
      if (state_of(i).load(std::memory_order_acquire) ==
          static_cast<std::uint32_t>(SlotState::finished)) {
        state_of(i).store(static_cast<std::uint32_t>(SlotState::idle), std::memory_order_relaxed);
        lane.free.push_back(i);
        lane.lost[k] = lane.lost.back();
        lane.lost.pop_back();
        slots_lost_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: statistic
      } else {
        ++k;
      }
    }
  }

  // Delivers what the lane staged: one lock per output queue, callbacks outside any lock.
  void flush(Lane& lane, std::size_t ended) {
    if (ended == 0) return;
    // Counted before anything is delivered: a consumer that got a record sees it counted.
    std::uint64_t failed = 0;
    for (const auto& st : lane.staged) {
      for (const Record& r : st) failed += r.status != TaskStatus::ok;
    }
    for (const auto& cr : lane.callbacks) failed += cr.second.status != TaskStatus::ok;
    // relaxed: statistics (the queue locks below order them before the records' delivery).
    completed_.fetch_add(ended, std::memory_order_relaxed);
    if (failed > 0) failed_.fetch_add(failed, std::memory_order_relaxed);
    for (std::size_t out = 0; out < lane.staged.size(); ++out) {
      auto& st = lane.staged[out];
      if (st.empty()) continue;
      Output& q = outputs_[out];
      bool wake = false;
      const bool many = st.size() > 1;
      {
        std::lock_guard<std::mutex> lock(q.mutex);
        q.ready.insert(q.ready.end(), std::make_move_iterator(st.begin()),
                       std::make_move_iterator(st.end()));
        // relaxed: a hint for spinning consumers, who then take the lock.
        q.available.store(q.ready.size(), std::memory_order_relaxed);
        wake = q.waiters > 0;
      }
      if (wake) {
        if (many) {
          q.cv.notify_all();
        } else {
          q.cv.notify_one();
        }
      }
      st.clear();
    }
    for (auto& [cb, r] : lane.callbacks) (*cb)(r);
    lane.callbacks.clear();
    finish_pending(ended);
  }

  void finish_pending(std::size_t n) {
    // acq_rel: the deliveries above happen before a synchronize() that sees zero (acquire in
    // synchronize); the lock makes the notify race-free against a waiter about to sleep.
    if (pending_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      std::lock_guard<std::mutex> lock(idle_mutex_);
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
    SlotMeta m;
    for (Entry& e : lane.batch) {
      m.tag = e.rec.tag;
      m.out = e.out;
      m.type = e.rec.type;
      m.size = e.rec.payload_size;
      m.callback = std::move(e.callback);
      stage(lane, m, TaskStatus::cancelled, e.rec.payload);
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
      {
        std::lock_guard<std::mutex> lock(in_mutex_);
        no_more_tasks_ = true;
      }
      blocks_failed_.store(true, std::memory_order_release);
      in_cv_.notify_all();  // sleeping lanes fail their slots too
    }
    std::size_t n = 0;
    for (std::uint32_t i : lane.in_flight) {
      stage(lane, lane.meta[i - lane.first], TaskStatus::device_failed, nullptr);
      ++n;
    }
    lane.in_flight.clear();
    flush(lane, n);
    cancel_queued(lane);
    wake_all_outputs();
    return true;
  }

  void lane_main(Lane& lane) {
    Clock::time_point last_activity = Clock::now();
    std::uint32_t quiet_rounds = 0;
    for (;;) {
      const Clock::time_point now = Clock::now();
      const std::size_t ended = collect(lane, now);
      flush(lane, ended);

      bool stopping = false;
      lane.batch.clear();
      // relaxed: hints (see push / shutdown); the lock in take_batch orders the entries.
      if (!lane.free.empty() && queued_.load(std::memory_order_relaxed) > 0) {
        stopping = take_batch(lane, lane.free.size());
      } else {
        // acquire: pairs with shutdown's release store.
        stopping = stop_flag_.load(std::memory_order_acquire);
      }
      if (stopping) {
        stop_lane(lane);
        return;
      }
      // The same for the lines about to be written (a block's polling read took them away).
      for (std::size_t k = 0; k < lane.batch.size(); ++k) {
        __builtin_prefetch(header(lane.free[lane.free.size() - 1 - k]), 1, 0);
      }
      for (Entry& e : lane.batch) {
        const std::uint32_t i = lane.free.back();
        lane.free.pop_back();
        load_slot(lane, i, e, now);
        lane.in_flight.push_back(i);
      }
      if (lane.ring) {
        blocks_->after_loads();
        lane.ring = false;
      }

      if (ended > 0 || !lane.batch.empty()) {
        last_activity = now;
        quiet_rounds = 0;
        continue;
      }
      // A quiet round. Now and then ask whether the blocks are still alive.
      if ((++quiet_rounds & 1023) == 0 || blocks_failed_.load(std::memory_order_relaxed)) {
        if (check_failure(lane)) return;
      }
      if (now - last_activity < config_.idle_spin) {
        for (int p = 0; p < 16; ++p) weft::cpu::detail::cpu_relax();
        continue;
      }
      if (lane.in_flight.empty()) {
        sleep_until_work();
      } else {
        // Long tasks in flight: poll every 20 us instead of spinning a core.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

  // Lost slots that come back meanwhile are reclaimed at the next collect.
  void sleep_until_work() {
    std::unique_lock<std::mutex> lock(in_mutex_);
    if (stopping_ || queued_count() > 0) return;
    scheduler_sleeps_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    ++sleeping_lanes_;
    in_cv_.wait(lock, [&] {
      // relaxed: set under in_mutex_ by check_failure before it notifies.
      return stopping_ || queued_count() > 0 || blocks_failed_.load(std::memory_order_relaxed);
    });
    --sleeping_lanes_;
  }

  // Shutdown: queued tasks are cancelled, exactly once each (whichever lane takes them);
  // tasks in slots run to the end or time out; then every slot of the lane gets EXIT.
  void stop_lane(Lane& lane) {
    cancel_batch(lane);
    cancel_queued(lane);
    for (std::uint32_t round = 0; !lane.in_flight.empty(); ++round) {
      const std::size_t ended = collect(lane, Clock::now());
      flush(lane, ended);
      if (ended == 0) {
        if ((round & 1023) == 1023 && check_failure(lane)) break;
        std::this_thread::yield();
      }
    }
    for (std::size_t i = lane.first; i < lane.end; ++i) {
      std::uint32_t expected = state_of(i).load(std::memory_order_relaxed);
      // release: nothing to publish but the state itself; the block acquires it. A lost
      // slot's block may be finishing right now: the CAS loop makes sure EXIT is the last
      // word (the block's own FINISHED store is a CAS from READY, so it sees EXIT and returns).
      while (!state_of(i).compare_exchange_weak(
          expected, static_cast<std::uint32_t>(SlotState::exit), std::memory_order_release,
          std::memory_order_relaxed)) {
      }
      blocks_->wake(i);
    }
    blocks_->after_loads();
  }

  std::unique_ptr<BlockRuntime> blocks_;
  QueueOrder order_;
  SchedulerConfig config_;

  mutable std::mutex in_mutex_;
  std::condition_variable in_cv_;  // lanes sleep here for work
  std::deque<Entry> fifo_;
  std::vector<Entry> heap_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t pushed_ = 0;
  std::size_t sleeping_lanes_ = 0;
  bool no_more_tasks_ = false;
  bool stopping_ = false;
  bool lanes_joined_ = false;
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> stop_flag_{false};

  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;        // synchronize() waits here for pending_ == 0
  std::atomic<std::uint64_t> pending_{0};  // pushed, not yet delivered

  std::vector<Output> outputs_;
  std::atomic<bool> no_more_or_failed_{false};
  mutable std::mutex failure_mutex_;
  std::string failure_;
  std::atomic<bool> blocks_failed_{false};

  std::vector<std::unique_ptr<Lane>> lanes_;

  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> timed_out_{0};
  std::atomic<std::uint64_t> slots_lost_{0};
  std::atomic<std::uint64_t> scheduler_sleeps_{0};
};

}  // namespace detail
}  // namespace weft::gpu
