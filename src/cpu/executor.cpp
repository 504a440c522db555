// The executor's slow paths: construction, the worker loop, stealing, sleeping, shutdown.
#include "weft/cpu/executor.hpp"
#include "weft/cpu/detail/cpu_relax.hpp"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "weft/cpu/task_group.hpp"
#include "weft/cpu/topology.hpp"

namespace weft::cpu {

namespace {

using detail::cpu_relax;

void validate(const ExecutorOptions& o) {
  if (o.private_bound == 0) {
    throw InvalidArgument("weft::cpu::ExecutorOptions::private_bound must be >= 1 (got 0)");
  }
  if (o.spawn_policy == SpawnPolicy::bounded_queue &&
      o.private_bound + o.public_bound >= o.deque_capacity) {
    throw InvalidArgument("weft::cpu::ExecutorOptions: private_bound + public_bound (" +
                          std::to_string(o.private_bound + o.public_bound) +
                          ") must be below deque_capacity (" + std::to_string(o.deque_capacity) +
                          ")");
  }
  if (o.deque_capacity < 2 || o.deque_capacity > (std::size_t{1} << 30)) {
    throw InvalidArgument("weft::cpu::ExecutorOptions::deque_capacity must be in [2, 2^30] (got " +
                          std::to_string(o.deque_capacity) + ")");
  }
  if (o.spin_before_sleep.count() < 0) {
    throw InvalidArgument(
        "weft::cpu::ExecutorOptions::spin_before_sleep must not be negative (got " +
        std::to_string(o.spin_before_sleep.count()) + " us)");
  }
  if (o.workers > 4096) {
    throw InvalidArgument("weft::cpu::ExecutorOptions::workers must be at most 4096 (got " +
                          std::to_string(o.workers) + ")");
  }
}

// Held by the one automatically pinned executor alive in the process: a second one would bind
// its workers to the same units as the first's and stack them there.
std::atomic<bool> g_automatic_pins_taken{false};

std::size_t resolve_workers(std::size_t requested) {
  return requested != 0 ? requested : allowed_hardware_threads();
}

}  // namespace

namespace detail {
void executor_wait_for(Executor& ex, Latch& latch) { ex.wait_for(latch); }

void report_unobserved_error(const char* where, std::exception_ptr e) noexcept {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "weft: %s: an exception nobody waited for: %s\n", where, ex.what());
  } catch (...) {
    std::fprintf(stderr, "weft: %s: a non-std exception nobody waited for\n", where);
  }
}
}  // namespace detail

Executor::Executor(ExecutorOptions options) : options_(options) {
  validate(options_);
  options_.workers = resolve_workers(options_.workers);
  queue_bound_ = static_cast<std::int64_t>(options_.private_bound + options_.public_bound);
  private_bound_ = static_cast<std::int64_t>(options_.private_bound);
  workers_.reserve(options_.workers);
  for (std::size_t i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<detail::Worker>(*this, i, options_.deque_capacity));
  }
  sleepers_.reserve(options_.workers + 64);
  const std::vector<std::size_t> units = choose_pinning();
  for (auto& w : workers_) {
    detail::Worker* wp = w.get();
    wp->thread = std::thread([this, wp] { worker_main(*wp); });
    // Bound here rather than by the worker itself, so that pinned_units() is settled when the
    // constructor returns; a worker that started elsewhere migrates.
    if (units.empty()) continue;
    const std::size_t unit = units[wp->index % units.size()];
    if (pin_thread_to_pu(wp->thread, unit)) pinned_units_.push_back(unit);
  }
  if (options_.pinning == Pinning::always && pinned_units_.size() != workers_.size()) {
    std::fprintf(stderr,
                 "weft: Pinning::always requested but binding is unavailable (no hwloc, or the OS "
                 "refused): %zu of %zu workers bound\n",
                 pinned_units_.size(), workers_.size());
  }
}

