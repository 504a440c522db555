#include "weft/graph/device/bfc_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

#include "weft/error.hpp"

namespace {

using weft::graph::BackingAllocator;
using weft::graph::BfcAllocator;
using weft::graph::BfcOptions;

constexpr std::size_t kKiB = 1024;

// A backing allocator that cuts regions out of one host arena, one after the other, so that
// consecutive regions are adjacent in memory (the case where coalescing must stop at a region's
// end), and records every call.
struct Arena {
  explicit Arena(std::size_t bytes) : memory(bytes + 256), capacity(bytes) {}
  BackingAllocator backing() {
    return {[this](std::size_t n) -> void* {
              ++allocate_calls;
              if (used + n > capacity || refuse_above < n) return nullptr;
              auto base = reinterpret_cast<std::uintptr_t>(memory.data());
              base = (base + 255) / 256 * 256;
              void* p = reinterpret_cast<void*>(base + used);
              used += n;
              live[p] = n;
              return p;
            },
            [this](void* p) {
              ASSERT_EQ(live.count(p), 1u) << "released a region it did not hand out";
              released.push_back(p);
              live.erase(p);
            },
            "test arena"};
  }
  std::vector<unsigned char> memory;
  std::size_t capacity;
  std::size_t used = 0;
  std::size_t refuse_above = SIZE_MAX;
  int allocate_calls = 0;
  std::map<void*, std::size_t> live;
  std::vector<void*> released;
};

BfcOptions small_regions(std::size_t first = 64 * kKiB) {
  BfcOptions o;
  o.first_region = first;
  o.max_region = 1 << 20;
  return o;
}

TEST(BfcAllocator, SteadyStateAllocationsNeverCallTheBackingAllocator) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions());
  std::mt19937 rng(1);
  for (int round = 0; round < 1000; ++round) {
    std::vector<void*> live;
    for (std::size_t bytes : {1000, 5000, 300, 17000}) live.push_back(a.allocate(bytes));
    std::shuffle(live.begin(), live.end(), rng);
    for (void* p : live) a.deallocate(p);
  }
  EXPECT_EQ(arena.allocate_calls, 1);
  EXPECT_EQ(a.stats().backing_allocations, 1u);
  EXPECT_EQ(a.stats().allocations, 4000u);
  EXPECT_EQ(a.stats().bytes_in_use, 0u);
}

TEST(BfcAllocator, AlignsAndRoundsEveryAllocationTo256Bytes) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions());
  void* p = a.allocate(1);
  void* q = a.allocate(257);
  void* r = a.allocate(256);
  for (void* x : {p, q, r}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<char*>(q) - reinterpret_cast<char*>(p), 256);
  EXPECT_EQ(reinterpret_cast<char*>(r) - reinterpret_cast<char*>(q), 512);
  EXPECT_EQ(a.stats().bytes_in_use, 1024u);
}

TEST(BfcAllocator, TakesTheSmallestFreeChunkThatFits) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions());
  // Free holes of 4, 1 and 2 KiB, kept apart by live chunks so they cannot merge.
  void* h4 = a.allocate(4 * kKiB);
  void* g1 = a.allocate(256);
  void* h1 = a.allocate(1 * kKiB);
  void* g2 = a.allocate(256);
  void* h2 = a.allocate(2 * kKiB);
  void* g3 = a.allocate(256);
  a.deallocate(h4);
  a.deallocate(h1);
  a.deallocate(h2);
  EXPECT_EQ(a.allocate(1536), h2);  // 2 KiB is the best fit for 1.5 KiB
  EXPECT_EQ(a.allocate(1 * kKiB), h1);
  EXPECT_EQ(a.allocate(3 * kKiB), h4);
  (void)g1, (void)g2, (void)g3;
}

TEST(BfcAllocator, FreedNeighboursCoalesceIntoOneChunk) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions(64 * kKiB));
  void* x = a.allocate(16 * kKiB);
  void* y = a.allocate(16 * kKiB);
  void* z = a.allocate(16 * kKiB);
  a.deallocate(x);
  a.deallocate(z);  // merges with the region's free 16 KiB tail
  EXPECT_EQ(a.stats().largest_free_chunk, 32 * kKiB);
  a.deallocate(y);  // merges with both sides: the whole region is one chunk again
  EXPECT_EQ(a.stats().largest_free_chunk, 64 * kKiB);
  EXPECT_EQ(a.allocate(64 * kKiB), x);
  EXPECT_EQ(a.stats().backing_allocations, 1u);
}

