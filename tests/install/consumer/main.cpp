// Built against an installed weft by tests/install/check-install.sh.
#include <weft/weft.hpp>

int main() {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  long sum = weft::cpu::parallel_reduce(
      ex, 0, 1000, 0L,
      [](std::int64_t b, std::int64_t e, long acc) {
        for (; b < e; ++b) acc += b;
        return acc;
      },
      [](long a, long b) { return a + b; });
  return sum == 999L * 1000 / 2 ? 0 : 1;
}
