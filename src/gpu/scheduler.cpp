// The scheduler as users' threads meet it: push, pop, synchronize, shutdown, statistics.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

#include "gpu/scheduler_impl.hpp"
#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/error.hpp"

namespace weft::gpu::detail {

namespace {

// Automatic lane count: one lane on the host backend (its blocks are threads already), else
// one per 64 blocks, at most 8 and at most half the hardware threads (each lane keeps a core
// busy while tasks flow), rounded down to a power of two so that every lane is home to as many
// input shards as the others and lane k's output shard (k mod 4) takes as many lanes' tasks as
// the others (docs/decisions/001-gpu-scheduler-lanes.md).
std::size_t lane_count(const SchedulerConfig& config, const BlockRuntime& blocks) {
  const std::size_t n = blocks.num_blocks();
  const std::size_t cores = std::max<std::size_t>(1, std::thread::hardware_concurrency() / 2);
  const std::size_t wanted = config.lanes != 0 ? config.lanes
                             : blocks.host_polls_counted()
                                 ? std::bit_floor(std::min<std::size_t>({8, (n + 63) / 64, cores}))
                                 : 1;
  return std::clamp<std::size_t>(wanted, 1, n);
}

}  // namespace

Scheduler::Impl::Impl(std::unique_ptr<BlockRuntime> blocks, std::size_t capacity,
                      std::size_t output_queues, QueueOrder order, SchedulerConfig config)
    : blocks_(std::move(blocks)),
      layout_(blocks_->rings()),
      capacity_(capacity),
      record_stride_(record_stride(capacity)),
      config_(config),
      watchdog_(config.task_deadline),
      input_(order, capacity, kInputShards),
      mailbox_(blocks_->mailbox(), config.lone_gap, capacity, watchdog_),
      graphs_(blocks_->graph_table(), record_stride_) {
  if (output_queues == 0) {
    throw InvalidArgument("weft::gpu::PoolOptions::output_queues must be >= 1 (got 0)");
  }
  if (capacity < 8 || capacity > 256) {  // the TaskRecord's bounds; push_fifo's buffer holds 256
    throw InvalidArgument("weft::gpu: payload capacity must be between 8 and 256 bytes (got " +
                          std::to_string(capacity) + ")");
  }
  const std::size_t n = blocks_->num_blocks();
  const std::size_t lanes = lane_count(config_, *blocks_);
  LaneRings::Options ring_options;
  ring_options.payload_capacity = capacity;
  ring_options.standby = config_.standby;
  ring_options.ring_after = config_.ring_after;
  ring_options.count_origin = config_.count_origin;
  lanes_.reserve(lanes);
  // Each lane owns whole units (SMs) where the blocks come a whole number per unit: a lane
  // spreads a batch over its own units only.
  const std::size_t grain = std::clamp<std::size_t>(blocks_->blocks_per_unit(), 1, n / lanes);
  const std::size_t grains = (n + grain - 1) / grain;
  auto lane_start = [&](std::size_t k) { return std::min(n, k * grains / lanes * grain); };
  for (std::size_t k = 0; k < lanes; ++k) {
    const std::size_t first = lane_start(k);
    const std::size_t count = (k + 1 == lanes ? n : lane_start(k + 1)) - first;
    auto lane = std::make_unique<Lane>(layout_, first, count, ring_options, watchdog_,
                                       output_queues, capacity, input_.entry_stride());
    lane->index = k;
    lane->cursor = k;  // lanes start their sweeps of the input shards at different shards
    lanes_.push_back(std::move(lane));
  }
  outputs_.reserve(output_queues);
  for (std::size_t q = 0; q < output_queues; ++q) {
    outputs_.push_back(std::make_unique<OutputQueue>(
        record_stride_, std::min(lanes, kOutputShardsMax), kInputShards));
  }
  if (config_.standby) {
    std::vector<std::size_t> standby;
    for (const auto& lane : lanes_) standby.push_back(lane->rings.first_block());
    blocks_->set_standby(standby);
  }
  start_blocks();
  for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { lane_main(*l); });
}

