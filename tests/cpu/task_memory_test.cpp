#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "weft/cpu/detail/task.hpp"

namespace weft::cpu::detail {
namespace {

// A thread that only frees (a thief running what another thread spawned) keeps kFreeListCap
// tasks and hands the rest to the depot in batches; a thread with an empty list takes a batch
// from the depot before asking the heap. Without the depot those tasks went back to the heap,
// into the spawner's malloc arena under its lock.
TEST(TaskMemory, FreesPastTheCapReachTheDepotAndAllocationsTakeFromIt) {
  constexpr std::size_t kTasks = kFreeListCap + 10 * kDepotBatch;
  std::vector<Task*> tasks;
  std::thread([&] {  // the spawner
    for (std::size_t i = 0; i < kTasks; ++i) tasks.push_back(allocate_task());
  })
      .join();
  const std::size_t before = depot_tasks();
  std::thread([&] {  // the thief: frees everything; its list keeps kFreeListCap at most
    for (Task* t : tasks) free_task(t);
    EXPECT_LE(tl_free_list.count, kFreeListCap);
  })
      .join();
  // Each free past the cap moves a batch (it and 63 of the list) and the next 63 refill the
  // list: 10 batches. A thread's exit frees its own list to the heap, not to the depot.
  EXPECT_EQ(depot_tasks(), before + 10 * kDepotBatch);

  std::set<Task*> freed(tasks.begin(), tasks.end());
  std::thread([&] {  // a fresh thread: its first allocation takes one whole batch
    std::vector<Task*> mine{allocate_task()};
    EXPECT_EQ(freed.count(mine[0]), 1u) << "not a recycled task";
    EXPECT_EQ(tl_free_list.count, kDepotBatch - 1);
    for (std::uint32_t k = 1; k < kDepotBatch; ++k) mine.push_back(allocate_task());
    for (Task* t : mine) EXPECT_EQ(freed.count(t), 1u);
    EXPECT_EQ(tl_free_list.count, 0u);
    EXPECT_EQ(depot_tasks(), before + 9 * kDepotBatch);
    for (Task* t : mine) free_task(t);  // to this thread's list, freed at its exit
  })
      .join();
}

}  // namespace
}  // namespace weft::cpu::detail
