// The scheduler lanes' threads: each round a lane collects its blocks' finished slots (and,
// for the first lane, the mailbox), delivers what ended, takes queued tasks and loads them
// into its blocks' free slots; quiet, it spins for idle_spin, then sleeps until a push needs
// it.
#include <algorithm>
#include <thread>

#include "gpu/scheduler_impl.hpp"
#include "weft/cpu/detail/cpu_relax.hpp"

namespace weft::gpu::detail {

namespace {

std::uint64_t since(std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count();
  last = now;
  return static_cast<std::uint64_t>(ns);
}

// Times the phases of a round for the observer; does nothing without one.
class RoundTimer {
 public:
  RoundTimer(SchedulerObserver* observer, std::size_t lane) : observer_(observer) {
    round_.lane = lane;
    if (observer_ != nullptr) last_ = std::chrono::steady_clock::now();
  }
  void begin(std::size_t active_blocks) {
    round_.active_blocks = active_blocks;
    round_.ended = round_.loaded = 0;
    round_.phase_ns.fill(0);
  }
  void mark(SchedulerObserver::Phase p) {
    if (observer_ != nullptr) round_.phase_ns[static_cast<std::size_t>(p)] += since(last_);
  }
  void end(std::size_t ended, std::size_t loaded) {
    if (observer_ == nullptr) return;
    round_.ended = ended;
    round_.loaded = loaded;
    observer_->on_round(round_);
  }