// Starts the blocks and tells each lane which of its blocks share a unit (the placement may
// differ from one launch to the next). Only while no lane runs or every lane is parked.
void Scheduler::Impl::start_blocks() {
  blocks_->start();
  const std::vector<std::uint32_t> units = blocks_->block_units();
  for (auto& lane : lanes_) {
    lane->rings.set_units(units.data() + lane->rings.first_block());
    // relaxed: read by prepare_graph as a hint (where a graph gets a fan-out task).
    if (lane == lanes_.front()) {
      first_lane_units_.store(lane->rings.num_units(), std::memory_order_relaxed);
    }
    // relaxed: published to the lanes by their start (thread creation or the resume's lock).
    lane->idle_units.store(lane->rings.idle_units(), std::memory_order_relaxed);
    lane->idle_blocks.store(lane->rings.idle_blocks(), std::memory_order_relaxed);
  }
}

// ---- checks and callbacks ----

void Scheduler::Impl::check_out(std::size_t out, const char* who) const {
  if (out >= outputs_.size()) {
    throw InvalidArgument(std::string("weft::gpu::Pool::") + who + ": output queue " +
                          std::to_string(out) + " does not exist (the pool has " +
                          std::to_string(outputs_.size()) + ")");
  }
}

void Scheduler::Impl::check_records(const unsigned char* records, std::size_t count,
                                    const char* who) const {
  for (std::size_t k = 0; k < count; ++k) {
    RecordHead r;
    std::memcpy(&r, records + k * record_stride_, sizeof r);
    if (r.payload_size > capacity_) {
      throw InvalidArgument(std::string("weft::gpu::Pool::") + who + ": payload_size " +
                            std::to_string(r.payload_size) + " exceeds the capacity " +
                            std::to_string(capacity_));
    }
  }
}

// A graph's task may not have the fan-out task's type id: a root of that id would run as the
// pool's own, empty. (Elsewhere the id is unknown to the blocks, like any other.)
void Scheduler::Impl::check_graph_types(const unsigned char* records, std::size_t count) const {
  for (std::size_t k = 0; k < count; ++k) {
    RecordHead r;
    std::memcpy(&r, records + k * record_stride_, sizeof r);
    if (r.type == kGraphFanOutTypeId) {
      throw InvalidArgument("weft::gpu::Pool::push_graph: task " + std::to_string(k) +
                            " has the type id the pool keeps for itself (kGraphFanOutTypeId, "
                            "0xFFFFFFFF)");
    }
  }
}

// Futures and push_then are rare: one mutex.
std::uint32_t Scheduler::Impl::add_callback(RecordCallback cb) {
  std::lock_guard<std::mutex> lock(callbacks_mutex_);
  std::uint32_t id;
  if (!free_callbacks_.empty()) {
    id = free_callbacks_.back();
    free_callbacks_.pop_back();
    callbacks_[id] = std::move(cb);
  } else {
    // Handles stay below kGraphTaskFlag (2^31 callbacks in flight at once: never in practice).
    if (callbacks_.size() + 1 >= kGraphTaskFlag) {
      throw InvalidState("weft::gpu::Pool: 2^31 callbacks or futures in flight at once");
    }
    id = static_cast<std::uint32_t>(callbacks_.size());
    callbacks_.push_back(std::move(cb));
  }
  return id + 1;
}

RecordCallback Scheduler::Impl::take_callback(std::uint32_t handle) {
  std::lock_guard<std::mutex> lock(callbacks_mutex_);
  RecordCallback cb = std::move(callbacks_[handle - 1]);
  callbacks_[handle - 1] = nullptr;
  free_callbacks_.push_back(handle - 1);
  return cb;
}

// ---- input ----

