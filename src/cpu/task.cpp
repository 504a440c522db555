// The slow paths of task allocation: the shared depot of free tasks, and the thread-exit
// cleanup of a thread's free list.
#include <mutex>

#include "weft/cpu/detail/task.hpp"

namespace weft::cpu::detail {

namespace {

void delete_task_memory(Task* t) noexcept {
  ::operator delete (t, std::align_val_t{alignof(Task)});
}

// Batches of kDepotBatch free tasks, each a chain through Task::next ending in null. Bounded:
// 256 batches (2 MiB of tasks); past that, batches go back to the heap.
class Depot {
 public:
  static constexpr std::size_t kMaxBatches = 256;

  // Stores a batch; false (nothing stored) when full.
  bool put(Task* batch) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (count_ == kMaxBatches) return false;
    batches_[count_++] = batch;
    return true;
  }
  // A batch, or null when empty.
  Task* take() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_ == 0 ? nullptr : batches_[--count_];
  }
  std::size_t batches() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 private:
  std::mutex mutex_;
  std::size_t count_ = 0;
  Task* batches_[kMaxBatches] = {};
};

// Never destroyed: worker threads may free tasks after static destruction began.
Depot& depot() {
  static Depot* d = new Depot;
  return *d;
}

struct FreeListCleanup {
  bool armed = false;
  ~FreeListCleanup() {
    TaskFreeList& fl = tl_free_list;
    fl.thread_exiting = true;
    while (Task* t = fl.head) {
      fl.head = t->next;
      delete_task_memory(t);
    }
    fl.count = 0;
  }
};

thread_local FreeListCleanup tl_cleanup;

}  // namespace

void prepare_thread_free_list() noexcept {
  if (!tl_cleanup.armed) tl_cleanup.armed = true;  // first touch registers the destructor
}

Task* allocate_task_slow() {
  prepare_thread_free_list();
  TaskFreeList& fl = tl_free_list;
  if (!fl.thread_exiting) {
    if (Task* batch = depot().take()) {
      fl.head = batch->next;
      fl.count = kDepotBatch - 1;
      return batch;
    }
  }
  return static_cast<Task*>(::operator new (sizeof(Task), std::align_val_t{alignof(Task)}));
}

void free_task_slow(Task* t) noexcept {
  prepare_thread_free_list();
  TaskFreeList& fl = tl_free_list;
  if (fl.thread_exiting) {
    delete_task_memory(t);
    return;
  }
  // The batch: t and the kDepotBatch - 1 newest tasks of the list (the list holds kFreeListCap
  // >= kDepotBatch of them here).
  Task* last = t;
  t->next = fl.head;
  for (std::uint32_t k = 1; k < kDepotBatch; ++k) last = last->next;
  fl.head = last->next;
  fl.count -= kDepotBatch - 1;
  last->next = nullptr;
  if (depot().put(t)) return;
  while (t != nullptr) {  // the depot is full
    Task* next = t->next;
    delete_task_memory(t);
    t = next;
  }
}

std::size_t depot_tasks() noexcept { return depot().batches() * kDepotBatch; }

static_assert(kFreeListCap >= kDepotBatch, "a full list must hold a batch");

}  // namespace weft::cpu::detail