std::vector<std::size_t> Executor::choose_pinning() {
  if (options_.pinning == Pinning::none) return {};
  std::vector<std::size_t> units = allowed_processing_units();
  if (options_.pinning == Pinning::always || units.empty()) return units;
  // automatic: only an executor with one worker per allowed unit, and only one at a time.
  // Fewer workers than units, bound to the first ones, would pile two such executors (two
  // processes, say) onto the same units while the others idle; more would share units anyway.
  if (units.size() != workers_.size()) return {};
  bool expected = false;
  // acq_rel: the flag only hands out a claim (no data rides on it); release in release_pins().
  if (!g_automatic_pins_taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    return {};
  }
  holds_automatic_pins_ = true;
  return units;
}

void Executor::release_pins() noexcept {
  if (holds_automatic_pins_) {
    holds_automatic_pins_ = false;
    // release: pairs with the acq_rel claim of the next executor.
    g_automatic_pins_taken.store(false, std::memory_order_release);
  }
}

Executor::~Executor() { shutdown(ShutdownMode::drain); }

void Executor::shutdown(ShutdownMode mode) {
  if (is_my_worker(detail::tl_context.worker)) {
    throw InvalidState(
        "weft::cpu::Executor::shutdown: called from one of the executor's own workers (it would "
        "wait for itself)");
  }
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  if (joined_) return;
  if (mode == ShutdownMode::cancel_pending) {
    cancel_pending_.store(true, std::memory_order_seq_cst);
  }
  {
    // Under the global-queue lock: an external submit either got in before (and will be run
    // or cancelled) or sees stopping_ and throws. seq_cst: pairs with the sleepers' seq_cst
    // re-check of stopping_ after they register.
    std::lock_guard<std::mutex> g(global_mutex_);
    stopping_.store(true, std::memory_order_seq_cst);
  }
  wake_all_sleepers();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  joined_ = true;
  release_pins();
}

ExecutorStats Executor::stats() const noexcept {
  ExecutorStats s;
  for (const auto& w : workers_) {
    s.tasks_run += w->tasks_run.get();
    s.tasks_inline += w->tasks_inline.get();
    s.steals += w->steals.get();
    s.sleeps += w->sleeps.get();
    s.found_without_wakeup += w->found_without_wakeup.get();
  }
  return s;
}

// ---- queues -------------------------------------------------------------------------------

void Executor::push_global(detail::Task* t) {
  {
    std::lock_guard<std::mutex> lock(global_mutex_);
    if (stopping_.load(std::memory_order_relaxed) && !is_my_worker(detail::tl_context.worker)) {
      // Rejected: the task never enters the executor; cancel it so its future (if any) is
      // failed rather than left pending.
      t->thunk(t, detail::TaskOp::cancel);
      detail::GroupState* g = t->group;
      detail::free_task(t);
      if (g != nullptr) {
        g->note_cancelled();
        g->latch().arrive();
      }
      throw ShutDown("weft::cpu::Executor: work submitted after shutdown began");
    }
    t->next = nullptr;
    if (global_tail_ != nullptr) {
      global_tail_->next = t;
    } else {
      global_head_ = t;
    }
    global_tail_ = t;
    // seq_cst: the publication that notify_work's sleeper check is ordered after.
    global_size_.fetch_add(1, std::memory_order_seq_cst);
  }
  notify_work();
}

