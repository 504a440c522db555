// weft/cpu/future.hpp - the result of Executor::submit.
//
// Unlike std::future, get() called on a worker of the executor runs other tasks while it waits
// (so a task may wait on another task's future without deadlocking the pool), and a thread
// outside the pool sleeps instead of spinning.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/cpu/detail/latch.hpp"
#include "weft/error.hpp"

namespace weft::cpu {

class Executor;

namespace detail {

/// Blocks until `latch` is zero, helping when called on a worker of `ex`. Defined in executor.cpp.
void executor_wait_for(Executor& ex, Latch& latch);

template <class R>
class FutureState {
 public:
  static std::shared_ptr<FutureState> create(Executor& ex) {
    return std::make_shared<FutureState>(ex);
  }
  explicit FutureState(Executor& ex) noexcept : executor_(&ex), latch_(1) {}

  template <class... A>
  void set_value(A&&... a) {
    if constexpr (!std::is_void_v<R>) value_.emplace(std::forward<A>(a)...);
    latch_.arrive();
  }
  void set_error(std::exception_ptr e) noexcept {
    error_ = std::move(e);
    latch_.arrive();
  }

  [[nodiscard]] bool ready() const noexcept { return latch_.done(); }
  void wait() { executor_wait_for(*executor_, latch_); }

  R take() {
    wait();
    // The exception is moved out, not shared: the worker may drop the last reference to this
    // state after the caller has caught and read the exception, and libstdc++'s exception
    // reference count is invisible to ThreadSanitizer. Moved, the caller holds the only one.
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if constexpr (!std::is_void_v<R>) return std::move(*value_);
  }

 private:
  Executor* executor_;
  Latch latch_;
  std::exception_ptr error_;
  std::conditional_t<std::is_void_v<R>, char, std::optional<R>> value_;
};

/// The callable a submitted task stores: runs the user's function into the shared state.
template <class R, class F>
struct FutureTask {
  std::shared_ptr<FutureState<R>> state;
  F fn;

  void operator()() {
    // The error is published after the handler is left: inside it this worker still holds the
    // caught exception, and would drop that hold after the waiter may already be reading it.
    std::exception_ptr error;
    try {
      if constexpr (std::is_void_v<R>) {
        fn();
        state->set_value();
        return;
      } else {
        state->set_value(fn());
        return;
      }
    } catch (...) {
      error = std::current_exception();
    }
    state->set_error(std::move(error));
  }
  void on_cancel() noexcept {
    state->set_error(std::make_exception_ptr(
        ShutDown("weft::cpu: task cancelled by executor shutdown before it started")));
  }
};

}  // namespace detail

/// The eventual result of a submitted task. Move-only. get() may be called once.
template <class R>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<R>> s) noexcept : state_(std::move(s)) {}

  /// True until get() has been called (or for a default-constructed future: false).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  /// True when the task has finished (value or exception). Any thread.
  [[nodiscard]] bool ready() const {
    check("ready");
    return state_->ready();
  }
  /// Blocks until the task has finished; a worker runs other tasks meanwhile.
  void wait() const {
    check("wait");
    state_->wait();
  }
  /// Waits, then returns the result or rethrows the task's exception (weft::ShutDown when the
  /// task was cancelled by a shutdown). Throws weft::InvalidState on an invalid future.
  R get() {
    check("get");
    auto s = std::move(state_);
    return s->take();
  }

 private:
  void check(const char* what) const {
    if (!state_) {
      throw InvalidState(std::string("weft::cpu::Future::") + what +
                         ": the future has no state (default-constructed, or get() was called)");
    }
  }
  std::shared_ptr<detail::FutureState<R>> state_;
};

}  // namespace weft::cpu