// Under the lock of input shard `shard` (or the heap's): counts tasks before they can be
// taken, so that delivered never passes accepted.
void Scheduler::Impl::count_accepted(std::size_t shard, std::size_t out, std::size_t count,
                                     std::uint32_t cb) {
  input_.count_accepted(shard, count);
  if (cb == 0) outputs_[out]->accepted(shard, count);
}

void Scheduler::Impl::push(const unsigned char* records, std::size_t count, std::size_t out,
                           int priority, RecordCallback callback) {
  check_out(out, "push");
  if (count == 0) return;
  if (callback && count != 1) {
    throw InvalidArgument("weft::gpu::Pool::push: a callback belongs to one task (got " +
                          std::to_string(count) + ")");
  }
  // A long FIFO batch is checked in push_fifo's copy pass (one read of the caller's records).
  if (!input_.fifo() || count <= kShortBatch) check_records(records, count);
  const std::uint32_t cb = callback ? add_callback(std::move(callback)) : 0;
  const std::size_t home = input_.home();
  bool refused = false;
  if (input_.fifo()) {
    const std::size_t queued = push_fifo(home, records, count, out, cb, refused);
    if (!refused && queued != 0) wake_lanes_after_push(home, queued, count);
  } else {
    refused = !input_.push_ranked(records, record_stride_, count, out, cb, priority,
                                  [&] { count_accepted(home, out, count, cb); });
    if (!refused) wake_lanes_after_push(home, 0, count);
  }
  if (refused) {
    if (cb != 0) (void)take_callback(cb);
    throw ShutDown("weft::gpu::Pool::push: no_more_tasks() was called; nothing more is accepted");
  }
}

namespace {
[[noreturn]] void throw_graph_refused() {
  throw ShutDown(
      "weft::gpu::Pool::push_graph: no_more_tasks() was called; nothing more is accepted");
}
}  // namespace

void Scheduler::Impl::check_table_holds(std::size_t tasks, std::size_t edges,
                                        const std::string& prefix) const {
  if (tasks > graphs_.capacity()) {
    throw InvalidArgument(prefix + std::to_string(tasks) +
                          " tasks, more than the graph table holds (PoolOptions::graph_capacity " +
                          std::to_string(graphs_.capacity()) + ")");
  }
  if (edges > graphs_.edge_capacity()) {
    throw InvalidArgument(
        prefix + std::to_string(edges) + " edges, more than the graph table holds (" +
        std::to_string(graphs_.edge_capacity()) + ": 8 a task of PoolOptions::graph_capacity)");
  }
}

bool Scheduler::Impl::runs_graphs() const noexcept {
  return graphs_.present() && config_.task_deadline.count() == 0;
}

void Scheduler::Impl::check_runs_graphs(const char* who) const {
  const std::string name = std::string("weft::gpu::Pool::") + who + ": ";
  if (!graphs_.present()) {
    throw InvalidArgument(name + "this pool runs no task graphs (" + blocks_->why_no_graphs() +
                          ")");
  }
  if (config_.task_deadline.count() > 0) {
    throw InvalidArgument(name +
                          "the watchdog (PoolOptions::task_deadline) does not cover graph tasks "
                          "yet; use a pool without a deadline");
  }
}

std::shared_ptr<const GraphLayout> Scheduler::Impl::prepare_graph(std::size_t count,
                                                                  std::span<const Edge> edges,
                                                                  std::span<const int> priorities,
                                                                  const char* who) const {
  check_runs_graphs(who);
  check_table_holds(count, edges.size(), std::string("weft::gpu::Pool::") + who + ": ");
  // A graph with more roots than the lane that loads them has units (SMs) gets a fan-out task
  // (GraphLayout::fan_out): its roots then start on whichever blocks are free, not in that
  // lane's rings only (docs/decisions/017-gpu-device-dependencies.md). With one lane, that
  // lane has every unit: no fan-out. relaxed (the count): start_blocks stores it while no
  // lane runs; a stale count only moves where the rule draws its line.
  FanOutRule fan_out;
  if (lanes_.size() > 1) {
    fan_out = {first_lane_units_.load(std::memory_order_relaxed), graphs_.edge_capacity()};
  }
  return std::make_shared<const GraphLayout>(
      lay_out_graph(count, edges, graphs_.capacity(), priorities, who, fan_out));
}

