// The scheduler's state and the functions its parts share. scheduler.cpp holds what users'
// threads call (push, pop, synchronize, shutdown); lane.cpp holds what the lanes' threads run.
//
// The blocks (each with a ring of slots) are split into contiguous ranges, one per scheduler
// lane (a host thread). A lane owns its blocks' rings outright (LaneRings): only it loads
// them, collects them and keeps their bookkeeping, so lanes share nothing but the input queue
// (one lock per shard per batch taken) and the output queues (one lock per batch delivered, to
// the lane's own shard). Everything per task in a lane is lock-free and allocation-free; a
// single push or pop takes one uncontended lock (the thread's shard) in the common case.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/graph_feed.hpp"
#include "gpu/input_queue.hpp"
#include "gpu/lane_rings.hpp"
#include "gpu/lone_task_mailbox.hpp"
#include "gpu/outbox.hpp"
#include "gpu/output_queue.hpp"
#include "gpu/record_buffer.hpp"
#include "gpu/watchdog.hpp"
#include "weft/gpu/detail/scheduler.hpp"

namespace weft::gpu::detail {

struct Scheduler::Impl {
  using Clock = std::chrono::steady_clock;

  struct Lane {
    Lane(const RingLayout& layout, std::size_t first, std::size_t count,
         const LaneRings::Options& options, Watchdog& watchdog, std::size_t outputs,
         std::size_t capacity, std::size_t entry_stride)
        : rings(layout, first, count, options, watchdog),
          outbox(outputs, capacity),
          batch(entry_stride),
          roots(entry_stride) {}
    std::size_t index = 0;   // which lane (its shard of every output queue)
    std::size_t cursor = 0;  // the input shard its next sweep starts at
    LaneRings rings;
    Outbox outbox;
    RecordBuffer batch;  // taken from the input queue, not yet loaded
    RecordBuffer roots;  // the first lane: a task graph's roots, as input entries
    std::thread thread;
    // rings.idle_units() and rings.idle_blocks() as the other lanes see them (written by this
    // lane once per round when they changed; on a line of their own, since the others read
    // them when they take input).
    alignas(64) std::atomic<std::size_t> idle_units{0};
    std::atomic<std::size_t> idle_blocks{0};
    // The lane sleeps (on in_cv_, or between polls of long tasks): the other lanes take even a
    // lone task from the shards it is home to (see take_batch).
    std::atomic<bool> napping{false};
    // This lane's share of the pool's count of delivered tasks (pending()) and of
    // PoolStats::completed / failed. Written by the lane once per round that delivers, read
    // only by synchronize() and stats(): a line of its own.
    alignas(64) std::atomic<std::uint64_t> delivered{0};
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};
  };

  Impl(std::unique_ptr<BlockRuntime> blocks, std::size_t capacity, std::size_t output_queues,
       QueueOrder order, SchedulerConfig config);
  ~Impl() { shutdown(); }

  // ---- users' threads (scheduler.cpp) ----
  void push(const unsigned char* records, std::size_t count, std::size_t out, int priority,
            RecordCallback callback);
  [[nodiscard]] std::shared_ptr<const GraphLayout> prepare_graph(std::size_t count,
                                                                 std::span<const Edge> edges,
                                                                 std::span<const int> priorities,
                                                                 const char* who) const;
  void push_graph(std::shared_ptr<const GraphLayout> layout, const unsigned char* records,
                  std::size_t count, std::size_t out);
  void pop(std::size_t out, unsigned char* record);
  bool try_pop(unsigned char* record, std::size_t out);
  std::size_t pop_batch(unsigned char* records, std::size_t max, std::size_t out);
  void synchronize();
  void shutdown();
  // (pause.cpp)
  void pause();
  void resume();
  [[nodiscard]] bool paused() const;
  [[nodiscard]] PoolStats stats() const;

