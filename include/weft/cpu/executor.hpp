// weft/cpu/executor.hpp - the work-stealing CPU executor.
//
//   weft::cpu::Executor ex;                       // one worker per hardware thread
//   auto f = ex.submit([] { return 6 * 7; });     // any thread
//   int v = f.get();                              // 42; rethrows the task's exception
//
// Workers own split deques (detail/split_deque.hpp); work submitted from outside the pool goes
// to a global queue. Idle workers steal from random victims, then sleep until work arrives.
// docs/cpu.md describes the protocol and the invariants.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/cpu/detail/group_state.hpp"
#include "weft/cpu/detail/task.hpp"
#include "weft/cpu/detail/worker.hpp"
#include "weft/cpu/future.hpp"
#include "weft/cpu/options.hpp"
#include "weft/error.hpp"

namespace weft::cpu {

/// Counters of an executor's life so far (approximate while it runs).
struct ExecutorStats {
  std::uint64_t tasks_run = 0;     // tasks popped or stolen and executed
  std::uint64_t tasks_inline = 0;  // spawns executed at once (work-first)
  std::uint64_t steals = 0;
  std::uint64_t sleeps = 0;  // times a worker went to sleep
  // Tasks a sleeping worker found on one of its periodic re-checks (detail::kParkLimit) rather
  // than through a wake-up: a wake-up that came late (it raced the re-check) or never came.
  std::uint64_t found_without_wakeup = 0;
};

class Executor {
 public:
  /// Starts the workers. Throws weft::InvalidArgument for bad options (bounds of 0, a
  /// public_bound + private_bound not below deque_capacity).
  explicit Executor(ExecutorOptions options = {});
  /// Same as shutdown(ShutdownMode::drain): every submitted task runs before the workers stop.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  [[nodiscard]] std::size_t num_workers() const noexcept { return workers_.size(); }
  [[nodiscard]] const ExecutorOptions& options() const noexcept { return options_; }

  /// Runs `f` asynchronously; the future yields its result or rethrows its exception. Never
  /// runs `f` on the calling thread. Any thread. Throws weft::ShutDown after shutdown() began
  /// (unless called from one of this executor's own tasks), weft::InvalidArgument for a null
  /// function pointer or empty std::function.
  template <class F>
  auto submit(F&& f) -> Future<std::invoke_result_t<std::decay_t<F>&>>;

  /// Runs `f` on one of the workers and returns its result, rethrowing its exception: the
  /// usual way in from outside the pool (like OpenMP's `parallel` + `single`), so that what `f`
  /// spawns goes to a worker's deque under the spawn policy rather than to the global queue.
  /// Called on one of this executor's workers, it simply calls `f`. Throws as submit() does.
  template <class F>
  auto run(F&& f) -> std::invoke_result_t<std::decay_t<F>&> {
    if (this_worker_index() >= 0) return f();
    return submit(std::forward<F>(f)).get();
  }

  /// Stops the executor. drain: runs everything already submitted (and what it spawns), then
  /// joins the workers. cancel_pending: tasks not yet started are cancelled (futures fail with
  /// weft::ShutDown). Idempotent; blocks until the workers have exited. Must not be called
  /// from one of this executor's workers (throws weft::InvalidState).
  void shutdown(ShutdownMode mode = ShutdownMode::drain);

  [[nodiscard]] bool is_shutting_down() const noexcept {
    return stopping_.load(std::memory_order_acquire);
  }

  [[nodiscard]] ExecutorStats stats() const noexcept;

  /// The processing units (hwloc logical indices) the workers are bound to, worker i to
  /// element i; empty when they are not bound (ExecutorOptions::pinning). Settled when the
  /// constructor returns.
  [[nodiscard]] const std::vector<std::size_t>& pinned_units() const noexcept {
    return pinned_units_;
  }

  /// Index of the calling thread among this executor's workers, or -1. Any thread.
  [[nodiscard]] int this_worker_index() const noexcept {
    const detail::Worker* w = detail::tl_context.worker;
    return (w != nullptr && w->executor == this) ? static_cast<int>(w->index) : -1;
  }

  // ---- used by TaskGroup, Future, the parallel algorithms; not for users -----------------