// A graph is checked and its records copied before anything is accepted (once its tasks are
// counted, adding it to the feed cannot fail); it is accepted under the calling thread's input
// shard lock, so that close() (which takes every shard lock) returns only once every accepted
// graph is in the feed, where shutdown finds it.
void Scheduler::Impl::push_graph(std::shared_ptr<const GraphLayout> layout,
                                 const unsigned char* records, std::size_t count, std::size_t out) {
  check_out(out, "push_graph");
  check_runs_graphs("push_graph");
  check_records(records, count, "push_graph");
  check_graph_types(records, count);
  const std::size_t tasks = layout == nullptr ? 0 : layout->tasks();
  if (count != tasks) {
    throw InvalidArgument("weft::gpu::Pool::push_graph: " + std::to_string(count) +
                          " records for a graph shape of " + std::to_string(tasks) +
                          " tasks (give one per task, in the shape's order)");
  }
  const bool fan_out = tasks > 0 && layout->fan_out != GraphLayout::kNoFanOut;
  const std::size_t fan_out_edges = fan_out ? layout->successor_start[layout->fan_out + 1] -
                                                  layout->successor_start[layout->fan_out]
                                            : 0;
  check_table_holds(tasks, tasks == 0 ? 0 : layout->successors.size() - fan_out_edges,
                    "weft::gpu::Pool::push_graph: a graph shape of ");
  if (fan_out &&
      (tasks + 1 > graphs_.capacity() || layout->successors.size() > graphs_.edge_capacity())) {
    // Prepared on a pool with room for its fan-out task: this one runs it without (the roots
    // through the rings), as a shape prepared here would be.
    layout = std::make_shared<const GraphLayout>(without_fan_out(*layout));
  }
  if (count == 0) {
    if (input_.closed()) throw_graph_refused();
    return;
  }
  GraphFeed::Node graph = graphs_.make_node(std::move(layout), records, out);
  const std::size_t home = input_.home();
  {
    auto& shard = input_.shard(home);
    std::lock_guard<AdaptiveMutex> lock(shard.mutex);
    if (input_.closed()) throw_graph_refused();
    count_accepted(home, out, count, 0);
    // seq_cst: pairs with sleep_until_work (the first lane counts itself asleep, then looks
    // at this count; this stores it, then looks at the count of sleepers).
    graph_open_.fetch_add(count, std::memory_order_seq_cst);
    graphs_.add(graph);
  }
  // seq_cst: see above. Every lane wakes: the first one must.
  if (sleeping_lanes_.load(std::memory_order_seq_cst) > 0) wake_one_lane(true);
}