  void check_out(std::size_t out, const char* who) const;
  // Whether the pool runs task graphs: a table, and no watchdog (which does not cover them).
  [[nodiscard]] bool runs_graphs() const noexcept;
  // Throws weft::InvalidArgument, naming Pool::`who`, unless runs_graphs().
  void check_runs_graphs(const char* who) const;
  // Throws weft::InvalidArgument, its message starting with `prefix`, for a graph of more tasks
  // or edges than the graph table holds.
  void check_table_holds(std::size_t tasks, std::size_t edges, const std::string& prefix) const;
  void check_records(const unsigned char* records, std::size_t count,
                     const char* who = "push") const;
  void check_graph_types(const unsigned char* records, std::size_t count) const;
  std::uint32_t add_callback(RecordCallback cb);
  RecordCallback take_callback(std::uint32_t handle);
  void count_accepted(std::size_t shard, std::size_t out, std::size_t count, std::uint32_t cb);
  std::size_t push_fifo(std::size_t home, const unsigned char* records, std::size_t count,
                        std::size_t out, std::uint32_t cb, bool& refused);
  void wake_lanes_after_push(std::size_t home, std::size_t queued, std::size_t count);
  bool hopeless(const OutputQueue& q) const;
  [[noreturn]] void throw_hopeless(std::size_t out, const char* who) const;
  template <class Take>
  std::size_t take_waiting(OutputQueue& q, std::size_t out, const char* who, Take take);
  void spin_for_output(const OutputQueue& q, std::size_t out, Clock::time_point until);
  void after_take(OutputQueue& q);
  void wake_all_outputs();
  void close();
  bool mailbox_take_for(std::size_t out, unsigned char* record);
  [[nodiscard]] std::uint64_t pending() const;
  void wake_sync_waiters();
  void wake_mailbox_lane(std::size_t out);
  void wake_one_lane(bool all);

  // ---- the lanes' threads (lane.cpp) ----
  void lane_main(Lane& lane);
  bool take_batch(Lane& lane, std::size_t max, bool to_load);
  bool others_mostly_idle(const Lane& lane, bool by_units) const;
  void wake_for_own_shards(const Lane& lane);
  bool home_takes(std::size_t shard, std::size_t size) const;
  bool left_to_home(const Lane& lane, std::size_t shard, std::size_t size) const;
  [[nodiscard]] bool input_for(const Lane& lane) const;
  static void publish_idle(Lane& lane);
  void start_blocks();
  bool park_if_drained(Lane& lane);
  void unpark_lanes();
  void throw_if_stopped_or_failed(const char* who);
  void flush(Lane& lane, std::size_t ended);
  void finish_pending(Lane& lane, std::size_t n);
  std::size_t cancel_queued(Lane& lane);
  std::size_t cancel_batch(Lane& lane);
  bool check_failure(Lane& lane);
  void sleep_until_work(Lane& lane);
  void stop_lane(Lane& lane);
  [[nodiscard]] bool serves_mailbox(const Lane& lane) const {
    return mailbox_.present() && &lane == lanes_[0].get();
  }
  std::size_t mailbox_round(Lane& lane, Clock::time_point now, bool now_or_never) {
    return serves_mailbox(lane) ? mailbox_.lane_round(lane.outbox, now, now_or_never) : 0;
  }
  // The first lane loads the task graphs into the blocks' graph table and delivers their
  // tasks (gpu/graph_feed.hpp).
  [[nodiscard]] bool serves_graphs(const Lane& lane) const {
    return graphs_.present() && &lane == lanes_[0].get();
  }
  // Stages the completions the graph table published (tasks taken from its ready queue), at
  // most kGraphRoundMax a round: while a graph's blocks publish as fast as the lane stages,
  // an unbounded round would deliver nothing until the graph ended, and then all of it at once
  // (docs/decisions/017-gpu-device-dependencies.md, "After step 3").
  static constexpr std::size_t kGraphRoundMax = 256;
  std::size_t graph_round(Lane& lane) {
    return serves_graphs(lane) ? graphs_.collect(lane.outbox, kGraphRoundMax) : 0;
  }
  // Tells the feed of the roots the lane's rings collected (they count among the rings'
  // ended slots). `roots`: the graph's own roots among them; `fan_outs`: the fan-out task
  // (0 or 1), the pool's own, which the outbox staged for no queue and which is no task of
  // the pool's counts.
  struct RootsEnded {
    std::size_t roots = 0;
    std::size_t fan_outs = 0;
  };
  RootsEnded graph_roots_ended(Lane& lane) {
    std::vector<std::uint32_t>& roots = lane.outbox.graph_roots();
    const std::size_t n = roots.size();
    if (n == 0) return {};
    const std::size_t fan_outs = graphs_.roots_ended(roots);
    return {n - fan_outs, fan_outs};
  }
  bool load_graph_roots(Lane& lane, Clock::time_point now, bool may_load_graph);
  struct Ended {
    std::size_t tasks;        // staged this round
    std::size_t graph_tasks;  // of them, tasks of a graph
  };
  Ended collect_ended(Lane& lane, Clock::time_point now, bool now_or_never);
  // Whether graph tasks accepted are not yet delivered: the first lane stays awake for them.
  // seq_cst: pairs with push_graph as the shards' sizes do with push (see sleep_until_work).
  [[nodiscard]] bool graphs_open(const Lane& lane) const {
    return serves_graphs(lane) && graph_open_.load(std::memory_order_seq_cst) > 0;
  }
  void graphs_delivered(std::size_t n) {
    // seq_cst: as graphs_open. Only the first lane subtracts, after it delivered them.
    if (n > 0) graph_open_.fetch_sub(n, std::memory_order_seq_cst);
  }

