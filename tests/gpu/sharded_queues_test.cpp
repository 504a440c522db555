// The GPU pool's sharded input and output queues (detail::InputQueue, detail::OutputQueue):
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

#include <cstring>

#include "gpu/adaptive_mutex.hpp"
#include "gpu/input_queue.hpp"
#include "gpu/output_queue.hpp"

namespace weft::gpu::detail {
namespace {

// An input queue entry standing for task `seq` of pushing thread `thread`.
struct Item {
  std::uint32_t thread = 0;
  std::uint32_t seq = 0;
};
constexpr std::size_t kCapacity = 16;
void push_item(InputQueue::Shard& shard, Item it) {
  alignas(8) unsigned char e[128] = {};  // an entry, with room for the widest fixed-size copy
  const EntryHead h{it.thread, 0, it.seq, 0, 0};
  std::memcpy(e, &h, sizeof h);
  shard.queue.push_one(e);
}
std::vector<Item> items(const RecordBuffer& b) {
  std::vector<Item> v;
  for (std::size_t i = 0; i < b.size(); ++i) {
    EntryHead h;
    std::memcpy(&h, b.at(i), sizeof h);
    v.push_back(Item{h.type, static_cast<std::uint32_t>(h.tag)});
  }
  return v;
}
// Output records of 8 bytes: one number each.
RecordBuffer numbers(std::initializer_list<std::uint64_t> v) {
  RecordBuffer b(8);
  for (std::uint64_t x : v) std::memcpy(b.append(), &x, 8);
  return b;
}

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

TEST(InputQueue, KeepsEachPushingThreadsOrderAndLosesNothing) {
  constexpr std::uint32_t kThreads = 6, kPerThread = 20'000;
  InputQueue fifo(QueueOrder::fifo, kCapacity, 4);
  std::atomic<int> done{0};
  std::vector<std::thread> pushers;
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      auto& shard = fifo.shard(fifo.home());
      for (std::uint32_t k = 0; k < kPerThread; ++k) {
        std::lock_guard<AdaptiveMutex> lock(shard.mutex);
        push_item(shard, Item{t, k});
        shard.size.store(shard.queue.size(), std::memory_order_seq_cst);
      }
      done.fetch_add(1);
    });
  }
  std::vector<std::uint32_t> next(kThreads, 0);
  RecordBuffer batch(fifo.entry_stride());
  std::size_t cursor = 0, total = 0;
  for (;;) {
    const bool all_pushed = done.load() == static_cast<int>(kThreads);
    batch.clear();
    total += fifo.take(batch, 1 + total % 97, cursor);
    for (const Item& it : items(batch)) {
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

TEST(InputQueue, TakeVisitsEveryShardRoundRobin) {
  InputQueue fifo(QueueOrder::fifo, kCapacity, 3);
  for (std::uint32_t s = 0; s < 3; ++s) {
    auto& shard = fifo.shard(s);
    for (std::uint32_t k = 0; k < 2; ++k) push_item(shard, Item{s, k});
    shard.size.store(2);
  }
  auto ids = [](const RecordBuffer& b) {
    std::vector<std::uint32_t> v;
    for (const Item& it : items(b)) v.push_back(it.thread * 10 + it.seq);
    return v;
  };
  RecordBuffer got(fifo.entry_stride());
  std::size_t cursor = 1;
  EXPECT_EQ(fifo.take(got, 3, cursor), 3u);  // shard 1 (2), then shard 2 (1)
  EXPECT_EQ(ids(got), (std::vector<std::uint32_t>{10, 11, 20}));
  EXPECT_EQ(cursor, 0u);  // past shard 2
  got.clear();
  EXPECT_EQ(fifo.take(got, 10, cursor), 3u);  // from shard 0, then shard 2
  EXPECT_EQ(ids(got), (std::vector<std::uint32_t>{0, 1, 21}));
  EXPECT_EQ(fifo.size(), 0u);
}

TEST(OutputQueue, DeliversEveryRecordExactlyOnceToManyConsumers) {
  constexpr std::size_t kLanes = 3, kConsumers = 5, kPerLane = 30'000;
  OutputQueue q(8, kLanes, 1);
  q.accepted(0, kLanes * kPerLane);
  EXPECT_EQ(q.unfinished(), kLanes * kPerLane);
  std::vector<std::thread> lanes;
  for (std::size_t l = 0; l < kLanes; ++l) {
    lanes.emplace_back([&, l] {
      RecordBuffer chunk(8);
      for (std::size_t k = 0; k < kPerLane;) {
        const std::size_t n = std::min<std::size_t>(1 + k % 13, kPerLane - k);
        for (std::size_t j = 0; j < n; ++j) {
          const std::uint64_t v = l * kPerLane + k + j;
          std::memcpy(chunk.append(), &v, 8);
        }
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
      std::uint64_t buf[16];  // room for the widest fixed-size element copy
      while (taken.load() < kLanes * kPerLane) {
        std::size_t n = 0;
        if (c % 2 == 0) {
          n = q.try_take_one(&buf[0], q.home()) ? 1 : 0;
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

TEST(OutputQueue, ASleepingConsumerIsWokenByADeliveryToAnyShard) {
  for (std::size_t shard = 0; shard < 4; ++shard) {
    OutputQueue q(8, 4, 2);
    q.accepted(1, 1);
    std::atomic<bool> woke{false};
    std::uint64_t value = 0;
    std::thread consumer([&] {
      q.wait([&] { return q.any_available(); });
      EXPECT_TRUE(q.try_take_one(&value, q.home()));
      woke = true;
    });
    while (!q.has_waiters()) std::this_thread::yield();
    EXPECT_FALSE(woke.load());
    RecordBuffer chunk = numbers({42});
    q.deliver(shard, chunk);
    consumer.join();
    EXPECT_TRUE(woke.load());
    EXPECT_EQ(value, 42u);
    EXPECT_EQ(q.unfinished(), 0u);
  }
}

}  // namespace
}  // namespace weft::gpu::detail
