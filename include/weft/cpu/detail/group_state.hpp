// weft/cpu/detail/group_state.hpp - what the tasks of one group share.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "weft/cpu/detail/latch.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::cpu::detail {

class GroupState {
 public:
  GroupState(Executor& executor, GroupState* parent) noexcept
      : executor_(&executor), parent_(parent) {}
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;

  [[nodiscard]] Executor& executor() const noexcept { return *executor_; }
  [[nodiscard]] GroupState* parent() const noexcept { return parent_; }
  Latch& latch() noexcept { return latch_; }

  [[nodiscard]] bool is_cancelled() const noexcept {
    // relaxed: cancellation is advisory for tasks not yet started; the waiter reads the final
    // value after the latch's acquire.
    return cancelled_.load(std::memory_order_relaxed);
  }
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }

  /// Keeps the first exception of the group and cancels the rest. Any thread.
  void record_error(std::exception_ptr e) noexcept {
    bool expected = false;
    // acq_rel: exactly one thread wins and writes error_; the waiter reads error_ after the
    // latch reaches zero (the winner's arrive() releases the write).
    if (has_error_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      error_ = std::move(e);
    }
    cancel();
  }

  void note_cancelled() noexcept { cancelled_tasks_.fetch_add(1, std::memory_order_relaxed); }

  /// Waiter only, after the latch is done: takes the stored error (or null) and resets the
  /// group for reuse. Returns whether the group had been cancelled.
  bool take_outcome(std::exception_ptr& error) noexcept {
    const bool was_cancelled = cancelled_.load(std::memory_order_relaxed);
    if (has_error_.load(std::memory_order_acquire)) {
      error = std::move(error_);
      error_ = nullptr;
      has_error_.store(false, std::memory_order_relaxed);
    }
    cancelled_.store(false, std::memory_order_relaxed);
    return was_cancelled;
  }

  [[nodiscard]] std::uint64_t cancelled_tasks() const noexcept {
    return cancelled_tasks_.load(std::memory_order_relaxed);
  }

 private:
  Latch latch_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> has_error_{false};
  std::atomic<std::uint64_t> cancelled_tasks_{0};
  std::exception_ptr error_;
  Executor* executor_;
  GroupState* parent_;  // group of the task that created this group (self-wait detection)
};

}  // namespace weft::cpu::detail
