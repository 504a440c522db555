// The README's example, built and run as a test so that it stays true.
#include <weft/weft.hpp>

long fib(weft::cpu::Executor& ex, int n) {
  if (n < 2) return n;
  long a = 0;
  weft::cpu::TaskGroup g(ex);
  g.spawn([&] { a = fib(ex, n - 1); });  // stealable, or run at once above the queue bound
  const long b = fib(ex, n - 2);
  g.wait();  // this worker runs other tasks meanwhile
  return a + b;
}

int main() {
  weft::cpu::Executor ex;  // one worker per hardware thread
  auto f = ex.submit([&] { return fib(ex, 30); });
  std::vector<double> x(1 << 20, 1.0);
  weft::cpu::parallel_for(ex, 0, static_cast<std::int64_t>(x.size()),
                          [&](std::int64_t i) { x[i] *= 2.0; });
  return f.get() == 832040 ? 0 : 1;  // get() rethrows a task's exception
}