// FIFO: queues the records in the calling thread's shard, or a lone task in the mailbox.
// Returns the shard's size after the push (0: nothing queued; the mailbox took it, or
// `refused`).
std::size_t Scheduler::Impl::push_fifo(std::size_t home, const unsigned char* records,
                                       std::size_t count, std::size_t out, std::uint32_t cb,
                                       bool& refused) {
  // A long batch is copied outside the lock and handed over as one chunk. The buffer is the
  // thread's own, swapped for an emptied one from the queue each time: a steady pusher neither
  // allocates nor touches fresh pages.
  const bool as_chunk = count > kShortBatch;
  thread_local RecordBuffer chunk;
  if (as_chunk) {
    if (chunk.stride() != input_.entry_stride()) chunk = RecordBuffer(input_.entry_stride());
    chunk.clear();
    chunk.reserve(count);
    for (std::size_t k = 0; k < count; ++k) {
      const unsigned char* r = records + k * record_stride_;
      std::uint32_t size;  // RecordHead::payload_size
      std::memcpy(&size, r + offsetof(RecordHead, payload_size), sizeof size);
      if (size > capacity_) check_records(r, 1);  // throws
      input_.write_entry(chunk.append(), r, out, 0);
    }
  }
  bool mailed = false;
  std::size_t queued = 0;
  {
    auto& shard = input_.shard(home);
    std::lock_guard<AdaptiveMutex> lock(shard.mutex);
    refused = input_.closed();
    // A single task with nothing of this thread's queued before it may take the mailbox (a
    // task of its own, collected by whoever waits for its queue; a future's or callback's by
    // the mailbox's lane). Under the shard lock, so that close() (which takes it) returns only
    // after the mailbox's request is complete.
    if (!refused && count == 1 && shard.queue.empty()) {
      mailed = mailbox_.try_push(records, out, cb, [&] { count_accepted(home, out, 1, cb); });
    }
    if (!refused && !mailed) {
      count_accepted(home, out, count, cb);
      if (as_chunk) {
        shard.queue.push_chunk(chunk);
      } else {
        alignas(16) unsigned char entry[kEntryPayloadOffset + 256];
        for (std::size_t k = 0; k < count; ++k) {
          input_.write_entry(entry, records + k * record_stride_, out, cb);
          shard.queue.push_one(entry);
        }
      }
      queued = shard.queue.size();
    }
  }
  if (refused) {
    chunk.release();  // a refused batch keeps no memory
    return 0;
  }
  if (mailed) {
    // A mailbox task wakes no lane unless a thread sleeps for its queue (or in synchronize):
    // the thread that waits for it collects it itself (docs/decisions/005-gpu-single-task-
    // paths.md). But a consumer already asleep on the queue (it registered, saw no mailbox
    // task, slept) must get it: then the lane delivers it. seq_cst: the waiter counts pair
    // with the mailbox's IN_FLIGHT, stored before (a sleeper registers, then looks at the
    // mailbox: OutputQueue::wait, synchronize); one side sees the other. A future's or
    // callback's task is the lane's to deliver: it wakes the lane if it sleeps.
    if (cb != 0 || outputs_[out]->has_waiters() ||
        sync_waiters_.load(std::memory_order_seq_cst) > 0) {
      wake_mailbox_lane(LoneTaskMailbox::kAnyQueue);
    }
    return 0;
  }
  // Stored after the unlock: lanes that see it find the lock free (stored under the lock, it
  // sent every spinning lane to try_lock a mutex the pusher still held, and the unlock then
  // waited for the mutex's line among them: docs/decisions/002-gpu-input-queue.md). The value
  // may be stale when it lands, but it is never 0: only a lane stores 0, under the lock, when
  // the shard is empty, and every push after that stores after it. A stale value only sends a
  // lane to take (it stores the true size under the lock). seq_cst: pairs with
  // sleep_until_work (a lane counts itself asleep, then looks at the shards; this push stores
  // the size, then looks at the count of sleepers).
  input_.shard(home).size.store(queued, std::memory_order_seq_cst);
  return queued;
}

// After tasks were queued: wakes a sleeping lane unless the shard's home lane takes them
// itself (the other lanes leave them to it, and it is awake with an idle unit for each).
void Scheduler::Impl::wake_lanes_after_push(std::size_t home, std::size_t queued,
                                            std::size_t count) {
  if (input_.fifo() && home_takes(home, queued)) return;
  // seq_cst: see push_fifo's size store.
  if (sleeping_lanes_.load(std::memory_order_seq_cst) > 0) wake_one_lane(count > 1);
}

void Scheduler::Impl::wake_one_lane(bool all) {
  { std::lock_guard<std::mutex> lock(in_mutex_); }  // the sleeper is in its wait, or sees us
  if (all) {
    in_cv_.notify_all();
    // A pause() waiting for the lanes to park learns of a shutdown or a failure (after which
    // some lane may never park) from this too.
    parked_cv_.notify_all();
  } else {
    in_cv_.notify_one();
  }
}

