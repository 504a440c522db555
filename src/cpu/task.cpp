// The slow path of task allocation and the thread-exit cleanup of the free list.
#include "weft/cpu/detail/task.hpp"

namespace weft::cpu::detail {

namespace {

struct FreeListCleanup {
  bool armed = false;
  ~FreeListCleanup() {
    TaskFreeList& fl = tl_free_list;
    fl.thread_exiting = true;
    while (Task* t = fl.head) {
      fl.head = t->next;
      ::operator delete (t, std::align_val_t{alignof(Task)});
    }
    fl.count = 0;
  }
};

thread_local FreeListCleanup tl_cleanup;

}  // namespace

Task* allocate_task_slow() {
  if (!tl_cleanup.armed) tl_cleanup.armed = true;  // first touch registers the destructor
  return static_cast<Task*>(::operator new (sizeof(Task), std::align_val_t{alignof(Task)}));
}

}  // namespace weft::cpu::detail
