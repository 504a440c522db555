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

TEST(ChunkQueue, QueuesSharingARecyclerReuseEachOthersVectors) {
  // The pool's input shards: a thread pushing to shard B gets the vectors emptied in shard A
  // (with spares kept per shard, every new pushing thread copied into fresh memory).
  ChunkRecycler<int> shared;
  ChunkQueue<int> a(&shared), b(&shared);
  std::vector<int> batch(1000, 1);
  const int* memory = batch.data();
  a.push_chunk(batch);
  EXPECT_EQ(batch.capacity(), 0u) << "nothing was emptied yet: no memory to hand back";
  std::vector<int> out;
  a.take(out, 1000);
  EXPECT_EQ(a.spares(), 0u) << "a sharing queue keeps nothing itself";
  EXPECT_EQ(shared.spares(), 1u);
  std::vector<int> mine;  // a pusher's empty vector, before it copies its next batch
  shared.refill(mine, 1000);
  EXPECT_EQ(mine.data(), memory) << "the vector emptied in queue a, for a push to queue b";
  EXPECT_EQ(shared.spares(), 0u);
  mine.assign(500, 2);
  b.push_chunk(mine);
  b.take(out, 500);
  std::vector<int> next(10, 3);
  b.push_chunk(next);
  EXPECT_GE(next.capacity(), 1000u) << "the hand-over swaps in the vector emptied last";
  shared.refill(next, 10);  // room enough already: nothing changes hands
  EXPECT_GE(next.capacity(), 1000u);
  EXPECT_EQ(shared.spares(), 0u);
}

TEST(ChunkQueue, RecyclerKeepsABoundedNumberOfOrdinaryVectors) {
  ChunkRecycler<int> shared;
  for (std::size_t i = 0; i < ChunkRecycler<int>::kMaxSpares + 10; ++i) {
    shared.give(std::vector<int>(100, 1));
  }
  EXPECT_EQ(shared.spares(), ChunkRecycler<int>::kMaxSpares);
  shared.give(std::vector<int>(ChunkRecycler<int>::kMaxSpareElements + 1, 1));
  shared.give(std::vector<int>());
  EXPECT_EQ(shared.spare_capacity(), ChunkRecycler<int>::kMaxSpares * 100)
      << "a huge vector, or one with no memory, is not kept";
  std::vector<int> small;
  small.reserve(10);
  shared.refill(small, 50);
  EXPECT_GE(small.capacity(), 100u) << "a kept vector with more room replaces a short one";
  EXPECT_EQ(shared.spares(), ChunkRecycler<int>::kMaxSpares)
      << "the short one went back in its place";
  std::vector<int> v = shared.take();
  EXPECT_TRUE(v.empty());
  EXPECT_GE(v.capacity(), 10u);
}

}  // namespace
}  // namespace weft::gpu::detail
