// weft/cpu/detail/task.hpp - the type-erased task record and its per-thread free list.
//
// A Task holds a callable in place (up to kTaskInlineBytes) or on the heap, and one function
// pointer that either runs or cancels it and then destroys it: exactly one of the two happens to
// every task, which is how "every task runs or is cancelled exactly once" is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace weft::cpu::detail {

class GroupState;

enum class TaskOp : std::uint8_t { run, cancel };

inline constexpr std::size_t kTaskSize = 128;

struct alignas(64) Task {
  using Thunk = void (*)(Task*, TaskOp);
  Thunk thunk;          // runs or cancels the callable, then destroys it (never both)
  GroupState* group;    // group the task belongs to, or null
  Task* next;           // link in a free list or in the global queue
  std::uint32_t depth;  // spawn depth, for SpawnPolicy::bounded_depth
  static constexpr std::size_t kHeader = 32;
  alignas(16) unsigned char storage[kTaskSize - kHeader];
};
static_assert(sizeof(Task) == kTaskSize);
static_assert(offsetof(Task, storage) == Task::kHeader);

inline constexpr std::size_t kTaskInlineBytes = sizeof(Task::storage);

/// A callable may define on_cancel() to learn that it will never run (futures use it).
template <class F>
concept HasOnCancel = requires(F& f) {
  f.on_cancel();
};

template <class F>
inline constexpr bool kStoredInline = sizeof(F) <= kTaskInlineBytes &&
                                      alignof(F) <= 16 && std::is_nothrow_move_constructible_v<F>;

template <class F>
F* callable_of(Task* t) noexcept {
  if constexpr (kStoredInline<F>) {
    return std::launder(reinterpret_cast<F*>(t->storage));
  } else {
    return *std::launder(reinterpret_cast<F**>(t->storage));
  }
}

template <class F>
void destroy_callable(Task* t) noexcept {
  F* f = callable_of<F>(t);
  if constexpr (kStoredInline<F>) {
    f->~F();
  } else {
    delete f;
  }
}

template <class F>
void task_thunk(Task* t, TaskOp op) {
  F* f = callable_of<F>(t);
  struct Destroy {
    Task* t;
    ~Destroy() { destroy_callable<F>(t); }
  } destroy{t};
  if (op == TaskOp::run) {
    (*f)();
  } else if constexpr (HasOnCancel<F>) {
    f->on_cancel();
  }
}

// ---- per-thread free list ----------------------------------------------------------------
// Tasks are recycled through a free list of the thread that finishes them, so the steady state
// of a spawning program allocates nothing. A task may be freed on another thread than the one
// that allocated it; the list is capped so a thread that only frees cannot hoard memory.

inline constexpr std::uint32_t kFreeListCap = 1024;

struct TaskFreeList {
  Task* head;
  std::uint32_t count;
  bool thread_exiting;  // set by the thread-exit cleanup: later frees go to the heap
};

inline thread_local TaskFreeList tl_free_list{nullptr, 0, false};

/// Allocates fresh task memory and, the first time on a thread, arranges to free the thread's
/// list at thread exit. Out of line: the slow path.
Task* allocate_task_slow();

inline Task* allocate_task() {
  TaskFreeList& fl = tl_free_list;
  if (Task* t = fl.head) {
    fl.head = t->next;
    --fl.count;
    return t;
  }
  return allocate_task_slow();
}

inline void free_task(Task* t) noexcept {
  TaskFreeList& fl = tl_free_list;
  if (fl.count < kFreeListCap && !fl.thread_exiting) {
    t->next = fl.head;
    fl.head = t;
    ++fl.count;
    return;
  }
  ::operator delete (t, std::align_val_t{alignof(Task)});
}

/// Builds a task that will run `f`. Throws std::bad_alloc only.
template <class F>
Task* make_task(F&& f, GroupState* group, std::uint32_t depth) {
  using Fn = std::decay_t<F>;
  Task* t = allocate_task();
  t->thunk = &task_thunk<Fn>;
  t->group = group;
  t->next = nullptr;
  t->depth = depth;
  if constexpr (kStoredInline<Fn>) {
    ::new (static_cast<void*>(t->storage)) Fn(std::forward<F>(f));
  } else {
    try {
      Fn* heap = new Fn(std::forward<F>(f));
      ::new (static_cast<void*>(t->storage)) Fn*(heap);
    } catch (...) {
      free_task(t);
      throw;
    }
  }
  return t;
}

}  // namespace weft::cpu::detail
