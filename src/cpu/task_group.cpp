#include "weft/cpu/task_group.hpp"

#include <exception>

namespace weft::cpu {

void TaskGroup::check_not_waiting_on_itself() const {
  for (const detail::GroupState* g = detail::tl_context.group; g != nullptr; g = g->parent()) {
    if (g == &state_) {
      throw InvalidState(
          "weft::cpu::TaskGroup::wait: called from a task of this group (or of a group nested "
          "in it); the wait could never finish");
    }
  }
}

GroupStatus TaskGroup::wait() {
  if (!state_.latch().done()) {
    check_not_waiting_on_itself();
    state_.executor().wait_for(state_.latch());
  }
  std::exception_ptr error;
  const bool cancelled = state_.take_outcome(error);
  if (error) std::rethrow_exception(error);
  return cancelled ? GroupStatus::cancelled : GroupStatus::complete;
}

void TaskGroup::wait_noexcept() noexcept {
  if (!state_.latch().done()) state_.executor().wait_for(state_.latch());
  std::exception_ptr dropped;  // a second error while the first propagates: the first wins
  state_.take_outcome(dropped);
}

TaskGroup::~TaskGroup() {
  // The frame that owns a group is never one of its tasks, so this wait cannot be a
  // self-wait; it only keeps running tasks from outliving the frame they reference.
  if (!state_.latch().done()) state_.executor().wait_for(state_.latch());
  std::exception_ptr error;
  state_.take_outcome(error);
  if (error)
    detail::report_unobserved_error("weft::cpu::TaskGroup (destroyed without wait)", error);
}

}  // namespace weft::cpu