  /// Spawns `f` into `group` following the spawn policy: pushed for stealing, or run at once.
  template <class F>
  void spawn_into(detail::GroupState& group, F&& f);
  /// Spawns `f` into `group` as a real task that never runs on the caller (parallel
  /// algorithms and teams need their participants to be separate tasks).
  template <class F>
  void spawn_task_into(detail::GroupState& group, F&& f) {
    spawn_task(group, std::forward<F>(f), WhenFull::go_global);
  }
  /// Blocks until `latch` is zero; a worker of this executor runs other tasks meanwhile.
  void wait_for(detail::Latch& latch);
  /// Makes the calling worker's private tasks stealable and wakes a sleeping worker. Any thread.
  void publish_pending_work() noexcept {
    detail::Worker* w = detail::tl_context.worker;
    if (is_my_worker(w)) w->deque.publish(0);
    notify_work();
  }
  /// Queues a ready task: on the caller's deque when it is one of our workers, else globally.
  void enqueue(detail::Task* t) {
    detail::Worker* w = detail::tl_context.worker;
    if (is_my_worker(w)) {
      push_local(*w, t, WhenFull::go_global);
    } else {
      push_global(t);
    }
  }

 private:
  friend struct ExecutorAccess;
  [[nodiscard]] bool is_my_worker(const detail::Worker* w) const noexcept {
    return w != nullptr && w->executor == this;
  }
  [[nodiscard]] bool should_run_now(detail::Worker& w, std::uint32_t depth) noexcept;
  /// What push_local does when the deque is physically full.
  enum class WhenFull : std::uint8_t { run_now, go_global };
  template <class F>
  void spawn_task(detail::GroupState& group, F&& f, WhenFull when_full);
  template <class F>
  void run_now(detail::Worker& w, detail::GroupState& group, F& f);
  void push_local(detail::Worker& w, detail::Task* t, WhenFull when_full);
  void push_global(detail::Task* t);
  void after_local_push(detail::Worker& w) noexcept;
  void notify_work() noexcept;
  detail::Task* pop_global() noexcept;
  detail::Task* find_task(detail::Worker& w) noexcept;
  void run_task(detail::Worker* w, detail::Task* t) noexcept;
  void worker_main(detail::Worker& w);
  detail::Task* idle_search(detail::Worker& w, detail::Latch* latch);
  [[nodiscard]] bool all_workers_idle() const noexcept;
  void register_sleeper(std::uint32_t parker);
  void unregister_sleeper(std::uint32_t parker);
  void wake_all_sleepers();
  static void report_unhandled(std::exception_ptr e) noexcept;
  std::vector<std::size_t> choose_pinning();
  void release_pins() noexcept;

  ExecutorOptions options_;
  std::vector<std::size_t> pinned_units_;
  bool holds_automatic_pins_ = false;
  std::int64_t queue_bound_;
  std::int64_t private_bound_;
  std::vector<std::unique_ptr<detail::Worker>> workers_;

  // Global queue: intrusive FIFO of tasks submitted from outside the pool.
  alignas(64) std::mutex global_mutex_;
  detail::Task* global_head_ = nullptr;
  detail::Task* global_tail_ = nullptr;
  alignas(64) std::atomic<std::int64_t> global_size_{0};

  // Sleeping workers (and helpers blocked in wait_for), by Parker index.
  alignas(64) std::atomic<std::int64_t> num_sleepers_{0};
  std::atomic<std::int64_t> num_idle_{0};  // workers looking for work (stealing or asleep)
  std::mutex sleepers_mutex_;
  std::vector<std::uint32_t> sleepers_;

