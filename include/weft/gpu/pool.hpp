// weft/gpu/pool.hpp - the GPU thread pool: resident blocks take fine-grained tasks from slots
// that CPU scheduler threads fill from an input queue; finished tasks go to one of several
// output queues (docs/gpu.md, docs/architecture.md).
//
//   using Tasks = weft::gpu::TaskTypes<Saxpy>;
//   weft::gpu::Pool<Tasks, 64> pool;                       // host backend: runs anywhere
//   pool.push<Saxpy>({2.0f, x, y, n}, /*out=*/0);
//   auto done = pool.pop(0);                               // blocks; done.status says how it ended
//
// The published pool's API maps as: run() = the constructor, push_task =
// push/push_record/push_batch, pop_finish = pop/pop_batch, try_pop_finish = try_pop,
// get_unfinished_count = unfinished, set_no_more_task_flag = no_more_tasks, synchronize =
// synchronize; submit() adds a future and push_then() a callback for one task.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/pool_core.hpp"
#include "weft/gpu/device_program.hpp"
#include "weft/gpu/graph_shape.hpp"
#include "weft/gpu/record.hpp"
#include "weft/gpu/scheduler_observer.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

enum class Backend : std::uint8_t {
  host,    // blocks are host threads (the CPU path; every machine)
  device,  // resident kernels on GPUs (needs a DeviceProgram from a CUDA translation unit)
};

/// The device backend's ring depth when PoolOptions::ring_depth is 0
/// (docs/decisions/003-gpu-ring-loading.md).
inline constexpr std::size_t kDefaultDeviceRingDepth = 8;