  // The most tasks a lane loads in one round when a backlog lets it fill rings (it loads one
  // per listed block otherwise) (docs/decisions/003-gpu-ring-loading.md).
  static constexpr std::size_t kRoundTasksMax = 512;
  // Input shards: enough that a few pushing threads rarely share one (a shared one costs only
  // contention, not correctness).
  static constexpr std::size_t kInputShards = 8;
  // Output shards per queue: one per lane, up to this many (lane k delivers to shard k mod
  // this). A consumer finds its records at home only in a shard that some lane delivers to
  // (docs/decisions/001-gpu-scheduler-lanes.md).
  static constexpr std::size_t kOutputShardsMax = 4;
  static constexpr std::size_t kShortBatch = 8;  // pushed entry by entry under the lock
  // An input shard holding fewer tasks than this is served by its home lane alone (take_batch).
  static constexpr std::size_t kHomeOnlyBelow = 64;
  // The most records a lane's staging buffer is given room for at once (48 KB with 16-byte
  // payloads: below glibc's mmap threshold, so the reservation is not a fresh mapping).
  static constexpr std::size_t kStagedReserveMax = 1024;
  // A quiet lane asks the blocks whether they are alive this often (a dead kernel's tasks are
  // then delivered as device_failed within about this long).
  static constexpr std::chrono::milliseconds kHealthCheckPeriod{1};
  // try_pop wakes the mailbox's lane when the mailbox has held a task of its queue this long.
  static constexpr std::chrono::milliseconds kMailboxNudgeAfter{1};

  // The members fall into groups by who writes them how often, each group starting a cache
  // line, so that what one thread writes often does not share a line with what others read
  // all the time.

  // Set at construction, or written once when the pool closes, stops or fails; read by every
  // push, pop and round.
  std::unique_ptr<BlockRuntime> blocks_;
  RingLayout layout_;
  std::size_t capacity_;
  std::size_t record_stride_;
  SchedulerConfig config_;
  Watchdog watchdog_;
  InputQueue input_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::unique_ptr<OutputQueue>> outputs_;
  LoneTaskMailbox mailbox_;
  GraphFeed graphs_;
  std::atomic<bool> stop_flag_{false};
  std::atomic<bool> no_more_or_failed_{false};
  std::atomic<bool> blocks_failed_{false};

  // Read by pushes; written when a lane goes to sleep or wakes.
  alignas(64) std::atomic<std::size_t> sleeping_lanes_{0};

  // Graph tasks accepted by push_graph and not yet delivered (the first lane's reason to stay
  // awake).
  alignas(64) std::atomic<std::uint64_t> graph_open_{0};
  // The first lane's units (SMs) at the last launch: where prepare_graph gives a graph a
  // fan-out task.
  std::atomic<std::size_t> first_lane_units_{0};

  // Sleeping lanes.
  alignas(64) mutable std::mutex in_mutex_;  // lanes sleep under it
  std::condition_variable in_cv_;            // lanes sleep here for work
  bool stopping_ = false;                    // under in_mutex_
  bool lanes_joined_ = false;                // under in_mutex_

  alignas(64) std::mutex callbacks_mutex_;
  std::vector<RecordCallback> callbacks_;  // by handle - 1
  std::vector<std::uint32_t> free_callbacks_;

  // synchronize(); delivered tasks are counted per lane (Lane::delivered). Lanes read
  // sync_waiters_ every round that delivers.
  alignas(64) std::mutex idle_mutex_;
  std::condition_variable idle_cv_;           // synchronize() waits here for pending() == 0
  std::atomic<std::size_t> sync_waiters_{0};  // threads in synchronize()

  // Pausing (pause.cpp). Lanes read pause_requested_ every round.
  alignas(64) std::atomic<bool> pause_requested_{false};  // lanes take nothing, then park
  std::atomic<bool> paused_flag_{false};                  // paused() and synchronize's check
  std::mutex pause_mutex_;                                // one pause() or resume() at a time
  bool paused_ = false;                                   // under pause_mutex_
  std::size_t parked_lanes_ = 0;                          // under in_mutex_
  std::condition_variable parked_cv_;                     // pause() waits for every lane here

  // Rare: failures, lanes going to sleep.
  alignas(64) mutable std::mutex failure_mutex_;
  std::string failure_;
  std::atomic<std::uint64_t> scheduler_sleeps_{0};
};

}  // namespace weft::gpu::detail