 private:
  SchedulerObserver* observer_;
  SchedulerObserver::LaneRound round_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

using Phase = SchedulerObserver::Phase;

void Scheduler::Impl::lane_main(Lane& lane) {
  Clock::time_point last_activity = Clock::now();
  // When this lane last asked whether the blocks are alive: a CUDA call each time, so by the
  // clock (docs/decisions/004-gpu-idle-and-wakeups.md).
  Clock::time_point last_health_check = last_activity;
  RoundTimer timer(config_.observer, lane.index);
  for (;;) {
    const Clock::time_point now = Clock::now();
    timer.begin(lane.rings.active_blocks());
    const auto [ended, graph_ended] = collect_ended(lane, now, false);
    // The hints before the deliveries: a thread that pops this round's last task and then
    // pushes a batch has its push's size store (seq_cst) after them, so a lane that sees the
    // batch queued (InputQueue::size, seq_cst; or a take's release store of the size after
    // that push) sees this lane's units idle, and spreads the batch instead of taking it whole.
    if (ended > 0) publish_idle(lane);
    timer.mark(Phase::collect);
    flush(lane, ended);
    graphs_delivered(graph_ended);
    timer.mark(Phase::deliver);

    bool stopping = false;
    bool whole_rings = false;
    lane.batch.clear();
    // acquire: pairs with pause's store (a hint: the lane takes nothing while it is set).
    const bool pausing = pause_requested_.load(std::memory_order_acquire);
    // The next task graph once the table is free, none while pausing (it waits, as queued
    // tasks do, for resume()); the roots of the one in the table before any queued task,
    // pausing or not (it must drain before the lane parks).
    const bool loaded_roots = load_graph_roots(lane, now, !pausing);
    // A hint here (the shard locks in take_batch order the entries).
    const std::size_t queued = input_.size();
    const std::size_t free = lane.rings.free_capacity();
    if (!pausing && free > 0 && queued > 0) {
      // At most one task per block per round: rings fill one level at a time, and a lane that
      // comes back quickly does not take what other lanes are about to. Unless more is queued
      // than all lanes' free slots together (this lane's times the lanes): then every free
      // slot gets a task whatever the order, so the lane fills its rings (up to
      // kRoundTasksMax a round), and a block runs several tasks per read of host memory.
      const std::size_t listed = lane.rings.listed();
      std::size_t want = std::min(free, listed);
      const bool backlog = queued >= lanes_.size() * free;
      if (backlog) want = std::min(free, std::max(listed, kRoundTasksMax));
      // A lane with many blocks gives each block it picks its whole free ring, so that a round
      // touches fewer blocks (docs/decisions/003-gpu-ring-loading.md).
      whole_rings = backlog && listed > config_.whole_ring_blocks;
      stopping = take_batch(lane, want, true);
    } else {
      // acquire: pairs with shutdown's release store.
      stopping = stop_flag_.load(std::memory_order_acquire);
    }
    timer.mark(Phase::take);
    if (stopping) {
      timer.end(ended, 0);  // the tasks this round collected are reported before the stop
      stop_lane(lane);
      return;
    }
    if (pausing && park_if_drained(lane)) {
      timer.end(ended, 0);
      last_activity = Clock::now();
      continue;
    }
    lane.rings.load(lane.batch, now, whole_rings);
    if (lane.rings.take_doorbell()) blocks_->after_loads();
    publish_idle(lane);
    wake_for_own_shards(lane);
    timer.mark(Phase::load);
    const std::size_t loaded = lane.batch.size();

    if (ended > 0 || loaded > 0 || loaded_roots) {
      last_activity = now;
      timer.end(ended, loaded);
      continue;
    }
    // A quiet round. Now and then ask whether the blocks are still alive.
    // relaxed: a hint; check_failure reads it again with acquire.
    if (now - last_health_check >= kHealthCheckPeriod ||
        blocks_failed_.load(std::memory_order_relaxed)) {
      last_health_check = now;
      if (check_failure(lane)) return;
    }
    // A lane keeps spinning until it has been quiet for idle_spin itself; since a push wakes
    // a lane only when its shard's home lane cannot take the task, a trickle of tasks keeps
    // its home lanes spinning and lets the others sleep.
    if (now - last_activity < config_.idle_spin) {
      // Up to 16 pauses between quiet rounds, ended early by queued input (host memory only):
      // fewer would re-read the blocks' control lines more often, which slows the blocks' own
      // reads of them (docs/decisions/004-gpu-idle-and-wakeups.md).
      for (int p = 0; p < 16 && input_.size() == 0; ++p) weft::cpu::detail::cpu_relax();
    } else if (lane.rings.active_blocks() == 0 && !(serves_mailbox(lane) && mailbox_.busy()) &&
               !graphs_open(lane)) {
      if (config_.observer != nullptr) config_.observer->on_lane_sleep(lane.index);
      sleep_until_work(lane);
    } else {
      // Long tasks in flight: poll every 20 us instead of spinning a core.
      lane.napping.store(true, std::memory_order_relaxed);  // relaxed: a hint (take_batch)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lane.napping.store(false, std::memory_order_relaxed);
    }
    timer.mark(Phase::idle);
    timer.end(0, 0);
  }
}

// ---- taking input ----

// Whether another lane has most of its units (or blocks) idle.
bool Scheduler::Impl::others_mostly_idle(const Lane& lane, bool by_units) const {
  for (const auto& other : lanes_) {
    if (other.get() == &lane) continue;
    // relaxed: a hint for how much to take (see Lane::idle_units).
    const std::size_t idle =
        (by_units ? other->idle_units : other->idle_blocks).load(std::memory_order_relaxed);
    const std::size_t all = by_units ? other->rings.num_units() : other->rings.num_blocks();
    if (idle > 0 && 2 * idle >= all) return true;
  }
  return false;
}

// Whether input shard `shard`, holding `size` tasks, is its home lane's alone: fewer than
// kHomeOnlyBelow tasks, and the home lane awake (not napping) with an idle unit for each.
// seq_cst (napping): for push, pairs with sleep_until_work as the size store does with
// sleeping_lanes_ (the lane sets napping, then looks at the shards; the push stored the size,
// then looks at napping), so a task is never left to a sleeper; for the lanes a hint.
// relaxed (idle_units): a hint; when it was stale, the home lane wakes a sleeper itself
// (wake_for_own_shards). At worst a task waits for its home lane's next round (or 20 us nap).
bool Scheduler::Impl::home_takes(std::size_t shard, std::size_t size) const {
  const Lane& home = *lanes_[shard % lanes_.size()];
  return size < kHomeOnlyBelow && !home.napping.load(std::memory_order_seq_cst) &&
         home.idle_units.load(std::memory_order_relaxed) >= size;
}

// Whether `lane` leaves input shard `shard` to the shard's home lane (take_batch).
bool Scheduler::Impl::left_to_home(const Lane& lane, std::size_t shard, std::size_t size) const {
  return lanes_[shard % lanes_.size()].get() != &lane && home_takes(shard, size);
}

// Whether anything queued is for `lane` to take: a task in a shard it does not leave to the
// shard's home lane. seq_cst (sizes): the look sleep_until_work pairs with push's.
bool Scheduler::Impl::input_for(const Lane& lane) const {
  if (!input_.fifo()) return input_.size() > 0;
  for (std::size_t s = 0; s < input_.shards(); ++s) {
    const std::size_t size = input_.shard(s).size.load(std::memory_order_seq_cst);
    if (size != 0 && !left_to_home(lane, s, size)) return true;
  }
  return false;
}

// A lane with no idle unit wakes a sleeping lane for tasks queued in the shards it is home
// to: other lanes leave those to it only while it has idle units (take_batch), and a push
// that read a stale count of them woke nobody (push).
void Scheduler::Impl::wake_for_own_shards(const Lane& lane) {
  if (!input_.fifo() || lane.rings.idle_units() != 0) return;
  // relaxed: a hint. A sleeper missed here is woken in a later round (this lane stays awake
  // while it has tasks in flight); a lane about to sleep counts itself, then looks at the
  // shards, and takes these (this lane has no idle unit) instead of sleeping.
  if (sleeping_lanes_.load(std::memory_order_relaxed) == 0) return;
  for (std::size_t s = lane.index; s < kInputShards; s += lanes_.size()) {
    // relaxed: a hint (see InputQueue::Shard::size).
    if (input_.shard(s).size.load(std::memory_order_relaxed) != 0) {
      wake_one_lane(false);
      return;
    }
  }
}

// Tells the other lanes how many of this lane's blocks are idle.
void Scheduler::Impl::publish_idle(Lane& lane) {
  // Hints (see Lane::idle_units), written only when they change. release (idle_units): pairs
  // with take_batch's acquire, which then sees the take (the input queue's size) behind the
  // units this lane loaded since. relaxed (the own load): only this lane writes it.
  const std::size_t units = lane.rings.idle_units();
  if (lane.idle_units.load(std::memory_order_relaxed) != units) {
    lane.idle_units.store(units, std::memory_order_release);
  }
  const std::size_t blocks = lane.rings.idle_blocks();
  if (lane.idle_blocks.load(std::memory_order_relaxed) != blocks) {
    lane.idle_blocks.store(blocks, std::memory_order_relaxed);
  }
}

// Moves up to `max` queued entries into lane.batch. Returns whether the pool is stopping.
// `to_load`: the entries go into slots (not to cancellation), so they are spread.
bool Scheduler::Impl::take_batch(Lane& lane, std::size_t max, bool to_load) {
  // While another lane has most of its units (SMs) idle (it may be asleep, and the push that
  // queued these tasks woke it, or busy elsewhere for a moment), and what is queued fits the
  // idle SMs of all lanes at q tasks each with q no more than the blocks of an SM, this lane
  // takes q tasks per idle SM of its own and leaves the rest to the others: a batch of as many
  // tasks as SMs goes one per SM, a larger one spreads evenly. And while another lane has most
  // of its blocks idle, it queues nothing behind a busy block: a batch spreads over the
  // blocks of every lane. (Any idle unit or block at all would be too strict: under steady
  // load some lane always has a few, and rings would never fill.)
  if (to_load) {
    if (others_mostly_idle(lane, true)) {
      const std::size_t mine = lane.rings.idle_units();
      std::size_t idle = mine;
      for (const auto& other : lanes_) {
        // acquire: pairs with publish_idle's release, so that the size read below counts the
        // take of every lane whose hint already shows the units it loaded from that take.
        if (other.get() != &lane) idle += other->idle_units.load(std::memory_order_acquire);
      }
      // What is queued now, read after the hints: the round's first look at the queue may be
      // older than a hint, and counting tasks another lane has since placed against that
      // lane's units, no longer idle, doubled q. Read in this order, a lane's take and its
      // hint can only disagree one way (taken and not yet published: its units count as
      // idle), which makes q smaller, not larger: the lane leaves more for a later round. A
      // hint that has not yet caught up with its lane's finished tasks still counts too few
      // idle units, as any hint may.
      const std::size_t queued_now = input_.size();
      const std::size_t q = idle == 0 ? 0 : (queued_now + idle - 1) / idle;
      if (q <= lane.rings.blocks_per_unit()) max = std::min(max, mine * q);
    }
    if (others_mostly_idle(lane, false)) max = std::min(max, lane.rings.idle_blocks());
  }
  // A shard holding fewer than kHomeOnlyBelow tasks is left to its home lane while that lane
  // is awake and has an idle unit (SM) for each (docs/decisions/002-gpu-input-queue.md); a
  // backlog is for everyone.
  (void)input_.take(lane.batch, max, lane.cursor, /*skip_busy=*/to_load,
                    [&](std::size_t shard, std::size_t size) {
                      return to_load && left_to_home(lane, shard, size);
                    });
  // acquire: pairs with shutdown's release store (the close before it is visible).
  return stop_flag_.load(std::memory_order_acquire);
}

// ---- delivering ----

// Delivers what the lane staged: one lock per output queue, callbacks outside any lock.
void Scheduler::Impl::flush(Lane& lane, std::size_t ended) {
  if (ended == 0) return;
  // Counted before anything is delivered: a consumer that got a record sees it counted.
  // relaxed: statistics (the queue locks below order them before the records' delivery). Only
  // this lane writes its counters: a load and a store, no read-modify-write.
  lane.completed.store(lane.completed.load(std::memory_order_relaxed) + ended,
                       std::memory_order_relaxed);
  if (const std::uint64_t failed = lane.outbox.take_failed()) {
    lane.failed.store(lane.failed.load(std::memory_order_relaxed) + failed,
                      std::memory_order_relaxed);
  }
  std::vector<RecordBuffer>& staged = lane.outbox.by_queue();
  for (std::size_t out = 0; out < staged.size(); ++out) {
    RecordBuffer& st = staged[out];
    if (st.empty()) continue;
    // st comes back empty: a recycled buffer, or a new one when the queue has none spare.
    // Given room for a round's results at once, so that staging does not grow it by doubling.
    const std::size_t round = st.size();
    outputs_[out]->deliver(lane.index, st);
    if (st.capacity() < round) st.reserve(std::min(round, kStagedReserveMax));
  }
  std::vector<std::uint32_t>& ids = lane.outbox.callback_ids();
  RecordBuffer& records = lane.outbox.callback_records();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    RecordCallback cb = take_callback(ids[i]);
    cb(records.at(i));
  }
  ids.clear();
  records.clear();
  finish_pending(lane, ended);
}

void Scheduler::Impl::finish_pending(Lane& lane, std::size_t n) {
  // seq_cst store: the deliveries above happen before a synchronize() that sees the count;
  // and with synchronize's count of waiters, one side sees the other's write. The relaxed
  // load: only this lane writes its count.
  lane.delivered.store(lane.delivered.load(std::memory_order_relaxed) + n,
                       std::memory_order_seq_cst);
  wake_sync_waiters();
}

// Delivers every task still in the input queue as cancelled. Returns how many.
std::size_t Scheduler::Impl::cancel_queued(Lane& lane) {
  std::size_t n = 0;
  for (;;) {
    lane.batch.clear();
    take_batch(lane, 4096, false);
    if (lane.batch.empty()) return n;
    n += cancel_batch(lane);
  }
}

std::size_t Scheduler::Impl::cancel_batch(Lane& lane) {
  const std::size_t n = lane.batch.size();
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* e = lane.batch.at(i);
    lane.outbox.stage(SlotMeta::of_entry(e, Clock::time_point{}), TaskStatus::cancelled,
                      e + kEntryPayloadOffset);
  }
  lane.batch.clear();
  flush(lane, n);
  return n;
}

// ---- failure, sleep, stop ----

// The blocks died (a device task trapped or faulted: the kernel is gone): tasks in flight are
// delivered as device_failed, queued ones as cancelled, and waiters learn the cause. Any lane
// may detect it; each then fails its own slots. Returns whether that happened.
bool Scheduler::Impl::check_failure(Lane& lane) {
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
    wake_one_lane(true);  // the sleeping lanes fail their slots too
  }
  std::size_t n = lane.rings.fail_in_flight(lane.outbox);
  if (serves_mailbox(lane)) n += mailbox_.fail(lane.outbox);
  // The graph in the table will not finish: its tasks not yet delivered fail with the
  // blocks, the waiting graphs are cancelled.
  std::size_t graph_n = 0;
  if (serves_graphs(lane)) {
    const RootsEnded roots = graph_roots_ended(lane);
    n -= roots.fan_outs;
    graph_n = roots.roots;
    const std::size_t failed = graphs_.fail(lane.outbox, TaskStatus::device_failed);
    graph_n += failed;
    n += failed;
  }
  flush(lane, n);
  graphs_delivered(graph_n);
  cancel_queued(lane);
  wake_all_outputs();
  return true;
}

