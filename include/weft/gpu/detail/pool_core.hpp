// weft/gpu/detail/pool_core.hpp - the host half of the pool: input queue, scheduler thread,
// slot bookkeeping and output queues (seed 000 §3.2). Independent of where blocks run.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

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
  std::uint64_t scheduler_sleeps = 0;
};

namespace detail {

template <std::size_t Capacity>
class PoolCore {
 public:
  using Record = TaskRecord<Capacity>;
  using Callback = std::function<void(Record&)>;

  PoolCore(std::unique_ptr<BlockRuntime> blocks, std::size_t output_queues, QueueOrder order)
      : blocks_(std::move(blocks)), order_(order), outputs_(output_queues) {
    if (output_queues == 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::output_queues must be >= 1 (got 0)");
    }
    const std::size_t n = blocks_->num_slots();
    in_slot_.resize(n);
    free_slots_.reserve(n);
    for (std::size_t i = n; i-- > 0;) free_slots_.push_back(i);
    blocks_->start();
    scheduler_ = std::thread([this] { scheduler_main(); });
  }

  ~PoolCore() { shutdown(); }

  // ---- input ----
  void push(const Record* records, std::size_t count, std::size_t out, int priority,
            Callback callback = nullptr) {
    check_out(out, "push");
    for (std::size_t k = 0; k < count; ++k) check_record(records[k]);
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      if (no_more_tasks_) {
        throw ShutDown(
            "weft::gpu::Pool::push: no_more_tasks() was called; nothing more is accepted");
      }
      for (std::size_t k = 0; k < count; ++k) {
        Entry e{records[k], static_cast<std::uint32_t>(out), priority, next_seq_++, callback};
        if (order_ == QueueOrder::fifo) {
          fifo_.push_back(std::move(e));
        } else {
          heap_.push_back(std::move(e));
          std::push_heap(heap_.begin(), heap_.end(), EntryLess{});
        }
      }
      if (!callback) outputs_[out].unfinished.fetch_add(count, std::memory_order_relaxed);
      pending_ += count;
      pushed_ += count;
    }
    in_cv_.notify_one();
  }

  // ---- output ----
  Record pop(std::size_t out) {
    check_out(out, "pop");
    Output& q = outputs_[out];
    std::unique_lock<std::mutex> lock(q.mutex);
    q.cv.wait(lock, [&] { return !q.ready.empty() || hopeless(q); });
    if (q.ready.empty()) {
      throw ShutDown("weft::gpu::Pool::pop: output queue " + std::to_string(out) +
                     " will never receive a task (no more tasks, none unfinished" +
                     (failure_.empty() ? std::string(")") : "; " + failure_ + ")"));
    }
    Record r = std::move(q.ready.front());
    q.ready.pop_front();
    taken(q, 1);
    return r;
  }

  bool try_pop(Record& r, std::size_t out) {
    check_out(out, "try_pop");
    Output& q = outputs_[out];
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
    std::unique_lock<std::mutex> lock(q.mutex);
    q.cv.wait(lock, [&] { return !q.ready.empty() || hopeless(q); });
    if (q.ready.empty()) {
      throw ShutDown("weft::gpu::Pool::pop_batch: output queue " + std::to_string(out) +
                     " will never receive a task (no more tasks, none unfinished)");
    }
    const std::size_t n = std::min(into.size(), q.ready.size());
    for (std::size_t k = 0; k < n; ++k) {
      into[k] = std::move(q.ready.front());
      q.ready.pop_front();
    }
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
    in_cv_.notify_all();
    wake_all_outputs();
  }

  /// Waits until every task pushed so far has been delivered.
  void synchronize() {
    std::unique_lock<std::mutex> lock(in_mutex_);
    idle_cv_.wait(lock, [&] { return pending_ == 0; });
  }

