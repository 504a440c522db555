// weft/cpu/task_group.hpp - fork/join: spawn tasks, then wait for all of them.
//
//   long fib(weft::cpu::Executor& ex, int n) {
//     if (n < 2) return n;
//     long a = 0;
//     weft::cpu::TaskGroup g(ex);
//     g.spawn([&] { a = fib(ex, n - 1); });
//     long b = fib(ex, n - 2);
//     g.wait();                        // blocking mode: this worker runs other tasks meanwhile
//     return a + b;
//   }
//
// Spawning follows the executor's SpawnPolicy: under bounded_queue a spawn whose deque is full
// runs the task at once on the spawning thread (work-first), otherwise it is pushed for thieves.
// The first exception thrown by a task cancels the group's tasks that have not started and is
// rethrown by wait().
#pragma once

#include <exception>
#include <utility>

#include "weft/cpu/detail/group_state.hpp"
#include "weft/cpu/executor.hpp"

namespace weft::cpu {

/// How a wait() ended when no task threw.
enum class GroupStatus : std::uint8_t { complete, cancelled };

class TaskGroup {
 public:
  /// A group whose tasks run on `executor`. The group must not outlive the executor.
  explicit TaskGroup(Executor& executor) noexcept : state_(executor, detail::tl_context.group) {}
  /// Waits for tasks still running (a group never leaves tasks that reference a dead frame). An
  /// exception that no wait() observed is reported on stderr, since a destructor cannot throw.
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  /// Spawns `f` into the group. Any thread, including the group's own tasks. Throws
  /// weft::InvalidArgument for an empty callable.
  template <class F>
  void spawn(F&& f) {
    state_.executor().spawn_into(state_, std::forward<F>(f));
  }

  /// Waits until every task spawned so far (and those they spawn into this group) has finished.
  /// On a worker it runs other tasks meanwhile (a blocking wait that keeps the core busy);
  /// elsewhere it sleeps. Rethrows the first exception of a task; returns cancelled when cancel()
  /// was called. The group is reusable afterwards. Throws weft::InvalidState when called from a
  /// task of this group, or of a group nested inside it (it would wait for itself).
  GroupStatus wait();

  /// Tasks of the group that have not started will not run (they count as cancelled); running
  /// tasks finish. Any thread.
  void cancel() noexcept { state_.cancel(); }
  [[nodiscard]] bool is_cancelled() const noexcept { return state_.is_cancelled(); }

  /// Tasks skipped because the group was cancelled, since construction.
  [[nodiscard]] std::uint64_t cancelled_tasks() const noexcept { return state_.cancelled_tasks(); }

  /// For weft's own algorithms: the state to spawn real tasks into, and a wait that swallows
  /// the outcome (used while another exception is already propagating).
  detail::GroupState& state_for_algorithms() noexcept { return state_; }
  void wait_noexcept() noexcept;

 private:
  void check_not_waiting_on_itself() const;
  detail::GroupState state_;
};

/// Non-blocking wait: the remainder of a parent becomes a continuation that
/// runs as a task when the last child finishes; nobody blocks.
///
///   auto join = weft::cpu::Continuation::create(ex, [&] { combine(); });
///   join.spawn([&] { left(); });
///   join.spawn([&] { right(); });
///   join.release();   // from now on, the last child to finish releases the continuation
///
/// The continuation runs exactly once, even if no child was spawned. An exception in a child
/// cancels the children that have not started; a continuation taking a std::exception_ptr
/// receives the first one (null when none), a plain one runs anyway and the exception is
/// reported on stderr. An executor shutdown in cancel_pending mode cancels unstarted children
/// and the continuation.
class Continuation {
 public:
  struct Node;  // detail/continuation_node.hpp

  /// A non-owning handle that a running child uses to spawn siblings or to create nested
  /// continuations. Valid while a child of the continuation is running (the child keeps it
  /// from completing).
  class Ref {
   public:
    template <class F>
    void spawn(F&& f) const;

   private:
    friend class Continuation;
    explicit Ref(Node* n) noexcept : node_(n) {}
    Node* node_;
  };

  template <class F>
  static Continuation create(Executor& ex, F&& then);
  /// A continuation nested in `parent`: `parent`'s continuation waits until this one has run
  /// (Cilk's tree of joins: fib in continuation-passing style needs exactly this).
  template <class F>
  static Continuation create_child(Ref parent, F&& then);

  /// Handle for children; throws weft::InvalidState after release().
  [[nodiscard]] Ref ref() const;

  Continuation(Continuation&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
  Continuation& operator=(Continuation&&) = delete;
  Continuation(const Continuation&) = delete;
  /// An unreleased Continuation releases itself.
  ~Continuation() {
    if (node_ != nullptr) release();
  }

  /// Spawns a child. Any thread, before release() or from a running child.
  template <class F>
  void spawn(F&& f);
  /// Arms the continuation. Call once; the handle is empty afterwards.
  void release();

 private:
  template <class F>
  static Continuation make(Executor& ex, Node* parent, F&& then);
  static void spawn_into(Node* node, detail::Task* t);
  explicit Continuation(Node* n) noexcept : node_(n) {}
  Node* node_;
};

}  // namespace weft::cpu

#include "weft/cpu/detail/continuation_node.hpp"
