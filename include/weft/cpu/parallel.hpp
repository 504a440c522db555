// weft/cpu/parallel.hpp - data parallelism on the executor: loops, reductions, double buffering.
//
//   weft::cpu::parallel_for(ex, 0, n, [&](std::int64_t i) { y[i] = a * x[i] + y[i]; });
//   double s = weft::cpu::parallel_reduce(ex, 0, n, 0.0,
//       [&](std::int64_t b, std::int64_t e, double acc) { for (; b < e; ++b) acc += x[b]; return
//       acc; }, std::plus<>{});
//
// Schedules: static (one part per worker, StaticPartition's sizes: the default) and dynamic
// (participants take chunks of `grain` items from a shared counter, OpenMP's dynamic). A
// calling worker runs one part itself; a caller outside the pool waits. Exceptions from the body
// cancel the parts not started and are rethrown to the caller.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/partition.hpp"
#include "weft/cpu/task_group.hpp"
#include "weft/error.hpp"

namespace weft::cpu {

struct Schedule {
  enum class Kind : std::uint8_t { static_partition, dynamic };
  Kind kind = Kind::static_partition;
  std::int64_t grain = 1;  // dynamic: items taken at a time
  /// static: parts; 0 = one per worker.
  std::int64_t parts = 0;

  static Schedule static_partition(std::int64_t parts = 0) {
    return Schedule{Kind::static_partition, 1, parts};
  }
  /// Throws weft::InvalidArgument when grain < 1.
  static Schedule dynamic(std::int64_t grain) {
    if (grain < 1) {
      throw InvalidArgument("weft::cpu::Schedule::dynamic: grain must be >= 1 (got " +
                            std::to_string(grain) + ")");
    }
    return Schedule{Kind::dynamic, grain, 0};
  }
};

namespace detail {

inline void check_schedule(const Schedule& s, const char* who) {
  if (s.grain < 1) {
    throw InvalidArgument(std::string(who) + ": grain must be >= 1 (got " +
                          std::to_string(s.grain) + ")");
  }
  if (s.parts < 0) {
    throw InvalidArgument(std::string(who) + ": parts must be >= 0 (got " +
                          std::to_string(s.parts) + ")");
  }
}

/// Runs participant(k) for k in [0, parts). On a worker, k = 0 runs on the calling thread and
/// the others are tasks; from outside the pool every part is a task and the caller sleeps, so
/// that the parts never compete with an extra thread for the cores.
template <class P>
void run_participants(Executor& ex, std::int64_t parts, P& participant) {
  TaskGroup g(ex);
  const std::int64_t first_task = ex.this_worker_index() >= 0 ? 1 : 0;
  for (std::int64_t k = first_task; k < parts; ++k) {
    ex.spawn_task_into(g.state_for_algorithms(), [&participant, k] { participant(k); });
  }
  ex.publish_pending_work();
  if (first_task == 1) {
    try {
      participant(0);
    } catch (...) {
      g.cancel();
      g.wait_noexcept();
      throw;
    }
  }
  g.wait();
}

}  // namespace detail

/// Calls body(b, e) on disjoint sub-ranges covering [first, last). Blocks until all are done.
/// An empty range returns at once. Throws what the body throws, or weft::InvalidArgument for a
/// bad schedule.
template <class Body>
void parallel_for_range(Executor& ex, std::int64_t first, std::int64_t last, Body&& body,
                        Schedule schedule = Schedule::static_partition()) {
  detail::check_schedule(schedule, "weft::cpu::parallel_for");
  if (last <= first) return;
  const std::int64_t n = last - first;
  const auto workers = static_cast<std::int64_t>(ex.num_workers());
  if (schedule.kind == Schedule::Kind::static_partition) {
    const std::int64_t parts = std::min(n, schedule.parts > 0 ? schedule.parts : workers);
    const StaticPartition part(first, last, parts);
    auto participant = [&](std::int64_t k) { body(part.begin(k), part.end(k)); };
    detail::run_participants(ex, parts, participant);
    return;
  }
  const std::int64_t grain = schedule.grain;
  const std::int64_t parts = std::min(workers, (n + grain - 1) / grain);
  std::atomic<std::int64_t> next{first};
  auto participant = [&](std::int64_t) {
    for (;;) {
      // relaxed: the counter only hands out disjoint chunks; the join publishes the results.
      const std::int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= last) return;
      body(b, std::min(last, b + grain));
    }
  };
  detail::run_participants(ex, parts, participant);
}

