// docs/cpu.md's opening example, built and run as a test so that it stays true.
#include <weft/weft.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

// Sums a tree of n leaves by splitting it in halves: a task per half, joined by a group.
std::int64_t tree_sum(weft::cpu::Executor& ex, std::int64_t first, std::int64_t last) {
  if (last - first <= 1000) {
    std::int64_t s = 0;
    for (std::int64_t i = first; i < last; ++i) s += i;
    return s;
  }
  const std::int64_t mid = first + (last - first) / 2;
  std::int64_t left = 0;
  weft::cpu::TaskGroup g(ex);
  g.spawn([&] { left = tree_sum(ex, first, mid); });  // others may steal it
  const std::int64_t right = tree_sum(ex, mid, last);
  g.wait();  // runs other tasks until the spawned half is done
  return left + right;
}

int main() {
  weft::cpu::ExecutorOptions options;
  options.workers = 0;  // one per hardware thread this process may run on (the default)
  weft::cpu::Executor ex(options);

  // Fork/join from outside the pool: run() enters it through one root task.
  const std::int64_t n = 1'000'000;
  const std::int64_t sum = ex.run([&] { return tree_sum(ex, 0, n); });

  // Data parallelism: a static partition over the workers, reduced in a fixed order.
  std::vector<double> x(1 << 20, 0.5);
  weft::cpu::parallel_for(ex, 0, static_cast<std::int64_t>(x.size()),
                          [&](std::int64_t i) { x[i] *= 2.0; });
  const double total = weft::cpu::parallel_reduce(
      ex, 0, static_cast<std::int64_t>(x.size()), 0.0,
      [&](std::int64_t b, std::int64_t e, double acc) {
        for (; b < e; ++b) acc += x[b];
        return acc;
      },
      std::plus<>{});

  // A future carries a task's result or its exception.
  auto failing = ex.submit([]() -> int { throw std::runtime_error("task failed"); });
  bool rethrown = false;
  try {
    (void)failing.get();
  } catch (const std::runtime_error&) {
    rethrown = true;
  }

  const bool ok = sum == n * (n - 1) / 2 && total == static_cast<double>(x.size()) && rethrown;
  return ok ? 0 : 1;
}  // the executor's destructor drains what is queued and joins the workers
