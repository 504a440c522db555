#include "weft/cpu/partition.hpp"

#include <gtest/gtest.h>

namespace weft::cpu {
namespace {

TEST(StaticPartition, GivesTheFirstPartsOneItemMoreThanTheRest) {
  // n = 10, p = 4: q = 3, r = 2 -> parts of 3, 3, 2, 2.
  const StaticPartition part(0, 10, 4);
  EXPECT_EQ(part.q, 3);
  EXPECT_EQ(part.r, 2);
  const std::int64_t expected_begin[] = {0, 3, 6, 8, 10};
  for (int k = 0; k <= 4; ++k) EXPECT_EQ(part.begin(k), expected_begin[k]) << k;
}

TEST(StaticPartition, OwnerIsTheInverseOfTheRanges) {
  for (std::int64_t n : {0, 1, 3, 7, 64, 1000, 1001}) {
    for (std::int64_t p : {1, 2, 3, 5, 8, 13, 2000}) {
      const StaticPartition part(5, 5 + n, p);
      std::int64_t covered = 0;
      for (std::int64_t k = 0; k < p; ++k) {
        const std::int64_t b = part.begin(k);
        const std::int64_t e = part.end(k);
        ASSERT_LE(b, e);
        ASSERT_LE(e - b, part.q);
        ASSERT_GE(e - b, part.q - 1);
        covered += e - b;
        for (std::int64_t i = b; i < e; ++i) ASSERT_EQ(part.owner(i), k) << n << " " << p;
      }
      ASSERT_EQ(covered, n);
    }
  }
}

}  // namespace
}  // namespace weft::cpu