// A thread about to sleep until the mailbox's task (for queue `out`, or any) is delivered
// wakes the mailbox's lane if it sleeps (a push into the mailbox wakes it only for threads
// already asleep). seq_cst (napping): pairs with sleep_until_work (the lane sets napping,
// then looks at the mailbox's state; the push stored IN_FLIGHT before this looks at napping).
void Scheduler::Impl::wake_mailbox_lane(std::size_t out) {
  if (!mailbox_.holds_task_for(out)) return;
  if (!lanes_[0]->napping.load(std::memory_order_seq_cst)) return;
  wake_one_lane(true);  // the mailbox's lane must wake, not just any lane
}

// Refuses every later push; returns once every push that was accepted is in a queue.
void Scheduler::Impl::close() { input_.close(); }

// ---- output ----

void Scheduler::Impl::pop(std::size_t out, unsigned char* record) {
  check_out(out, "pop");
  OutputQueue& q = *outputs_[out];
  const std::size_t home = q.home();
  // The queue before the mailbox (here and in pop_batch): a consumer woken by a delivery's
  // notify_one must take that record, or another consumer may sleep on beside it
  // (spec/mailbox_wake.pml, mutant 4).
  take_waiting(q, out, "pop", [&] {
    return q.try_take_one(record, home) || mailbox_take_for(out, record) ? std::size_t{1} : 0;
  });
}

bool Scheduler::Impl::try_pop(unsigned char* record, std::size_t out) {
  check_out(out, "try_pop");
  OutputQueue& q = *outputs_[out];
  if (!q.try_take_one(record, q.home()) && !mailbox_take_for(out, record)) {
    // A thread that polls with try_pop never sleeps, so nothing else would wake the mailbox's
    // lane, which is what notices a task past the deadline or a dead kernel.
    if (mailbox_.held_longer(out, Clock::now(), kMailboxNudgeAfter)) wake_mailbox_lane(out);
    return false;
  }
  after_take(q);
  return true;
}

std::size_t Scheduler::Impl::pop_batch(unsigned char* records, std::size_t max, std::size_t out) {
  check_out(out, "pop_batch");
  if (max == 0) return 0;
  OutputQueue& q = *outputs_[out];
  const std::size_t home = q.home();
  return take_waiting(q, out, "pop_batch", [&] {
    const std::size_t n = q.take_into(records, max, home);
    return n != 0 ? n : mailbox_take_for(out, records) ? std::size_t{1} : 0;
  });
}

// A consumer of queue `out` collects the mailbox's task itself: no lane, no queue.
bool Scheduler::Impl::mailbox_take_for(std::size_t out, unsigned char* record) {
  if (!mailbox_.take_for(out, record)) return false;
  // Popped before delivered: a synchronize() that returns sees unfinished() without it.
  outputs_[out]->took_directly(1);
  mailbox_.count_delivered();
  wake_sync_waiters();
  return true;
}

// No task will ever reach q: no more tasks (or the blocks failed) and none unfinished.
bool Scheduler::Impl::hopeless(const OutputQueue& q) const {
  // acquire: pairs with wake_all_outputs' release store (the failure and the close are
  // visible after it, so the accepted counts are final).
  return no_more_or_failed_.load(std::memory_order_acquire) && q.unfinished() == 0;
}

void Scheduler::Impl::throw_hopeless(std::size_t out, const char* who) const {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    why = failure_;
  }
  throw ShutDown(std::string("weft::gpu::Pool::") + who + ": output queue " + std::to_string(out) +
                 " will never receive a task (no more tasks, none unfinished" +
                 (why.empty() ? std::string(")") : "; " + why + ")"));
}