detail::Task* Executor::pop_global() noexcept {
  // seq_cst: a sleeper's re-check must not miss a push (pairs with push_global's increment).
  if (global_size_.load(std::memory_order_seq_cst) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(global_mutex_);
  detail::Task* t = global_head_;
  if (t == nullptr) return nullptr;
  global_head_ = t->next;
  if (global_head_ == nullptr) global_tail_ = nullptr;
  global_size_.fetch_sub(1, std::memory_order_relaxed);
  return t;
}

detail::Task* Executor::find_task(detail::Worker& w) noexcept {
  detail::SplitDeque& dq = w.deque;
  if (dq.publish_requested() && dq.private_size() > 1) {
    dq.publish(1);
    notify_work();
  }
  if (detail::Task* t = dq.pop()) return t;
  if (detail::Task* t = pop_global()) {
    // Wake chain: one notify per push may have woken only us; pass it on while work remains.
    if (global_size_.load(std::memory_order_relaxed) > 0) notify_work();
    return t;
  }
  const std::size_t n = workers_.size();
  if (n > 1) {
    const std::size_t start = static_cast<std::size_t>(w.next_random() % n);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t v = (start + k) % n;
      if (v == w.index) continue;
      if (detail::Task* t = workers_[v]->deque.steal()) {
        w.steals.bump();
        if (workers_[v]->deque.has_public_work()) notify_work();  // wake chain, as above
        return t;
      }
    }
  }
  return nullptr;
}

// ---- running ------------------------------------------------------------------------------

void Executor::report_unhandled(std::exception_ptr e) noexcept {
  detail::report_unobserved_error("weft::cpu task", std::move(e));
}

void Executor::run_task(detail::Worker* w, detail::Task* t) noexcept {
  detail::GroupState* g = t->group;
  // relaxed: cancellation flags are advisory for tasks not yet started.
  const bool cancel =
      cancel_pending_.load(std::memory_order_relaxed) || (g != nullptr && g->is_cancelled());
  if (cancel) {
    // The cancel thunk is noexcept by construction (on_cancel is noexcept, destructors too).
    t->thunk(t, detail::TaskOp::cancel);
    if (g != nullptr) g->note_cancelled();
  } else {
    detail::ThreadContext& ctx = detail::tl_context;
    const detail::ThreadContext saved = ctx;
    ctx.group = g;
    ctx.depth = t->depth;
    try {
      t->thunk(t, detail::TaskOp::run);
    } catch (...) {
      if (g != nullptr) {
        g->record_error(std::current_exception());
      } else {
        report_unhandled(std::current_exception());
      }
    }
    ctx = saved;
  }
  if (w != nullptr) w->tasks_run.bump();
  detail::free_task(t);
  if (g != nullptr) g->latch().arrive();  // last touch of g: the waiter may destroy it next
}

// ---- sleeping -----------------------------------------------------------------------------

void Executor::register_sleeper(std::uint32_t parker) {
  std::lock_guard<std::mutex> lock(sleepers_mutex_);
  sleepers_.push_back(parker);
  // seq_cst: pairs with notify_work's seq_cst load after publishing work: either the notifier
  // sees this sleeper, or the sleeper's re-check (which follows) sees the work.
  num_sleepers_.fetch_add(1, std::memory_order_seq_cst);
}