// Lost slots that come back meanwhile are reclaimed at the next collect.
void Scheduler::Impl::sleep_until_work(Lane& lane) {
  std::unique_lock<std::mutex> lock(in_mutex_);
  // Before the look at the shards below: a lone task pushed after that look is seen by a lane
  // woken by the push (under in_mutex_, so it sees this flag) and taken by it even if it is
  // not the task's home lane. seq_cst: also pairs with the mailbox's IN_FLIGHT and a
  // consumer's look at napping (wake_mailbox_lane).
  lane.napping.store(true, std::memory_order_seq_cst);
  // seq_cst: pairs with push (it stores a shard's size, then looks at this count; this counts
  // itself, then looks at the sizes): a push either sees a sleeper and notifies under
  // in_mutex_, or its task is seen here. Tasks this lane leaves to their shard's home lane
  // (awake, with an idle unit for each) do not keep it awake: that lane takes them, or, if
  // it loses its idle units first, wakes a sleeper (wake_for_own_shards).
  sleeping_lanes_.fetch_add(1, std::memory_order_seq_cst);
  const bool mailbox_lane = serves_mailbox(lane);
  // acquire: pairs with the release stores of shutdown and check_failure. seq_cst (mailbox):
  // pairs with the push's store of IN_FLIGHT, as the sizes do with push. COLLECTING counts as
  // work too: a consumer whose CAS took a task that is not its own (a callback's, or another
  // queue's) puts IN_FLIGHT back without waking anybody, so the lane must not sleep on it.
  auto work = [&] {
    // seq_cst (pause_requested_): see pause; a pause wakes the sleepers to park.
    return stop_flag_.load(std::memory_order_acquire) || input_for(lane) ||
           pause_requested_.load(std::memory_order_seq_cst) ||
           blocks_failed_.load(std::memory_order_acquire) ||
           (mailbox_lane && mailbox_.holds_task_for(LoneTaskMailbox::kAnyQueue)) ||
           graphs_open(lane);
  };
  if (!work()) {
    scheduler_sleeps_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    in_cv_.wait(lock, work);
  }
  sleeping_lanes_.fetch_sub(1, std::memory_order_seq_cst);
  lane.napping.store(false, std::memory_order_relaxed);  // relaxed: a hint
}