// Runs take() (which returns how many records it took) until it takes some, or throws ShutDown
// when nothing can ever come. A consumer spins up to consumer_spin first: a futex wake-up costs
// more than most tasks take. After a sleep it does not spin again (going back to spinning
// after losing a record to another consumer starved the threads that make the records on an
// oversubscribed machine).
template <class Take>
std::size_t Scheduler::Impl::take_waiting(OutputQueue& q, std::size_t out, const char* who,
                                          Take take) {
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

void Scheduler::Impl::spin_for_output(const OutputQueue& q, std::size_t out,
                                      Clock::time_point until) {
  if (config_.consumer_spin.count() <= 0) return;
  for (std::uint32_t i = 1;; ++i) {
    if (q.any_available() || mailbox_.ready_for(out)) return;
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

// Records left q. When that was the last one anybody can ever get, the consumers sleeping on
// q learn it now instead of waiting forever.
void Scheduler::Impl::after_take(OutputQueue& q) {
  // acquire: pairs with wake_all_outputs' release store.
  if (no_more_or_failed_.load(std::memory_order_acquire) && q.has_waiters() &&
      q.unfinished() == 0) {
    q.wake_all();
  }
}

void Scheduler::Impl::wake_all_outputs() {
  // release: pairs with the acquire loads in hopeless/spin_for_output/after_take.
  no_more_or_failed_.store(true, std::memory_order_release);
  for (auto& q : outputs_) q->wake_all();  // under each queue's wait lock: none misses it
}

// ---- synchronize and shutdown ----

// Tasks accepted and not yet delivered: sums of per-lane and per-shard counters, each read
// once, delivered ones first. Every counter only grows and every task is counted accepted
// before it can be delivered, so the difference is never negative, and zero only if, when the
// first accepted count was read, every task accepted by then had been delivered.
std::uint64_t Scheduler::Impl::pending() const {
  std::uint64_t delivered = 0;
  // seq_cst: pairs with finish_pending (see synchronize).
  for (const auto& lane : lanes_) delivered += lane->delivered.load(std::memory_order_seq_cst);
  delivered += mailbox_.delivered();  // seq_cst, as the lanes'
  return input_.accepted() - delivered;
}

void Scheduler::Impl::synchronize() {
  std::unique_lock<std::mutex> lock(idle_mutex_);
  // seq_cst: pairs with finish_pending (it counts deliveries, then looks for waiters; this
  // counts itself a waiter, then looks at the deliveries).
  sync_waiters_.fetch_add(1, std::memory_order_seq_cst);
  wake_mailbox_lane(LoneTaskMailbox::kAnyQueue);  // a mailbox task is delivered by its lane
  // A pause requested (or in force) takes no more input: what is queued then waits for
  // resume(), so the wait ends there instead. seq_cst: pause() stores the request, then
  // notifies idle_cv_ under idle_mutex_.
  // The count that ended the wait decides: read again afterwards, it may count tasks that other
  // threads pushed since, and a synchronize() that saw zero would throw for them.
  std::uint64_t left = 0;
  idle_cv_.wait(lock, [&] {
    left = pending();
    return left == 0 || pause_requested_.load(std::memory_order_seq_cst);
  });
  sync_waiters_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a hint downward
  lock.unlock();
  if (left == 0) return;
  throw InvalidState("weft::gpu::Pool::synchronize: the pool is paused (or pausing) with " +
                     std::to_string(left) + " task(s) not yet delivered; they run after resume()");
}

// After a delivery was counted (seq_cst): wakes threads in synchronize(), which count
// themselves waiters and then look at the deliveries; one side sees the other's write.
void Scheduler::Impl::wake_sync_waiters() {
  if (sync_waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(idle_mutex_); }  // the waiter is in its wait
    idle_cv_.notify_all();
  }
}

void Scheduler::Impl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(in_mutex_);
    if (stopping_ && lanes_joined_) return;
    stopping_ = true;
  }
  close();  // every push from now on is refused; every accepted one is in a queue
  // release: pairs with the lanes' acquire loads; a lane that sees it also sees the close (and
  // so finds every accepted task when it cancels what is queued).
  stop_flag_.store(true, std::memory_order_release);
  wake_one_lane(true);
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  {
    std::lock_guard<std::mutex> lock(in_mutex_);
    lanes_joined_ = true;
  }
  if (blocks_) {
    std::size_t lost = 0;
    for (auto& lane : lanes_) lost += lane->rings.lost_slots();
    if (mailbox_.close_for_shutdown()) ++lost;
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

PoolStats Scheduler::Impl::stats() const {
  PoolStats s;
  s.pushed = input_.accepted();
  // relaxed: statistics.
  for (const auto& lane : lanes_) {
    s.completed += lane->completed.load(std::memory_order_relaxed);
    s.failed += lane->failed.load(std::memory_order_relaxed);
  }
  s.completed += mailbox_.delivered();
  s.failed += mailbox_.failed();
  s.mailbox_tasks = mailbox_.tasks();
  s.mailbox_taken = mailbox_.taken();
  s.timed_out = watchdog_.timed_out();
  s.scheduler_sleeps = scheduler_sleeps_.load(std::memory_order_relaxed);
  s.slots_lost = watchdog_.slots_lost();
  if (blocks_) s.host_polls = blocks_->host_polls();
  return s;
}

// ---- Scheduler ----

Scheduler::Scheduler(std::unique_ptr<BlockRuntime> blocks, std::size_t payload_capacity,
                     std::size_t output_queues, QueueOrder order, SchedulerConfig config)
    : impl_(std::make_unique<Impl>(std::move(blocks), payload_capacity, output_queues, order,
                                   config)) {}
Scheduler::~Scheduler() = default;

void Scheduler::push(const void* records, std::size_t count, std::size_t out, int priority,
                     RecordCallback callback) {
  impl_->push(static_cast<const unsigned char*>(records), count, out, priority,
              std::move(callback));
}
GraphShape Scheduler::prepare_graph(std::size_t count, const Edge* edges, std::size_t edge_count,
                                    const int* priorities, std::size_t priority_count,
                                    const char* who) const {
  std::shared_ptr<const GraphLayout> layout =
      impl_->prepare_graph(count, std::span<const Edge>(edges, edge_count),
                           std::span<const int>(priorities, priority_count), who);
  return GraphShape(std::move(layout), count, edge_count);
}
void Scheduler::push_graph(const GraphShape& shape, const void* records, std::size_t count,
                           std::size_t out) {
  impl_->push_graph(shape.layout_, static_cast<const unsigned char*>(records), count, out);
}
void Scheduler::pop(std::size_t out, void* record) {
  impl_->pop(out, static_cast<unsigned char*>(record));
}
bool Scheduler::try_pop(void* record, std::size_t out) {
  return impl_->try_pop(static_cast<unsigned char*>(record), out);
}
std::size_t Scheduler::pop_batch(void* records, std::size_t max, std::size_t out) {
  return impl_->pop_batch(static_cast<unsigned char*>(records), max, out);
}
std::size_t Scheduler::unfinished(std::size_t out) const {
  impl_->check_out(out, "unfinished");
  return impl_->outputs_[out]->unfinished();
}
void Scheduler::no_more_tasks() {
  impl_->close();
  impl_->wake_all_outputs();
}
void Scheduler::synchronize() { impl_->synchronize(); }
void Scheduler::pause() { impl_->pause(); }
void Scheduler::resume() { impl_->resume(); }
bool Scheduler::paused() const { return impl_->paused(); }
void Scheduler::shutdown() { impl_->shutdown(); }
PoolStats Scheduler::stats() const { return impl_->stats(); }
std::string Scheduler::describe() const { return impl_->blocks_ ? impl_->blocks_->describe() : ""; }
std::size_t Scheduler::num_blocks() const {
  return impl_->blocks_ ? impl_->blocks_->num_blocks() : 0;
}
std::size_t Scheduler::ring_depth() const { return impl_->layout_.depth; }
std::size_t Scheduler::num_slots() const { return num_blocks() * ring_depth(); }
std::size_t Scheduler::num_lanes() const { return impl_->lanes_.size(); }
std::size_t Scheduler::graph_capacity() const {
  return impl_->runs_graphs() ? impl_->graphs_.capacity() : 0;
}

}  // namespace weft::gpu::detail