  /// Stops the pool: tasks not yet in a slot are delivered as cancelled, tasks in slots finish,
  /// the blocks exit and the scheduler joins. Idempotent.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      if (stopping_) {
        if (!scheduler_.joinable()) return;
      }
      stopping_ = true;
      no_more_tasks_ = true;
    }
    in_cv_.notify_all();
    if (scheduler_.joinable()) scheduler_.join();
    blocks_->join();
    wake_all_outputs();
  }

  [[nodiscard]] PoolStats stats() const {
    PoolStats s;
    std::lock_guard<std::mutex> lock(in_mutex_);
    s.pushed = pushed_;
    s.completed = completed_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.scheduler_sleeps = scheduler_sleeps_.load(std::memory_order_relaxed);
    return s;
  }

  [[nodiscard]] std::string describe() const { return blocks_->describe(); }
  [[nodiscard]] std::size_t num_slots() const { return blocks_->num_slots(); }

 private:
  struct Entry {
    Record rec;
    std::uint32_t out;
    int priority;
    std::uint64_t seq;
    Callback callback;  // delivery to a callback/future instead of an output queue
  };
  struct EntryLess {  // max-heap: higher priority first, then lower sequence (FIFO)
    bool operator()(const Entry& a, const Entry& b) const {
      return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
    }
  };
  struct Output {
    mutable std::mutex mutex;
    std::condition_variable cv;
    std::deque<Record> ready;
    std::atomic<std::size_t> unfinished{0};  // pushed to this queue and not yet popped
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
  // Under q.mutex: no task will ever reach q.
  bool hopeless(const Output& q) const {
    // relaxed: read under the queue's lock after the flag's writer notified it.
    return no_more_or_failed_.load(std::memory_order_acquire) &&
           q.unfinished.load(std::memory_order_relaxed) == 0;
  }
  // Under q.mutex: n records left queue q. When that was the last one anybody can ever get,
  // the other consumers waiting on q learn it now instead of waiting forever.
  void taken(Output& q, std::size_t n) {
    // relaxed: the count is read under q.mutex by waiters (hopeless) and as a statistic.
    const std::size_t left = q.unfinished.fetch_sub(n, std::memory_order_relaxed) - n;
    if (left == 0 && no_more_or_failed_.load(std::memory_order_acquire)) q.cv.notify_all();
  }

  void wake_all_outputs() {
    no_more_or_failed_.store(true, std::memory_order_release);
    for (Output& q : outputs_) {
      std::lock_guard<std::mutex> lock(q.mutex);  // no waiter misses the flag
      q.cv.notify_all();
    }
  }

  bool take_entry(Entry& e) {  // under in_mutex_
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

  SlotHeader* header(std::size_t i) { return reinterpret_cast<SlotHeader*>(blocks_->slot(i)); }

  void load_slot(std::size_t i, Entry&& e) {
    SlotHeader* h = header(i);
    h->type = e.rec.type;
    h->payload_size = e.rec.payload_size;
    h->status = 0;
    std::memcpy(blocks_->slot(i) + kSlotHeaderBytes, e.rec.payload, e.rec.payload_size);
    in_slot_[i] = std::move(e);
    // release: type, size and payload are visible to the block's acquire load of READY.
    std::atomic_ref<std::uint32_t>(h->state).store(static_cast<std::uint32_t>(SlotState::ready),
                                                   std::memory_order_release);
    blocks_->wake(i);
  }

  // Returns how many slots finished.
  std::size_t collect(std::vector<std::size_t>& in_flight) {
    std::size_t done = 0;
    for (std::size_t k = 0; k < in_flight.size();) {
      const std::size_t i = in_flight[k];
      SlotHeader* h = header(i);
      // acquire: pairs with the block's release store of FINISHED; status and results are
      // visible.
      if (std::atomic_ref<std::uint32_t>(h->state).load(std::memory_order_acquire) !=
          static_cast<std::uint32_t>(SlotState::finished)) {
        ++k;
        continue;
      }
      Entry& e = in_slot_[i];
      e.rec.status = static_cast<TaskStatus>(h->status);
      std::memcpy(e.rec.payload, blocks_->slot(i) + kSlotHeaderBytes, e.rec.payload_size);
      // relaxed: the block does not act on IDLE; the next READY store releases the new task.
      std::atomic_ref<std::uint32_t>(h->state).store(static_cast<std::uint32_t>(SlotState::idle),
                                                     std::memory_order_relaxed);
      deliver(std::move(e));
      free_slots_.push_back(i);
      in_flight[k] = in_flight.back();
      in_flight.pop_back();
      ++done;
    }
    return done;
  }

  void deliver(Entry&& e) {
    completed_.fetch_add(1, std::memory_order_relaxed);
    if (e.rec.status != TaskStatus::ok) failed_.fetch_add(1, std::memory_order_relaxed);
    if (e.callback) {
      Callback cb = std::move(e.callback);
      cb(e.rec);
      return;
    }
    Output& q = outputs_[e.out];
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      q.ready.push_back(std::move(e.rec));
    }
    q.cv.notify_one();
  }

  void finish_pending(std::size_t n) {
    std::lock_guard<std::mutex> lock(in_mutex_);
    pending_ -= n;
    if (pending_ == 0) idle_cv_.notify_all();
  }

  // Delivers every task still in the input queue as cancelled (deliveries outside the lock:
  // a callback may push). Returns how many.
  std::size_t cancel_queued() {
    std::size_t n = 0;
    std::unique_lock<std::mutex> lock(in_mutex_);
    Entry e;
    while (take_entry(e)) {
      e.rec.status = TaskStatus::cancelled;
      lock.unlock();
      deliver(std::move(e));
      lock.lock();
      ++n;
    }
    return n;
  }

  // When the blocks died (a device task trapped or faulted: the kernel is gone), every task
  // in flight is delivered as device_failed, every queued one as cancelled, and waiters learn
  // the cause; the scheduler then stops. Returns whether that happened.
  bool fail_if_blocks_died(std::vector<std::size_t>& in_flight) {
    std::string why = blocks_->failure();
    if (why.empty()) return false;
    std::size_t n = 0;
    for (std::size_t i : in_flight) {
      Entry& e = in_slot_[i];
      e.rec.status = TaskStatus::device_failed;
      deliver(std::move(e));
      ++n;
    }
    in_flight.clear();
    {
      std::lock_guard<std::mutex> lock(in_mutex_);
      failure_ = why;
      no_more_tasks_ = true;
    }
    n += cancel_queued();
    finish_pending(n);
    wake_all_outputs();
    return true;
  }

  void scheduler_main() {
    std::vector<std::size_t> in_flight;
    in_flight.reserve(in_slot_.size());
    std::vector<Entry> batch;
    int idle_rounds = 0;
    for (;;) {
      const std::size_t done = collect(in_flight);
      if (done > 0) finish_pending(done);
      bool stopping = false;
      batch.clear();
      {
        std::unique_lock<std::mutex> lock(in_mutex_);
        if (in_flight.empty() && done == 0 && fifo_.empty() && heap_.empty() && !stopping_) {
          // Nothing anywhere: sleep until a push or a shutdown.
          scheduler_sleeps_.fetch_add(1, std::memory_order_relaxed);
          in_cv_.wait(lock, [&] { return stopping_ || !fifo_.empty() || !heap_.empty(); });
        }
        stopping = stopping_;
        Entry e;
        while (batch.size() < free_slots_.size() && take_entry(e)) batch.push_back(std::move(e));
      }
      if (stopping) {
        // Tasks still queued are cancelled, exactly once each; tasks in slots run to the end.
        std::size_t cancelled = 0;
        for (Entry& e : batch) {
          e.rec.status = TaskStatus::cancelled;
          deliver(std::move(e));
          ++cancelled;
        }
        cancelled += cancel_queued();
        if (cancelled > 0) finish_pending(cancelled);
        for (int round = 0; !in_flight.empty(); ++round) {
          const std::size_t d = collect(in_flight);
          if (d > 0) {
            finish_pending(d);
          } else {
            if ((round & 63) == 63 && fail_if_blocks_died(in_flight)) return;
            std::this_thread::yield();
          }
        }
        for (std::size_t i = 0; i < in_slot_.size(); ++i) {
          // release: nothing to publish but the state itself; the block acquires it.
          std::atomic_ref<std::uint32_t>(header(i)->state)
              .store(static_cast<std::uint32_t>(SlotState::exit), std::memory_order_release);
          blocks_->wake(i);
        }
        return;
      }
      for (Entry& e : batch) {
        const std::size_t i = free_slots_.back();
        free_slots_.pop_back();
        load_slot(i, std::move(e));
        in_flight.push_back(i);
      }
      if (done == 0 && batch.empty()) {
        // Tasks in flight, nothing finished: back off (spin, then yield, then short sleeps),
        // and now and then ask whether the blocks are still alive.
        if ((idle_rounds & 63) == 63 && fail_if_blocks_died(in_flight)) return;
        if (++idle_rounds < 64) {
          for (int p = 0; p < 32; ++p) std::atomic_signal_fence(std::memory_order_seq_cst);
        } else if (idle_rounds < 256) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      } else {
        idle_rounds = 0;
      }
    }
  }

  std::unique_ptr<BlockRuntime> blocks_;
  QueueOrder order_;

  mutable std::mutex in_mutex_;
  std::condition_variable in_cv_;    // the scheduler waits here for work
  std::condition_variable idle_cv_;  // synchronize() waits here for pending_ == 0
  std::deque<Entry> fifo_;
  std::vector<Entry> heap_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t pending_ = 0;  // pushed, not yet delivered
  std::uint64_t pushed_ = 0;
  bool no_more_tasks_ = false;
  bool stopping_ = false;

  std::vector<Output> outputs_;
  std::atomic<bool> no_more_or_failed_{false};
  std::string failure_;

  // Scheduler-only state.
  std::vector<Entry> in_slot_;
  std::vector<std::size_t> free_slots_;
  std::thread scheduler_;

  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> scheduler_sleeps_{0};
};

}  // namespace detail
}  // namespace weft::gpu
