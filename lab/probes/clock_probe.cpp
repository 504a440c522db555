// What the host clock and a pause cost on this machine (the scheduler lanes read the clock
// every round and pause between quiet rounds). g++ -O2 clock_probe.cpp -o clock_probe
// && ./clock_probe; the clock source is in /sys/devices/system/clocksource/*/current_clocksource.
#include <x86intrin.h>
#include <chrono>
#include <cstdio>
int main() {
  using C = std::chrono::steady_clock;
  auto t0 = C::now();
  long long sink = 0;
  for (int i = 0; i < 1000000; ++i) sink += C::now().time_since_epoch().count();
  auto t1 = C::now();
  unsigned long long r0 = __rdtsc();
  for (int i = 0; i < 1000000; ++i) sink += __rdtsc();
  auto t2 = C::now();
  for (int i = 0; i < 100000; ++i) _mm_pause();
  auto t3 = C::now();
  std::printf("steady_clock::now %.1f ns, rdtsc %.1f ns, pause %.1f ns (sink %lld)\n",
              std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e6,
              std::chrono::duration<double, std::nano>(t2 - t1).count() / 1e6,
              std::chrono::duration<double, std::nano>(t3 - t2).count() / 1e5, sink & 1);
  (void)r0;
}