TEST(BfcAllocator, NeverMergesAcrossAdjacentRegions) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions(64 * kKiB));
  void* first = a.allocate(64 * kKiB);
  void* second = a.allocate(64 * kKiB);  // a second region, adjacent in the arena
  ASSERT_EQ(static_cast<char*>(second) - static_cast<char*>(first), 64 * static_cast<long>(kKiB));
  a.deallocate(first);
  a.deallocate(second);
  EXPECT_EQ(a.stats().largest_free_chunk, 128 * kKiB);  // the second region doubled
  EXPECT_EQ(a.stats().regions, 2u);
  EXPECT_EQ(a.trim(), 64 * kKiB + 128 * kKiB);
  EXPECT_EQ(arena.released.size(), 2u);
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
}

TEST(BfcAllocator, RegionsGrowGeometricallyAndFallBackToTheRequest) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions(64 * kKiB));
  (void)a.allocate(64 * kKiB);
  (void)a.allocate(64 * kKiB);  // region 2: 128 KiB
  EXPECT_EQ(a.stats().bytes_reserved, 192 * kKiB);
  (void)a.allocate(100 * kKiB);  // region 2's free 64 KiB is too small: region 3, 256 KiB
  EXPECT_EQ(a.stats().bytes_reserved, 448 * kKiB);
  arena.refuse_above = 300 * kKiB;  // the next step (512 KiB) is refused, the request is not
  (void)a.allocate(300 * kKiB);
  EXPECT_EQ(a.stats().bytes_reserved, 748 * kKiB);
  EXPECT_EQ(a.stats().regions, 4u);
}

TEST(BfcAllocator, OutOfMemoryNamesTheRequestAndLeavesTheAllocatorUsable) {
  Arena arena(1 << 20);
  BfcOptions o = small_regions(64 * kKiB);
  o.limit = 128 * kKiB;
  BfcAllocator a(arena.backing(), o);
  void* p = a.allocate(60 * kKiB);
  try {
    (void)a.allocate(100 * kKiB);
    FAIL() << "no OutOfMemory";
  } catch (const weft::OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("102400 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("test arena"), std::string::npos) << what;
    EXPECT_NE(what.find("limit"), std::string::npos) << what;
  }
  a.deallocate(p);
  // The empty region is trimmed to make room: the request now fits under the limit (in a
  // region of the next geometric size, 128 KiB, which the limit allows).
  void* q = a.allocate(100 * kKiB);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(a.stats().regions, 1u);
  EXPECT_EQ(a.stats().bytes_reserved, 128 * kKiB);
  EXPECT_EQ(arena.released.size(), 1u);
}

TEST(BfcAllocator, RejectsForeignPointersDoubleFreesAndZeroBytes) {
  Arena arena(1 << 20);
  BfcAllocator a(arena.backing(), small_regions());
  void* p = a.allocate(1000);
  int local = 0;
  EXPECT_THROW(a.deallocate(&local), weft::InvalidArgument);
  EXPECT_THROW(a.deallocate(static_cast<char*>(p) + 256), weft::InvalidArgument);
  a.deallocate(p);
  EXPECT_THROW(a.deallocate(p), weft::InvalidArgument);
  EXPECT_THROW((void)a.allocate(0), weft::InvalidArgument);
  EXPECT_EQ(a.stats().frees, 1u);
  EXPECT_THROW(BfcAllocator(BackingAllocator{}, {}), weft::InvalidArgument);
}

// Random allocations and frees against a shadow of what is live: live ranges never overlap,
// the statistics add up, and once everything is freed each region is one free chunk again.
TEST(BfcAllocator, RandomTrafficKeepsLiveRangesDisjointAndCoalescesCompletely) {
  Arena arena(8 << 20);
  BfcAllocator a(arena.backing(), small_regions(256 * kKiB));
  std::mt19937 rng(42);
  std::map<std::uintptr_t, std::size_t> live;  // address -> rounded size
  std::size_t in_use = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool below_2_mib = in_use < (std::size_t{2} << 20);
    if (live.empty() || (below_2_mib && rng() % 2 == 0)) {
      const std::size_t bytes = 1 + rng() % (rng() % 8 == 0 ? 200 * kKiB : 4 * kKiB);
      const auto p = reinterpret_cast<std::uintptr_t>(a.allocate(bytes));
      const std::size_t size = (bytes + 255) / 256 * 256;
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + size, next->first) << "overlaps the next";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, p) << "overlaps the previous";
      }
      live[p] = size;
      in_use += size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.deallocate(reinterpret_cast<void*>(it->first));
      in_use -= it->second;
      live.erase(it);
    }
    ASSERT_EQ(a.stats().bytes_in_use, in_use);
  }
  for (auto [p, size] : live) a.deallocate(reinterpret_cast<void*>(p));
  const auto s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_GT(s.peak_bytes_in_use, 0u);
  EXPECT_EQ(a.trim(), s.bytes_reserved);  // every region was whole again
  EXPECT_EQ(arena.live.size(), 0u);
}

}  // namespace