void Executor::unregister_sleeper(std::uint32_t parker) {
  std::lock_guard<std::mutex> lock(sleepers_mutex_);
  auto it = std::find(sleepers_.begin(), sleepers_.end(), parker);
  if (it != sleepers_.end()) {  // a notifier may already have taken us off the list
    sleepers_.erase(it);
    num_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void Executor::wake_all_sleepers() {
  std::vector<std::uint32_t> woken;
  {
    std::lock_guard<std::mutex> lock(sleepers_mutex_);
    woken.swap(sleepers_);
    num_sleepers_.store(0, std::memory_order_seq_cst);
  }
  for (std::uint32_t p : woken) detail::parker_at(p).unpark();
}

// Looks for work with back-off, then sleeps until work arrives (or `latch` reaches zero, or
// shutdown). Returns a task to run, or null to make the caller re-evaluate its loop condition.
detail::Task* Executor::idle_search(detail::Worker& w, detail::Latch* latch) {
  // Pauses first (4 to 128 of them: a task about to be spawned next door), then yields the core
  // to anything else runnable, until spin_before_sleep has passed.
  const auto deadline = std::chrono::steady_clock::now() + options_.spin_before_sleep;
  for (std::uint32_t r = 0;; ++r) {
    if (latch != nullptr && latch->done()) return nullptr;
    if (detail::Task* t = find_task(w)) return t;
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (r < 6) {
      for (std::uint32_t i = 0; i < (4u << r); ++i) cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  register_sleeper(w.parker);
  const bool waiting_on_latch = latch != nullptr && latch->register_waiter(w.parker);
  if (latch != nullptr && !waiting_on_latch) {  // the latch reached zero meanwhile
    unregister_sleeper(w.parker);
    return nullptr;
  }
  if (detail::Task* t = find_task(w)) {
    unregister_sleeper(w.parker);
    return t;
  }
  // seq_cst: ordered after our registration; pairs with shutdown's seq_cst store.
  if (latch == nullptr && stopping_.load(std::memory_order_seq_cst) && all_workers_idle()) {
    unregister_sleeper(w.parker);
    return nullptr;
  }
  w.sleeps.bump();
  detail::Parker& parker = detail::parker_at(w.parker);
  while (!parker.park()) {
    // The sleep timed out (detail::kParkLimit) with no wake-up. Still registered, look once for
    // what a lost wake-up would have left, then sleep again: one look, not the rounds above,
    // keeps an idle pool's periodic re-checks cheap.
    if (latch != nullptr && latch->done()) break;
    // seq_cst: as the check before the sleep.
    if (stopping_.load(std::memory_order_seq_cst)) break;
    if (detail::Task* t = find_task(w)) {
      w.found_without_wakeup.bump();
      unregister_sleeper(w.parker);
      return t;
    }
  }
  unregister_sleeper(w.parker);
  return nullptr;
}

bool Executor::all_workers_idle() const noexcept {
  for (const auto& other : workers_) {
    // seq_cst: pairs with the seq_cst stores of idle flags (each worker stores its own flag and
    // then reads the others': at least one of two racing workers sees both idle).
    if (!other->idle.load(std::memory_order_seq_cst)) return false;
  }
  return true;
}

void Executor::worker_main(detail::Worker& w) {
  detail::tl_context.worker = &w;
  // A worker that only runs stolen tasks frees tasks but never allocates one: arm the cleanup of
  // its free list at thread exit now rather than on its first allocation.
  detail::prepare_thread_free_list();
  w.parker = detail::this_thread_parker_index();
  const std::string name = "weft-w" + std::to_string(w.index);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());

  for (;;) {
    if (detail::Task* t = find_task(w)) {
      run_task(&w, t);
      continue;
    }
    w.idle.store(true, std::memory_order_seq_cst);
    num_idle_.fetch_add(1, std::memory_order_relaxed);
    detail::Task* t = nullptr;
    for (;;) {
      t = idle_search(w, nullptr);
      if (t != nullptr) break;
      // seq_cst: pairs with shutdown's store; see all_workers_idle for the idle flags.
      if (stopping_.load(std::memory_order_seq_cst) && all_workers_idle()) {
        // One last look, made after seeing stopping_: every external submission happened
        // before shutdown set it (both under the global queue's lock), so it is visible now.
        // An earlier look may have run before a submission that just got in.
        t = find_task(w);
        break;
      }
    }
    if (t == nullptr) {
      // Drained: every worker is idle and no queue holds work. Wake the others so they see
      // the same and leave. (Our idle flag stays set: we never run again.)
      wake_all_sleepers();
      break;
    }
    num_idle_.fetch_sub(1, std::memory_order_relaxed);
    w.idle.store(false, std::memory_order_seq_cst);
    run_task(&w, t);
  }
  detail::tl_context.worker = nullptr;
}

void Executor::wait_for(detail::Latch& latch) {
  if (latch.done()) return;
  detail::Worker* w = detail::tl_context.worker;
  if (!is_my_worker(w)) {
    latch.wait_parked();
    return;
  }
  while (!latch.done()) {
    if (detail::Task* t = find_task(*w)) {
      run_task(w, t);
      continue;
    }
    if (detail::Task* t = idle_search(*w, &latch)) run_task(w, t);
  }
  latch.clear_waiter();
}

}  // namespace weft::cpu