// Shutdown: queued tasks are cancelled, exactly once each (whichever lane takes them); tasks
// in slots run to the end or time out; then every slot of the lane gets EXIT.
void Scheduler::Impl::stop_lane(Lane& lane) {
  cancel_batch(lane);
  cancel_queued(lane);
  // Graphs likewise: those waiting for the table are cancelled, and the one in it drains, its
  // tasks taken from now on ending as cancelled, through the blocks (this lane's, running
  // until it writes their EXIT below); its roots not yet loaded still go through the rings,
  // so that their successors are counted down (a fan-out task's roots are its successors:
  // taken from the ready queue, they end cancelled).
  if (serves_graphs(lane)) {
    const std::size_t n = graphs_.cancel(lane.outbox);
    flush(lane, n);
    graphs_delivered(n);
  }
  // The mailbox's task too (its lane only): delivered at once, or timed out. (Not a lost one:
  // shutdown abandons it.)
  const bool mailbox_lane = serves_mailbox(lane);
  auto undelivered = [&] { return mailbox_lane && mailbox_.undelivered(); };
  auto graph_in_table = [&] { return serves_graphs(lane) && graphs_.in_table(); };
  for (std::uint32_t round = 0; lane.rings.unresolved() > 0 || undelivered() || graph_in_table();
       ++round) {
    const Clock::time_point now = Clock::now();
    const auto [ended, graph_ended] = collect_ended(lane, now, true);
    flush(lane, ended);
    graphs_delivered(graph_ended);
    (void)load_graph_roots(lane, now, false);
    if (ended == 0) {
      if ((round & 1023) == 1023 && check_failure(lane)) break;
      std::this_thread::yield();
    }
  }
  lane.rings.write_exit();
  blocks_->after_loads();
}

