// The GPU pool's sharded input and output queues (detail::ShardedFifo, detail::ShardedOutput):
// per-thread FIFO order through the input shards, exactly-once delivery to many consumers,
// the unfinished count, and that a sleeping consumer is woken by a delivery. Run under
// ThreadSanitizer in CI (make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "weft/gpu/detail/adaptive_mutex.hpp"
#include "weft/gpu/detail/sharded_fifo.hpp"
#include "weft/gpu/detail/sharded_output.hpp"

namespace weft::gpu::detail {
namespace {

struct Item {
  std::uint32_t thread = 0;
  std::uint32_t seq = 0;
};

TEST(AdaptiveMutex, ExcludesUnderContentionAndTryLockFailsWhileHeld) {
  AdaptiveMutex m;
  std::uint64_t counter = 0;  // guarded by m: lost updates (and TSan) would show a missing lock
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 20'000; ++k) {
        std::lock_guard<AdaptiveMutex> lock(m);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 6u * 20'000u);
  m.lock();
  std::thread other([&] { EXPECT_FALSE(m.try_lock()); });
  other.join();
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(ShardedFifo, KeepsEachPushingThreadsOrderAndLosesNothing) {
  constexpr std::uint32_t kThreads = 6, kPerThread = 20'000;
  ShardedFifo<Item> fifo(4);
  std::atomic<int> done{0};
  std::vector<std::thread> pushers;
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      auto& shard = fifo.shard(fifo.home());
      for (std::uint32_t k = 0; k < kPerThread; ++k) {
        std::lock_guard<AdaptiveMutex> lock(shard.mutex);
        shard.queue.push_one(Item{t, k});
        shard.size.store(shard.queue.size(), std::memory_order_seq_cst);
      }
      done.fetch_add(1);
    });
  }
  std::vector<std::uint32_t> next(kThreads, 0);
  std::vector<Item> batch;
  std::size_t cursor = 0, total = 0;
  for (;;) {
    const bool all_pushed = done.load() == static_cast<int>(kThreads);
    batch.clear();
    total += fifo.take(batch, 1 + total % 97, cursor);
    for (const Item& it : batch) {
      ASSERT_LT(it.thread, kThreads);
      ASSERT_EQ(it.seq, next[it.thread]) << "thread " << it.thread << "'s tasks out of order";
      ++next[it.thread];
    }
    if (all_pushed && batch.empty() && fifo.size() == 0) break;
  }
  for (auto& p : pushers) p.join();
  EXPECT_EQ(total, std::size_t{kThreads} * kPerThread);
  for (std::uint32_t t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
}

TEST(ShardedFifo, TakeVisitsEveryShardRoundRobin) {
  ShardedFifo<int> fifo(3);
  for (std::size_t s = 0; s < 3; ++s) {
    auto& shard = fifo.shard(s);
    for (int k = 0; k < 2; ++k) shard.queue.push_one(static_cast<int>(s) * 10 + k);
    shard.size.store(2);
  }
  std::vector<int> got;
  std::size_t cursor = 1;
  EXPECT_EQ(fifo.take(got, 3, cursor), 3u);  // shard 1 (2), then shard 2 (1)
  EXPECT_EQ(got, (std::vector<int>{10, 11, 20}));
  EXPECT_EQ(cursor, 0u);  // past shard 2
  got.clear();
  EXPECT_EQ(fifo.take(got, 10, cursor), 3u);  // from shard 0, then shard 2
  EXPECT_EQ(got, (std::vector<int>{0, 1, 21}));
  EXPECT_EQ(fifo.size(), 0u);
}

TEST(ShardedOutput, DeliversEveryRecordExactlyOnceToManyConsumers) {
  constexpr std::size_t kLanes = 3, kConsumers = 5, kPerLane = 30'000;
  ShardedOutput<std::uint64_t> q(kLanes, 1);
  q.accepted(0, kLanes * kPerLane);
  EXPECT_EQ(q.unfinished(), kLanes * kPerLane);
  std::vector<std::thread> lanes;
  for (std::size_t l = 0; l < kLanes; ++l) {
    lanes.emplace_back([&, l] {
      std::vector<std::uint64_t> chunk;
      for (std::size_t k = 0; k < kPerLane;) {
        const std::size_t n = std::min<std::size_t>(1 + k % 13, kPerLane - k);
        for (std::size_t j = 0; j < n; ++j) chunk.push_back(l * kPerLane + k + j);
        q.deliver(l, chunk);
        k += n;
      }
    });
  }
  std::atomic<std::size_t> taken{0};
  std::vector<std::vector<std::uint64_t>> got(kConsumers);
  std::vector<std::thread> consumers;
  for (std::size_t c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&, c] {
      std::uint64_t buf[7];
      while (taken.load() < kLanes * kPerLane) {
        std::size_t n = 0;
        if (c % 2 == 0) {
          n = q.try_take_one(buf[0], q.home()) ? 1 : 0;
        } else {
          n = q.take_into(buf, 7, q.home());
        }
        got[c].insert(got[c].end(), buf, buf + n);
        taken.fetch_add(n);
        if (n == 0) std::this_thread::yield();
      }
    });
  }
  for (auto& t : lanes) t.join();
  for (auto& t : consumers) t.join();
  std::vector<std::uint64_t> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), kLanes * kPerLane);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i) << "lost or duplicated";
  EXPECT_EQ(q.unfinished(), 0u);
  EXPECT_FALSE(q.any_available());
}

TEST(ShardedOutput, ASleepingConsumerIsWokenByADeliveryToAnyShard) {
  for (std::size_t shard = 0; shard < 4; ++shard) {
    ShardedOutput<int> q(4, 2);
    q.accepted(1, 1);
    std::atomic<bool> woke{false};
    int value = -1;
    std::thread consumer([&] {
      q.wait([&] { return q.any_available(); });
      EXPECT_TRUE(q.try_take_one(value, q.home()));
      woke = true;
    });
    while (!q.has_waiters()) std::this_thread::yield();
    EXPECT_FALSE(woke.load());
    std::vector<int> chunk{42};
    q.deliver(shard, chunk);
    consumer.join();
    EXPECT_TRUE(woke.load());
    EXPECT_EQ(value, 42);
    EXPECT_EQ(q.unfinished(), 0u);
  }
}

}  // namespace
}  // namespace weft::gpu::detail
