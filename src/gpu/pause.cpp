// Pausing the pool: the resident kernels exit so that other GPU work (cuBLAS, the user's
// kernels, cudaDeviceSynchronize) runs beside a pool that lives on, and resume() launches them
// again (docs/gpu.md "Pausing").
//
// pause(): every task pushed before it is delivered (synchronize), then the lanes take no more
// input; each lane, once nothing of its own is in flight (and, for the mailbox's lane, the
// mailbox is free and closed), sets its slots to EXIT and parks; once all have parked, the
// blocks are joined. Tasks pushed meanwhile stay queued. resume(): the blocks start again
// (fresh memory, slot 0 of every ring), the mailbox reopens, the lanes unpark and take what
// was queued.
#include "gpu/scheduler_impl.hpp"
#include "weft/error.hpp"

namespace weft::gpu::detail {

void Scheduler::Impl::pause() {
  std::lock_guard<std::mutex> guard(pause_mutex_);
  if (paused_) return;
  throw_if_stopped_or_failed("pause");
  synchronize();
  {
    std::lock_guard<std::mutex> lock(in_mutex_);
    // seq_cst: read by the lanes every round, and by synchronize()'s wait predicate.
    pause_requested_.store(true, std::memory_order_seq_cst);
  }
  in_cv_.notify_all();  // sleeping lanes wake and park
  // A synchronize() is in its wait, or sees the request: what is queued now waits for
  // resume(). (idle_mutex_ is never taken under in_mutex_: synchronize() takes them the other
  // way round.)
  { std::lock_guard<std::mutex> lock(idle_mutex_); }
  idle_cv_.notify_all();
  bool all_parked = false;
  {
    std::unique_lock<std::mutex> lock(in_mutex_);
    parked_cv_.wait(lock, [&] {
      // acquire: pairs with the release stores of shutdown and check_failure.
      return parked_lanes_ == lanes_.size() || stop_flag_.load(std::memory_order_acquire) ||
             blocks_failed_.load(std::memory_order_acquire);
    });
    all_parked = parked_lanes_ == lanes_.size();
  }
  if (!all_parked) {
    unpark_lanes();
    throw_if_stopped_or_failed("pause");
  }
  blocks_->join();
  if (const std::string why = blocks_->failure(); !why.empty()) {
    // The blocks died on the way out: as check_failure, the pool is failed and closed, and
    // the lanes, unparked, cancel what is queued and wake the waiters.
    {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      if (failure_.empty()) failure_ = why;
    }
    close();
    blocks_failed_.store(true, std::memory_order_release);  // release: pairs with the lanes
    unpark_lanes();
    throw Error("weft::gpu::Pool::pause: " + why);
  }
  paused_ = true;
  // relaxed: a hint for synchronize(); pause_mutex_ orders it for pause and resume.
  paused_flag_.store(true, std::memory_order_relaxed);
}

void Scheduler::Impl::resume() {
  std::lock_guard<std::mutex> guard(pause_mutex_);
  if (!paused_) return;
  throw_if_stopped_or_failed("resume");
  start_blocks();  // throws if they cannot start: the pool stays paused
  mailbox_.reopen_after_pause();
  paused_ = false;
  paused_flag_.store(false, std::memory_order_relaxed);  // relaxed: see pause
  unpark_lanes();
}

bool Scheduler::Impl::paused() const {
  return paused_flag_.load(std::memory_order_relaxed);  // relaxed: a snapshot
}

void Scheduler::Impl::throw_if_stopped_or_failed(const char* who) {
  // acquire: pairs with the release stores of shutdown and check_failure.
  if (stop_flag_.load(std::memory_order_acquire)) {
    throw ShutDown(std::string("weft::gpu::Pool::") + who + ": the pool has shut down");
  }
  if (blocks_failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    throw Error(std::string("weft::gpu::Pool::") + who + ": the pool's blocks failed: " + failure_);
  }
}

// Wakes the parked lanes and waits until every one has left its park: a pause that followed
// at once would otherwise count a lane still parked from this one, which has not set the
// slots of the blocks launched since to EXIT, and wait for those blocks forever.
void Scheduler::Impl::unpark_lanes() {
  std::unique_lock<std::mutex> lock(in_mutex_);
  // seq_cst: see pause.
  pause_requested_.store(false, std::memory_order_seq_cst);
  in_cv_.notify_all();
  parked_cv_.wait(lock, [&] { return parked_lanes_ == 0; });
}

// The lane's part of a pause, in a round that took nothing: parks once nothing of its own is
// in flight (lost slots included: their blocks still run the task) and, on the mailbox's
// lane, the mailbox is closed. Returns whether it parked (and has been woken since).
bool Scheduler::Impl::park_if_drained(Lane& lane) {
  if (lane.rings.unresolved() != 0 || lane.rings.lost_slots() != 0) return false;
  // A graph in the table needs blocks that run: the first lane's stay up until it is through.
  if (serves_graphs(lane) && graphs_.in_table()) return false;
  if (serves_mailbox(lane) && !mailbox_.close_for_pause()) return false;
  lane.rings.write_exit();
  blocks_->after_loads();  // blocks in deep idle wake and read their EXIT
  lane.rings.restart_rings();
  std::unique_lock<std::mutex> lock(in_mutex_);
  ++parked_lanes_;
  parked_cv_.notify_all();
  // Woken by resume (unpark_lanes), shutdown or a failure, all of which notify in_cv_. While
  // any lane is parked no lane sleeps for work (a pause wakes the sleepers, and they park),
  // so a push's notify_one is never lost to a parked lane.
  in_cv_.wait(lock, [&] {
    // seq_cst, acquire: see pause.
    return !pause_requested_.load(std::memory_order_seq_cst) ||
           stop_flag_.load(std::memory_order_acquire) ||
           blocks_failed_.load(std::memory_order_acquire);
  });
  --parked_lanes_;
  parked_cv_.notify_all();  // unpark_lanes waits for every lane to leave
  return true;
}

}  // namespace weft::gpu::detail