struct PoolOptions {
  Backend backend = Backend::host;
  /// Device backend: the resident kernel of the pool's task types, from
  /// weft::gpu::device_program<Types, Capacity>() in a CUDA translation unit.
  DeviceProgram program{};
  /// Device backend: GPUs to use (empty: every visible GPU); they form one pool.
  std::vector<int> devices{};
  /// Device backend: resident blocks per SM (0: as many as occupancy allows).
  int blocks_per_sm = 0;
  /// Device backend: task threads per block (a multiple of 32, at most 960); each block has
  /// two more warps, which load its ring and publish its results (docs/gpu.md).
  int threads_per_block = 128;
  /// Host backend: number of emulated blocks (threads).
  std::size_t host_blocks = 4;
  /// Output queues tasks can be sent to (indices 0 .. output_queues-1).
  std::size_t output_queues = 1;
  /// Input queue order: FIFO (per pushing thread: the queue is sharded by thread, and lanes
  /// take from the shards round robin; strict with one scheduler lane, while with several,
  /// tasks of one thread taken by two lanes at once may enter slots in either order), or by
  /// priority (higher first; FIFO among equals; one heap: strict with one scheduler lane; with
  /// several, each lane takes the best of what is queued).
  QueueOrder input_order = QueueOrder::fifo;
  /// Scheduler threads ("lanes"), each owning a contiguous share of the blocks (0: one per 64
  /// blocks, at most 8 and at most half the hardware threads, rounded down to a power of two,
  /// on the device backend; 1 on the host backend). Each keeps a core busy while tasks flow (and
  /// for scheduler_idle_spin after): more lanes move more tasks per second; fewer leave more cores
  /// to other work.
  std::size_t scheduler_lanes = 0;
  /// A lane keeps polling until it has moved no task for this long, then sleeps until a push
  /// needs it (latency against busy cores; docs/gpu.md "The scheduler and the queues").
  std::chrono::microseconds scheduler_idle_spin{1000};
  /// A consumer in pop()/pop_batch() spins this long before it sleeps on the queue.
  std::chrono::microseconds consumer_spin{50};
  /// Watchdog: a task in a slot longer than this is delivered as TaskStatus::timed_out, and
  /// its slot is kept out of use until the block finishes it (0: no watchdog).
  std::chrono::microseconds task_deadline{0};
  /// Device backend: a block idle this long stops polling its slot over PCIe and sleeps in
  /// deep idle (woken through the doorbell).
  std::chrono::microseconds warm_idle{100};
  /// Slots per block, 1..32 (0: 8 on the device backend, 1 on the host backend). A block reads
  /// every task waiting in its ring in one pass and runs them in order, so a deeper ring moves
  /// more tasks per read of host memory and keeps a block busy between tasks; but a task
  /// queued behind a long one waits for it (the scheduler queues a second task in a ring only
  /// when no block of its lane has a free ring, or when more tasks are queued than the pool
  /// has free slots, so that every slot gets one anyway). docs/gpu.md "Rings".
  std::size_t ring_depth = 0;
  /// Device backend: the first block of each scheduler lane is a standby block that never goes
  /// into deep idle (it polls its ring every ~1 us, about 0.1% of the pinned bandwidth each),
  /// and gets a task before any other block of its lane while it is free: a task loaded on an
  /// idle pool starts without waiting for the doorbell (docs/gpu.md "Idle"). The host backend
  /// has no deep idle; there only the preference for each lane's first block applies.
  bool standby_blocks = true;
  /// The lone-task mailbox (docs/gpu.md "The mailbox"; unset: on for the device backend, off
  /// for the host backend). A lone single push (see lone_task_gap) of a task with at most 120
  /// bytes of payload, into a FIFO pool, while the mailbox is free, goes into a record of its
  /// own that one more block polls continuously, and a consumer of its output queue collects
  /// the result itself, without a scheduler lane (a future's or callback's task is delivered
  /// by the first lane as soon as it ends). On the device backend the server is the last
  /// GPU's last block (num_blocks() counts the others); on the host backend it is one more
  /// thread, so a pool of N host blocks then runs up to N + 1 tasks at once. It costs the
  /// server block's continuous polls of host memory (docs/decisions/005-gpu-single-task-
  /// paths.md).
  std::optional<bool> mailbox{};
  /// A single push is a lone task, which may take the mailbox, when its thread pushed nothing
  /// for this long: a thread that waits for each result pushes less often than this; threads
  /// that stream single tasks push more often and leave the mailbox alone.
  std::chrono::nanoseconds lone_task_gap{std::chrono::microseconds(2)};
  /// Watches the scheduler lanes' rounds (profiling, tracing); null: nobody. Must outlive the
  /// pool; called from the lanes' threads.
  SchedulerObserver* observer = nullptr;
  /// The most tasks one graph given to push_graph() may have (the blocks' graph table: a few
  /// hundred bytes a task, on the device backend in device and pinned memory, with room for 8
  /// edges a task on average; 0: the pool runs no graphs; at most 2^24). Unset: 1024 on the
  /// host backend, 0 on the device backend (whose blocks then never look at a table: its
  /// cost to the pool's other tasks is not yet measured). A device pool over several GPUs does
  /// not run graphs yet.
  std::optional<std::size_t> graph_capacity{};
};

template <class Types, std::size_t Capacity = 64>
class Pool {
  static_assert(Types::kMaxPayload <= Capacity,
                "weft::gpu::Pool: a registered task type's Payload exceeds the payload capacity");

 public:
  using Record = TaskRecord<Capacity>;
  static constexpr std::size_t kCapacity = Capacity;