// The first lane: loads the next graph when the table is free (`may_load_graph`), then puts
// the roots of the one in the table not yet handed out into its free slots. Returns whether it
// loaded any root.
bool Scheduler::Impl::load_graph_roots(Lane& lane, Clock::time_point now, bool may_load_graph) {
  if (!serves_graphs(lane)) return false;
  if (may_load_graph && graphs_.load_next()) lane.outbox.set_fan_out(graphs_.fan_out());
  const std::size_t free = lane.rings.free_capacity();
  if (free == 0 || !graphs_.roots_waiting()) return false;
  lane.roots.clear();
  (void)graphs_.take_roots(lane.roots, free, input_);
  lane.rings.load(lane.roots, now, false);
  if (lane.rings.take_doorbell()) blocks_->after_loads();
  return true;
}

// Stages what ended since the last round: the rings' finished slots, the mailbox's task (its
// lane), the graph table's completions (the first lane). Returns how many, and how many of
// them were graph tasks (the roots among the rings' included).
Scheduler::Impl::Ended Scheduler::Impl::collect_ended(Lane& lane, Clock::time_point now,
                                                      bool now_or_never) {
  const std::size_t ring_ended = lane.rings.collect(lane.outbox, now);
  const std::size_t table_ended = graph_round(lane);
  const RootsEnded roots = graph_roots_ended(lane);
  return {ring_ended - roots.fan_outs + mailbox_round(lane, now, now_or_never) + table_ended,
          table_ended + roots.roots};
}

}  // namespace weft::gpu::detail
