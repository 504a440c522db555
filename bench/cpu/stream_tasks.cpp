// STREAM, empty tasks and task chains: weft's versions.
#include <algorithm>
#include <atomic>

#include "common.hpp"
#include "kernels.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/cpu/task_group.hpp"

namespace weft::bench::cpu {

using weft::cpu::TaskGroup;

double stream_bytes(StreamOp op, std::size_t n) {
  const double words = (op == StreamOp::copy || op == StreamOp::scale) ? 2.0 : 3.0;
  return words * sizeof(double) * static_cast<double>(n);
}

void stream_init_weft(Executor& ex, StreamArrays& s, std::size_t n) {
  // Allocated without touching, then first-touched in parallel (as STREAM does).
  s.a = std::vector<double>();
  s.a.reserve(n);
  s.a.resize(n);  // value-initialised serially by std::vector; re-touched below
  s.b.resize(n);
  s.c.resize(n);
  weft::cpu::parallel_for_range(ex, 0, static_cast<std::int64_t>(n),
                                [&](std::int64_t b, std::int64_t e) {
                                  for (std::int64_t i = b; i < e; ++i) {
                                    s.a[static_cast<std::size_t>(i)] = 1.0;
                                    s.b[static_cast<std::size_t>(i)] = 2.0;
                                    s.c[static_cast<std::size_t>(i)] = 0.0;
                                  }
                                });
}

void stream_weft(Executor& ex, StreamArrays& s, StreamOp op, double scalar) {
  double* __restrict a = s.a.data();
  double* __restrict b = s.b.data();
  double* __restrict c = s.c.data();
  const auto n = static_cast<std::int64_t>(s.a.size());
  weft::cpu::parallel_for_range(ex, 0, n, [=](std::int64_t lo, std::int64_t hi) {
    common::stream_range(op, a, b, c, scalar, lo, hi);
  });
}

std::int64_t empty_tasks_weft(Executor& ex, std::int64_t n) {
  // One spawning thread (a task of the pool, like OpenMP's single), one group, n tasks.
  std::vector<CountSlot> slots(kMaxCountSlots);
  ex.run([&ex, &slots, n] {
    TaskGroup g(ex);
    for (std::int64_t i = 0; i < n; ++i) {
      g.spawn([&ex, &slots] { ++slots[static_cast<std::size_t>(ex.this_worker_index())].v; });
    }
    g.wait();
  });
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

std::int64_t external_spawns_weft(Executor& ex, std::int64_t n, std::int64_t pause_ns) {
  std::vector<CountSlot> slots(kMaxCountSlots);
  {
    TaskGroup g(ex);  // spawned into from this thread, outside the pool
    for (std::int64_t i = 0; i < n; i += 2) {
      for (std::int64_t k = i; k < std::min(n, i + 2); ++k) {
        g.spawn([&ex, &slots] { ++slots[static_cast<std::size_t>(ex.this_worker_index())].v; });
      }
      common::spin_for_ns(pause_ns);
    }
    g.wait();
  }
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

namespace {
struct ChainLink {
  TaskGroup* group;
  std::int64_t* ran;
  std::int64_t i;
  std::int64_t n;
  void operator()() const {
    // The previous link happened-before this one (it spawned us at its end), so the plain
    // counter is race-free and counts in order.
    if (*ran != i) return;  // out of order: leave the count short, verification fails
    ++*ran;
    if (i + 1 < n) group->spawn(ChainLink{group, ran, i + 1, n});
  }
};
}  // namespace

std::int64_t task_chain_weft(Executor& ex, std::int64_t n) {
  std::int64_t ran = 0;
  ex.run([&] {
    TaskGroup g(ex);
    g.spawn(ChainLink{&g, &ran, 0, n});
    g.wait();
  });
  return ran;
}

}  // namespace weft::bench::cpu