  /// Starts the blocks and the scheduler. Throws weft::InvalidArgument for bad options.
  explicit Pool(PoolOptions options = {})
      : core_(make_blocks(options), options.output_queues, options.input_order,
              scheduler_config(options)) {}
  /// Tasks still queued are delivered as cancelled; tasks in slots finish; then everything
  /// stops. Consumers blocked in pop() get weft::ShutDown once their queue is drained.
  ~Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Queues one task of type T for output queue `out`. Any thread. Throws weft::ShutDown after
  /// no_more_tasks(), weft::InvalidArgument for a bad queue index.
  template <GpuTaskType T>
  void push(const typename T::Payload& payload, std::size_t out = 0, std::uint64_t tag = 0,
            int priority = 0) {
    const Record r = Record::template make<T>(payload, tag);
    core_.push(&r, 1, out, priority);
  }
  /// Queues a prepared record (its type id and size are checked by the block that runs it).
  void push_record(const Record& r, std::size_t out = 0, int priority = 0) {
    core_.push(&r, 1, out, priority);
  }
  /// Queues many records under one lock.
  void push_batch(std::span<const Record> records, std::size_t out = 0, int priority = 0) {
    core_.push(records.data(), records.size(), out, priority);
  }
  /// Queues one task whose finished record sets the returned future (not an output queue).
  std::future<Record> submit(const Record& r, int priority = 0) {
    auto promise = std::make_shared<std::promise<Record>>();
    std::future<Record> f = promise->get_future();
    core_.push(&r, 1, 0, priority, [promise](Record& done) { promise->set_value(done); });
    return f;
  }
  /// Queues one task; `callback` runs on the scheduler thread with the finished record (keep
  /// it short: it delays the collection of other tasks; and it must not wait for another task
  /// of this pool, whose delivery may need the very thread it runs on).
  void push_then(const Record& r, std::function<void(Record&)> callback, int priority = 0) {
    if (!callback) throw InvalidArgument("weft::gpu::Pool::push_then: empty callback");
    core_.push(&r, 1, 0, priority, std::move(callback));
  }

  /// Queues a task graph: `tasks`, and `edges` between them (Edge{from, to}: task `to` starts
  /// only once task `from` ended ok; indices into `tasks`). Every task is delivered to output
  /// queue `out` exactly once, like a pushed one, soon after it ends; not in dependency order:
  /// a task may be popped before one of its inputs (the block that ended the input makes its
  /// successors ready before it reports the input). The blocks resolve the dependencies
  /// themselves: the block that ends a task's last input makes it ready, with no round trip
  /// through a scheduler lane, and a block free to run one takes a ready graph task before its
  /// ring's (so graph tasks ignore the pool's QueueOrder). A task one of whose inputs did not end
  /// ok is delivered as TaskStatus::cancelled, unrun (and so are its successors).
  ///
  /// Before anything runs, throws weft::InvalidArgument for an edge naming a task past the
  /// last, a cycle (naming a task on it), more tasks than PoolOptions::graph_capacity (or, on
  /// the device backend, more edges than 8 a task), a bad queue or payload size, a task of
  /// the type id the pool keeps (kGraphFanOutTypeId), a pool with a
  /// watchdog (task_deadline), or one that runs no graphs (graph_capacity 0, a device pool over
  /// several GPUs); weft::ShutDown after no_more_tasks(). Graphs run one at a
  /// time, in the order pushed, beside the pool's other tasks; a graph pushed while one runs
  /// waits (queued) for it. At shutdown the graphs waiting are delivered as cancelled, and the
  /// graph running stops early: its tasks that start after the shutdown reached it are
  /// delivered as cancelled, unrun.
  ///
  /// `priorities` (none, or one per task): a task whose priority is above 0 is urgent; a block
  /// looks at the ready urgent tasks before the others (FIFO within each of the two levels;
  /// roots that go through the rings ignore it, and those behind a fan-out task keep it:
  /// docs/gpu.md "Task graphs"). Give it to the tasks on the graph's
  /// critical path, which otherwise wait behind every task made ready before them.
  void push_graph(std::span<const Record> tasks, std::span<const Edge> edges, std::size_t out = 0,
                  std::span<const int> priorities = {}) {
    core_.push_graph(tasks, edges, out, priorities);
  }
  /// Checks and lays out a graph of `tasks` tasks with these edges and priorities once, for
  /// push_graph(shape, ...) to run any number of times (weft/gpu/graph_shape.hpp). Throws
  /// weft::InvalidArgument as push_graph does for the graph itself (an edge past the last task,
  /// a cycle, too many tasks or edges for this pool, priorities not one per task, a pool that
  /// runs no graphs or has a watchdog).
  [[nodiscard]] GraphShape prepare_graph(std::size_t tasks, std::span<const Edge> edges,
                                         std::span<const int> priorities = {}) const {
    return core_.prepare_graph(tasks, edges, priorities, "prepare_graph");
  }
  /// push_graph() of a prepared shape: `tasks` holds one record per task of the shape, in its
  /// task order. Throws weft::InvalidArgument for a record count other than shape.tasks(), a
  /// shape larger than this pool's graph table, and as push_graph() does for the queue, the
  /// payloads and the pool; weft::ShutDown after no_more_tasks().
  void push_graph(const GraphShape& shape, std::span<const Record> tasks, std::size_t out = 0) {
    core_.push_graph(shape, tasks, out);
  }