/// Calls body(i) for every i in [first, last).
template <class Body>
void parallel_for(Executor& ex, std::int64_t first, std::int64_t last, Body&& body,
                  Schedule schedule = Schedule::static_partition()) {
  parallel_for_range(
      ex, first, last,
      [&body](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) body(i);
      },
      schedule);
}

/// Reduces [first, last): each participant folds its sub-ranges with body(b, e, acc) -> acc,
/// starting from `identity`; the partial results are combined with combine(a, b) in participant
/// order (deterministic under the static schedule).
template <class T, class Body, class Combine>
T parallel_reduce(Executor& ex, std::int64_t first, std::int64_t last, T identity, Body&& body,
                  Combine&& combine, Schedule schedule = Schedule::static_partition()) {
  detail::check_schedule(schedule, "weft::cpu::parallel_reduce");
  if (last <= first) return identity;
  const std::int64_t n = last - first;
  const auto workers = static_cast<std::int64_t>(ex.num_workers());
  struct alignas(64) Partial {
    T value;
  };
  if (schedule.kind == Schedule::Kind::static_partition) {
    const std::int64_t parts = std::min(n, schedule.parts > 0 ? schedule.parts : workers);
    const StaticPartition part(first, last, parts);
    std::vector<Partial> partials(static_cast<std::size_t>(parts), Partial{identity});
    auto participant = [&](std::int64_t k) {
      partials[static_cast<std::size_t>(k)].value =
          body(part.begin(k), part.end(k), std::move(partials[static_cast<std::size_t>(k)].value));
    };
    detail::run_participants(ex, parts, participant);
    T result = std::move(partials[0].value);
    for (std::size_t k = 1; k < partials.size(); ++k) {
      result = combine(std::move(result), std::move(partials[k].value));
    }
    return result;
  }
  const std::int64_t grain = schedule.grain;
  const std::int64_t parts = std::min(workers, (n + grain - 1) / grain);
  std::vector<Partial> partials(static_cast<std::size_t>(parts), Partial{identity});
  std::atomic<std::int64_t> next{first};
  auto participant = [&](std::int64_t k) {
    T& acc = partials[static_cast<std::size_t>(k)].value;
    for (;;) {
      // relaxed: hands out disjoint chunks; the join publishes the partials.
      const std::int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= last) return;
      acc = body(b, std::min(last, b + grain), std::move(acc));
    }
  };
  detail::run_participants(ex, parts, participant);
  T result = std::move(partials[0].value);
  for (std::size_t k = 1; k < partials.size(); ++k) {
    result = combine(std::move(result), std::move(partials[k].value));
  }
  return result;
}

/// Double buffering: stage(i, slot) fills buffer `slot` (0 or 1) with block i;
/// compute(i, slot) consumes it. Staging of block i+1 runs as a task while block i is computed,
/// so the two overlap. Blocks are computed in order on the calling thread.
template <class Stage, class Compute>
void double_buffered(Executor& ex, std::int64_t blocks, Stage&& stage, Compute&& compute) {
  if (blocks < 0) {
    throw InvalidArgument("weft::cpu::double_buffered: blocks must be >= 0 (got " +
                          std::to_string(blocks) + ")");
  }
  if (blocks == 0) return;
  stage(std::int64_t{0}, 0);
  for (std::int64_t i = 0; i < blocks; ++i) {
    const int slot = static_cast<int>(i & 1);
    TaskGroup g(ex);
    if (i + 1 < blocks) {
      ex.spawn_task_into(g.state_for_algorithms(), [&stage, i, slot] { stage(i + 1, slot ^ 1); });
    }
    try {
      compute(i, slot);
    } catch (...) {
      g.wait_noexcept();
      throw;
    }
    g.wait();
  }
}

}  // namespace weft::cpu
