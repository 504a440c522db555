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

// ---- per-thread free list and the shared depot ---------------------------------------------
// Tasks are recycled through a free list of the thread that finishes them, so the steady state
// of a spawning program allocates nothing. A task is often freed on another thread than the one
// that allocated it (a thief runs what the spawner made): the thief's list then grows while the
// spawner's stays empty. Past kFreeListCap, a thread hands kDepotBatch tasks at once to a
// process-wide depot, and a thread whose list is empty takes a batch from it before asking the
// heap: one lock per batch, and no task goes back to the heap of a thread that is allocating
// (glibc's free() of a chunk from another thread's arena takes that arena's lock, and the
// spawner and the thief then convoy on it: docs/cpu.md, "Task memory").

inline constexpr std::uint32_t kFreeListCap = 1024;
inline constexpr std::uint32_t kDepotBatch = 64;

struct TaskFreeList {
  Task* head;
  std::uint32_t count;
  bool thread_exiting;  // set by the thread-exit cleanup: later frees go to the heap
};

inline thread_local TaskFreeList tl_free_list{nullptr, 0, false};

/// The thread's list is empty: takes a batch from the depot into it and returns one task, or
/// allocates fresh memory (and, the first time on a thread, arranges to free the thread's list
/// at thread exit). Out of line: the slow path.
Task* allocate_task_slow();
/// The thread's list is full: moves a batch of it, with `t`, to the depot (to the heap when the
/// depot is full or the thread is exiting). Out of line: the slow path.
void free_task_slow(Task* t) noexcept;

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
  free_task_slow(t);
}

/// Arranges for the calling thread's free list to be freed when it exits (allocate_task_slow
/// does it too): for threads that may free tasks without ever allocating one (workers).
void prepare_thread_free_list() noexcept;

/// Tasks held by the depot now (batches x kDepotBatch). Any thread; for tests.
std::size_t depot_tasks() noexcept;

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
