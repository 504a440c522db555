// The GPU pool's batch FIFO (detail::ChunkQueue, elements of a run-time stride): order across
// chunks and single pushes, partial takes, and the bound on the memory it keeps for reuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/chunk_queue.hpp"

namespace weft::gpu::detail {
namespace {

// Elements of 40 bytes (a queue entry's size with 16-byte payloads) carrying a number in
// their first and last words, so that a copy cut short or shifted shows.
constexpr std::size_t kStride = 40;
void put(unsigned char* e, std::uint64_t v) {
  std::memcpy(e, &v, 8);
  std::memcpy(e + kStride - 8, &v, 8);
}
std::uint64_t get(const unsigned char* e) {
  std::uint64_t a, b;
  std::memcpy(&a, e, 8);
  std::memcpy(&b, e + kStride - 8, 8);
  EXPECT_EQ(a, b) << "an element's bytes were not copied whole";
  return a;
}
std::vector<std::uint64_t> values(const RecordBuffer& b) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < b.size(); ++i) v.push_back(get(b.at(i)));
  return v;
}

TEST(ChunkQueue, KeepsFifoOrderAcrossChunksSinglePushesAndPartialTakes) {
  ChunkQueue q(kStride);
  std::uint64_t next = 0;
  std::vector<std::uint64_t> expect;
  auto push_chunk = [&](int n) {
    RecordBuffer c(kStride);
    for (int k = 0; k < n; ++k) {
      put(c.append(), next);
      expect.push_back(next++);
    }
    q.push_chunk(c);
    EXPECT_TRUE(c.empty()) << "the chunk's elements moved into the queue";
  };
  auto push_one = [&] {
    unsigned char e[128];  // one element, with room for the widest fixed-size copy
    put(e, next);
    expect.push_back(next++);
    q.push_one(e);
  };
  push_chunk(5);
  push_one();
  push_one();
  push_chunk(300);
  for (int k = 0; k < 300; ++k) push_one();  // fills one short chunk, then starts another
  push_chunk(1);
  EXPECT_EQ(q.size(), expect.size());

  RecordBuffer got(kStride);
  EXPECT_EQ(q.take(got, 3), 3u);  // inside the first chunk
  q.take_one(got.append());
  unsigned char arr[10 * kStride];
  EXPECT_EQ(q.take_into(arr, 10), 10u);  // across chunk boundaries
  got.append(arr, 10);
  EXPECT_EQ(q.take(got, 1'000'000), expect.size() - 14);  // the rest
  EXPECT_EQ(values(got), expect);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.take(got, 5), 0u);
  EXPECT_EQ(q.take_into(arr, 5), 0u);
}

TEST(ChunkQueue, ReusesOrdinaryVectorsButDropsHugeOnes) {
  ChunkQueue q(kStride);
  RecordBuffer small(kStride);
  for (int k = 0; k < 1000; ++k) put(small.append(), 1);
  q.push_chunk(small);
  RecordBuffer out(kStride);
  q.take(out, 1000);
  EXPECT_EQ(q.spares(), 1u) << "an emptied batch-sized vector is kept for the next push";
  RecordBuffer next(kStride);
  for (int k = 0; k < 10; ++k) put(next.append(), 2);
  q.push_chunk(next);
  EXPECT_GE(next.capacity(), 1000u) << "the pusher gets the kept vector back";
  q.take(out, 10);

  RecordBuffer huge(kStride);  // one very large batch
  for (int k = 0; k < (1 << 20); ++k) put(huge.append(), 3);
  q.push_chunk(huge);
  out.clear();
  q.take(out, std::size_t{1} << 20);
  EXPECT_LE(q.spare_capacity(), std::size_t{16} * (std::size_t{1} << 14))
      << "a huge vector must not stay pinned in the queue";
}

}  // namespace
}  // namespace weft::gpu::detail