  alignas(64) std::atomic<bool> stopping_{false};
  std::atomic<bool> cancel_pending_{false};
  std::mutex shutdown_mutex_;
  bool joined_ = false;
};

// =====================================================================================
// Implementation of the templates (hot paths: spawning).

namespace detail {
template <class F>
bool is_null_callable(const F& f) noexcept {
  if constexpr (std::is_pointer_v<F> || std::is_member_pointer_v<F>) {
    return f == nullptr;
  } else if constexpr (requires { static_cast<bool>(f); } && !std::is_class_v<F>) {
    return !static_cast<bool>(f);
  } else if constexpr (requires { f == nullptr; }) {
    return f == nullptr;  // std::function, std::move_only_function
  } else {
    return false;
  }
}
}  // namespace detail

inline bool Executor::should_run_now(detail::Worker& w, std::uint32_t depth) noexcept {
  switch (options_.spawn_policy) {
    case SpawnPolicy::bounded_queue:
      return !w.deque.holds_fewer_than(queue_bound_);
    case SpawnPolicy::bounded_depth:
      return depth >= options_.depth_bound;
    case SpawnPolicy::help_first:
      return false;
  }
  return false;
}

template <class F>
void Executor::run_now(detail::Worker& w, detail::GroupState& group, F& f) {
  w.tasks_inline.bump();
  if (group.is_cancelled()) {
    group.note_cancelled();
    return;
  }
  detail::ThreadContext& ctx = detail::tl_context;
  const detail::ThreadContext saved = ctx;
  ctx.group = &group;
  ctx.depth = saved.depth + 1;
  try {
    f();
  } catch (...) {
    group.record_error(std::current_exception());
  }
  ctx = saved;
}

template <class F>
void Executor::spawn_into(detail::GroupState& group, F&& f) {
  if (detail::is_null_callable(f)) {
    throw InvalidArgument("weft::cpu::TaskGroup::spawn: the callable is empty (null)");
  }
  detail::ThreadContext& ctx = detail::tl_context;
  detail::Worker* w = ctx.worker;
  if (is_my_worker(w) && should_run_now(*w, ctx.depth)) {
    run_now(*w, group, f);
    return;
  }
  spawn_task(group, std::forward<F>(f), WhenFull::run_now);
}

template <class F>
void Executor::spawn_task(detail::GroupState& group, F&& f, WhenFull when_full) {
  detail::ThreadContext& ctx = detail::tl_context;
  detail::Worker* w = ctx.worker;
  detail::Task* t = detail::make_task(std::forward<F>(f), &group, ctx.depth + 1);
  group.latch().add(1);
  if (is_my_worker(w)) {
    push_local(*w, t, when_full);
  } else {
    push_global(t);
  }
}

inline void Executor::push_local(detail::Worker& w, detail::Task* t, WhenFull when_full) {
  if (!w.deque.push(t)) {
    // Deque physically full (only possible under help_first/bounded_depth): a spawn runs at
    // once, as the bounded policies would; a submit, which must not run on its caller, goes
    // to the global queue.
    if (when_full == WhenFull::run_now) {
      w.tasks_inline.bump();
      run_task(&w, t);
    } else {
      push_global(t);
    }
    return;
  }
  after_local_push(w);
}

inline void Executor::after_local_push(detail::Worker& w) noexcept {
  const std::int64_t priv = w.deque.private_size();
  if (priv > private_bound_) {
    w.deque.publish(private_bound_ / 2);
  } else if (w.deque.publish_requested() ||
             // relaxed: a hint that someone is hungry; a stale value only delays publication.
             num_idle_.load(std::memory_order_relaxed) > 0) {
    w.deque.publish(0);
  } else {
    return;
  }
  notify_work();
}

inline void Executor::notify_work() noexcept {
  // seq_cst: ordered after the seq_cst publication of the work (split store or global size
  // store) and before... pairs with register_sleeper's seq_cst increment followed by the
  // sleeper's re-check of the queues: either we see the sleeper, or it sees the work.
  if (num_sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::uint32_t parker = 0;
    {
      std::lock_guard<std::mutex> lock(sleepers_mutex_);
      if (!sleepers_.empty()) {
        parker = sleepers_.back();
        sleepers_.pop_back();
        num_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
    }
    if (parker != 0) detail::parker_at(parker).unpark();
  }
}

template <class F>
auto Executor::submit(F&& f) -> Future<std::invoke_result_t<std::decay_t<F>&>> {
  using R = std::invoke_result_t<std::decay_t<F>&>;
  if (detail::is_null_callable(f)) {
    throw InvalidArgument("weft::cpu::Executor::submit: the callable is empty (null)");
  }
  detail::ThreadContext& ctx = detail::tl_context;
  detail::Worker* w = ctx.worker;
  if (!is_my_worker(w) && stopping_.load(std::memory_order_acquire)) {
    throw ShutDown("weft::cpu::Executor::submit: the executor is shutting down");
  }
  auto state = detail::FutureState<R>::create(*this);
  Future<R> future(state);
  detail::Task* t = detail::make_task(
      detail::FutureTask<R, std::decay_t<F>>{std::move(state), std::forward<F>(f)}, nullptr,
      ctx.depth + 1);
  enqueue(t);
  return future;
}

}  // namespace weft::cpu
