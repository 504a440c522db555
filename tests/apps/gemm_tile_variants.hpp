// The batched GEMM's tile tasks with alpha = -2, beta != 0 and every third task lower_only,
// with or without c_through_shared: the host and device tests compare the C each writes.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"

namespace apps::gpu::test {

template <class T>
std::vector<AppPool::Record> varied_tile_tasks(const GemmBatch& batch, const T* a, const T* b, T* c,
                                               bool through_shared) {
  using Tile = std::conditional_t<std::is_same_v<T, double>, DgemmTile, SgemmTile>;
  auto tasks = gemm_tasks<T, kAppCapacity>(batch, a, b, c);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    auto p = tasks[t].template as<Tile>();
    p.alpha = T(-2);  // a power of two: alpha A B stays exact
    p.beta = T(0.5);
    p.lower_only = t % 3 == 0;
    p.c_through_shared = through_shared;
    tasks[t] = AppPool::Record::make<Tile>(p, tasks[t].tag);
  }
  return tasks;
}

/// C's values before the tasks: small integers, so that beta C is exact.
template <class T>
std::vector<T> varied_c_before(const GemmBatch& batch) {
  std::vector<T> c(batch.c_size);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = T(static_cast<int>(i % 7) - 3);
  return c;
}

}  // namespace apps::gpu::test
