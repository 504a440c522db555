// The GPU pool's batch FIFO (detail::ChunkQueue): order across chunks and single pushes, partial
// takes, and the bound on the memory it keeps for reuse.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "weft/gpu/detail/chunk_queue.hpp"

namespace weft::gpu::detail {
namespace {

TEST(ChunkQueue, KeepsFifoOrderAcrossChunksSinglePushesAndPartialTakes) {
  ChunkQueue<int> q;
  int next = 0;
  std::vector<int> expect;
  auto push_chunk = [&](int n) {
    std::vector<int> c(n);
    std::iota(c.begin(), c.end(), next);
    for (int k = 0; k < n; ++k) expect.push_back(next + k);
    next += n;
    q.push_chunk(c);
    EXPECT_TRUE(c.empty()) << "the chunk's elements moved into the queue";
  };
  auto push_one = [&] {
    expect.push_back(next);
    q.push_one(int{next++});
  };
  push_chunk(5);
  push_one();
  push_one();
  push_chunk(300);
  for (int k = 0; k < 300; ++k) push_one();  // fills one short chunk, then starts another
  push_chunk(1);
  EXPECT_EQ(q.size(), expect.size());

  std::vector<int> got;
  EXPECT_EQ(q.take(got, 3), 3u);  // inside the first chunk
  int one = -1;
  q.take_one(one);
  got.push_back(one);
  int arr[10];
  EXPECT_EQ(q.take_into(arr, 10), 10u);  // across chunk boundaries
  got.insert(got.end(), arr, arr + 10);
  EXPECT_EQ(q.take(got, 1'000'000), expect.size() - 14);  // the rest
  EXPECT_EQ(got, expect);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.take(got, 5), 0u);
  EXPECT_EQ(q.take_into(arr, 5), 0u);
}

TEST(ChunkQueue, ReusesOrdinaryVectorsButDropsHugeOnes) {
  ChunkQueue<int> q;
  std::vector<int> small(1000, 1);
  q.push_chunk(small);
  std::vector<int> out;
  q.take(out, 1000);
  EXPECT_EQ(q.spares(), 1u) << "an emptied batch-sized vector is kept for the next push";
  std::vector<int> next(10, 2);
  q.push_chunk(next);
  EXPECT_GE(next.capacity(), 1000u) << "the pusher gets the kept vector back";
  q.take(out, 10);

  std::vector<int> huge(1 << 20, 3);  // one very large batch
  q.push_chunk(huge);
  q.take(out, std::size_t{1} << 20);
  EXPECT_LE(q.spare_capacity(), std::size_t{16} * (std::size_t{1} << 14))
      << "a huge vector must not stay pinned in the queue";
}

}  // namespace
}  // namespace weft::gpu::detail