  /// Waits for a finished task on queue `out`. Many threads may pop one queue. Throws
  /// weft::ShutDown when none can ever arrive (no more tasks and none unfinished).
  Record pop(std::size_t out = 0) { return core_.pop(out); }
  /// Takes a finished task if one is there.
  bool try_pop(Record& r, std::size_t out = 0) { return core_.try_pop(r, out); }
  /// Waits for at least one finished task and takes up to into.size().
  std::size_t pop_batch(std::span<Record> into, std::size_t out = 0) {
    return core_.pop_batch(into, out);
  }
  /// Tasks pushed for queue `out` and not yet popped from it.
  [[nodiscard]] std::size_t unfinished(std::size_t out = 0) const { return core_.unfinished(out); }

  /// Declares that nothing more will be pushed: later pushes throw weft::ShutDown, and pops on
  /// a queue with nothing unfinished throw instead of waiting forever.
  void no_more_tasks() { core_.no_more_tasks(); }
  /// Waits until every task pushed so far has been delivered (to a queue, future or callback).
  /// Throws weft::InvalidState on a paused pool with tasks not yet delivered (they wait for
  /// resume()).
  void synchronize() { core_.synchronize(); }

  /// Lets the GPU go, keeping the pool: waits until every task pushed so far has been
  /// delivered, then the resident kernels exit, so that other GPU work (cuBLAS, cuSOLVER, the
  /// caller's kernels, cudaDeviceSynchronize) runs while the pool is paused (docs/gpu.md
  /// "Pausing"). Pushes go on being accepted and wait in the queue; pop() waits for them
  /// (another thread must resume()). Idempotent; not from a push_then callback. Throws
  /// weft::ShutDown after shutdown, weft::Error when the blocks failed. A task the watchdog
  /// gave up on must end before the pause completes.
  void pause() { core_.pause(); }
  /// Launches the resident kernels again (a few hundred microseconds) and lets queued tasks
  /// run. Idempotent. Throws like pause(), or weft::Error when the blocks cannot start (other
  /// work occupies the GPU for longer than a minute); the pool then stays paused.
  void resume() { core_.resume(); }
  [[nodiscard]] bool paused() const { return core_.paused(); }

  /// Slots of all blocks (num_blocks() x ring_depth()).
  [[nodiscard]] std::size_t num_slots() const { return core_.num_slots(); }
  /// Resident blocks (GPU blocks, or host threads on the host backend).
  [[nodiscard]] std::size_t num_blocks() const { return core_.num_blocks(); }
  [[nodiscard]] std::size_t ring_depth() const { return core_.ring_depth(); }
  [[nodiscard]] std::string describe() const { return core_.describe(); }
  [[nodiscard]] PoolStats stats() const { return core_.stats(); }
  /// Scheduler threads serving the slots.
  [[nodiscard]] std::size_t num_lanes() const { return core_.num_lanes(); }
  /// The most tasks one push_graph() may have: PoolOptions::graph_capacity, or 0 where the pool
  /// runs no graphs (a device pool over several GPUs, a pool with a watchdog).
  [[nodiscard]] std::size_t graph_capacity() const { return core_.graph_capacity(); }

