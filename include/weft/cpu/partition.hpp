// weft/cpu/partition.hpp - the static partition of a loop's items into parts of (nearly) equal
// size, with the owner of any item found in O(1).
//
// n items over p parts: q = ceil(n/p), r = p*q - n; the first p-r parts take q items, the other
// r take q-1. Every part's size differs from another's by at most one, and the owner of an item
// is found in O(1) (what iter_post needs to find the worker of iteration i).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::cpu {

struct StaticPartition {
  std::int64_t first = 0;
  std::int64_t n = 0;  // items
  std::int64_t p = 1;  // parts
  std::int64_t q = 0;  // ceil(n/p)
  std::int64_t r = 0;  // parts that take q-1

  StaticPartition(std::int64_t first_, std::int64_t last, std::int64_t parts) noexcept
      : first(first_), n(last > first_ ? last - first_ : 0), p(parts < 1 ? 1 : parts) {
    q = (n + p - 1) / p;
    r = p * q - n;
  }
  /// Begin of part k (k in [0, p]).
  [[nodiscard]] std::int64_t begin(std::int64_t k) const noexcept {
    const std::int64_t big = p - r;
    return first + (k <= big ? k * q : big * q + (k - big) * (q - 1));
  }
  [[nodiscard]] std::int64_t end(std::int64_t k) const noexcept { return begin(k + 1); }
  /// Part owning item i (first <= i < first + n).
  [[nodiscard]] std::int64_t owner(std::int64_t i) const noexcept {
    const std::int64_t off = i - first;
    const std::int64_t big_items = (p - r) * q;
    if (off < big_items) return off / q;
    return (p - r) + (off - big_items) / (q - 1);
  }
};

}  // namespace weft::cpu
