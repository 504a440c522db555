// Helpers shared by the CPU tests.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace weft::test {

/// WEFT_STRESS_SCALE (default 1): how much of their loops the stress tests run (0.3 under
/// ThreadSanitizer, which is 5-15x slower).
inline double stress_scale() {
  const char* s = std::getenv("WEFT_STRESS_SCALE");
  return s != nullptr ? std::atof(s) : 1.0;
}

/// Deterministic pseudo-random numbers (SplitMix64) for randomised tests.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t s_;
};

}  // namespace weft::test