 private:
  static TaskStatus host_dispatch(std::uint32_t type, void* payload, std::uint32_t size,
                                  const BlockContext& block) {
    return Types::dispatch(type, payload, size, block);
  }
  static detail::SchedulerConfig scheduler_config(const PoolOptions& o) {
    auto negative = [](const char* what, std::chrono::microseconds v) {
      if (v.count() < 0) {
        throw InvalidArgument(std::string("weft::gpu::PoolOptions::") + what +
                              " must be >= 0 (got " + std::to_string(v.count()) + " us)");
      }
    };
    negative("scheduler_idle_spin", o.scheduler_idle_spin);
    negative("consumer_spin", o.consumer_spin);
    negative("task_deadline", o.task_deadline);
    if (o.lone_task_gap.count() < 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::lone_task_gap must be >= 0 (got " +
                            std::to_string(o.lone_task_gap.count()) + " ns)");
    }
    if (o.scheduler_lanes > 64) {
      throw InvalidArgument("weft::gpu::PoolOptions::scheduler_lanes must be in [0, 64] (got " +
                            std::to_string(o.scheduler_lanes) + ")");
    }
    detail::SchedulerConfig c;
    c.lanes = o.scheduler_lanes;  // 0 is resolved once the slot count is known
    c.idle_spin = o.scheduler_idle_spin;
    c.consumer_spin = o.consumer_spin;
    c.task_deadline = o.task_deadline;
    c.ring_after = o.backend == Backend::device ? std::chrono::nanoseconds(o.warm_idle) / 2
                                                : std::chrono::nanoseconds(0);
    c.standby = o.standby_blocks;
    c.lone_gap = o.lone_task_gap;
    c.observer = o.observer;
    return c;
  }
  static std::unique_ptr<detail::BlockRuntime> make_blocks(const PoolOptions& o) {
    if (o.ring_depth > detail::kMaxRingDepth) {
      throw InvalidArgument("weft::gpu::PoolOptions::ring_depth must be in [0, 32] (got " +
                            std::to_string(o.ring_depth) + ")");
    }
    if (o.graph_capacity.value_or(0) > (std::size_t{1} << 24)) {
      throw InvalidArgument(
          "weft::gpu::PoolOptions::graph_capacity must be in [0, 16777216] (got " +
          std::to_string(*o.graph_capacity) + ")");
    }
    if (o.backend == Backend::device) {
      const std::size_t depth = o.ring_depth != 0 ? o.ring_depth : kDefaultDeviceRingDepth;
      if (o.warm_idle.count() < 0) {
        throw InvalidArgument("weft::gpu::PoolOptions::warm_idle must be >= 0 (got " +
                              std::to_string(o.warm_idle.count()) + " us)");
      }
      return detail::make_device_blocks(o.program, o.devices, o.blocks_per_sm, o.threads_per_block,
                                        depth, Capacity, o.warm_idle, o.task_deadline.count() > 0,
                                        uses_mailbox(o), o.graph_capacity.value_or(0));
    }
    if (o.host_blocks == 0 || o.host_blocks > 4096) {
      throw InvalidArgument("weft::gpu::PoolOptions::host_blocks must be in [1, 4096] (got " +
                            std::to_string(o.host_blocks) + ")");
    }
    return detail::make_host_blocks(o.host_blocks, o.ring_depth != 0 ? o.ring_depth : 1, Capacity,
                                    Types::kSharedBytes, &host_dispatch, uses_mailbox(o), 1,
                                    o.graph_capacity.value_or(1024));
  }
  // Only a FIFO pool sends lone tasks through the mailbox (in a priority pool a task pushed
  // later may rank higher than one waiting, so every task goes through the queue).
  static bool uses_mailbox(const PoolOptions& o) {
    return o.mailbox.value_or(o.backend == Backend::device) && o.input_order == QueueOrder::fifo;
  }

  detail::PoolCore<Capacity> core_;
};

}  // namespace weft::gpu
