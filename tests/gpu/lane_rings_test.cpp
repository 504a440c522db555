// A scheduler lane's view of its blocks' rings (detail::LaneRings): where a batch goes. Blocks
// that share a unit (an SM) share its cores, so a batch spreads over idle units first, then
// over idle blocks, and only then queues a second task in a ring.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "gpu/input_queue.hpp"
#include "gpu/lane_rings.hpp"

namespace weft::gpu::detail {
namespace {

constexpr std::size_t kCapacity = 16;

// `blocks` rings of `depth` slots in plain memory; the test plays the blocks' part.
class Rings {
 public:
  Rings(std::size_t blocks, std::size_t depth)
      : bytes_(ring_stride(kCapacity, depth) * blocks),
        memory_(new (std::align_val_t{128}) unsigned char[bytes_]),
        layout_(memory_.get(), kCapacity, depth) {
    std::memset(memory_.get(), 0, bytes_);
  }
  [[nodiscard]] const RingLayout& layout() const { return layout_; }
  // The READY slots of block b.
  [[nodiscard]] std::size_t ready(std::size_t b) const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < layout_.depth; ++j) {
      n += layout_.states(b)[j] == static_cast<std::uint32_t>(SlotState::ready) ? 1 : 0;
    }
    return n;
  }
  // Block b ends every task it holds.
  void finish(std::size_t b) {
    for (std::size_t j = 0; j < layout_.depth; ++j) {
      std::uint32_t& s = layout_.states(b)[j];
      if (s == static_cast<std::uint32_t>(SlotState::ready)) {
        s = static_cast<std::uint32_t>(SlotState::finished);
      }
    }
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{128}); }
  };
  std::size_t bytes_;
  std::unique_ptr<unsigned char[], Free> memory_;
  RingLayout layout_;
};

RecordBuffer batch_of(std::size_t n) {
  RecordBuffer batch(entry_stride(kCapacity));
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char* e = batch.append();
    std::memset(e, 0, entry_stride(kCapacity));
    const EntryHead head{1, 8, i, 0, 0};
    std::memcpy(e, &head, sizeof head);
  }
  return batch;
}

struct LaneRingsTest : ::testing::Test {
  // 4 units (SMs) of 3 blocks each, rings of 2 slots; units given in an order unlike the
  // blocks' (unit ids need not be sorted nor dense).
  static constexpr std::size_t kBlocks = 12, kDepth = 2;
  Rings rings{kBlocks, kDepth};
  Watchdog watchdog{std::chrono::nanoseconds(0)};
  Outbox outbox{1, kCapacity};
  LaneRings lane{rings.layout(), 0, kBlocks, LaneRings::Options{kCapacity}, watchdog};
  const std::vector<std::uint32_t> units{70, 70, 70, 5, 5, 5, 900, 900, 900, 12, 12, 12};

  void SetUp() override { lane.set_units(units.data()); }
  std::set<std::uint32_t> units_with_tasks() const {
    std::set<std::uint32_t> u;
    for (std::size_t b = 0; b < kBlocks; ++b) {
      if (rings.ready(b) != 0) u.insert(units[b]);
    }
    return u;
  }
  std::size_t tasks_on_unit(std::uint32_t unit) const {
    std::size_t n = 0;
    for (std::size_t b = 0; b < kBlocks; ++b) n += units[b] == unit ? rings.ready(b) : 0;
    return n;
  }
};

TEST_F(LaneRingsTest, ABatchOfOneTaskPerUnitGoesOnePerUnit) {
  EXPECT_EQ(lane.num_units(), 4u);
  EXPECT_EQ(lane.idle_units(), 4u);
  lane.load(batch_of(4), LaneRings::Clock::now(), false);
  EXPECT_EQ(units_with_tasks(), (std::set<std::uint32_t>{5, 12, 70, 900}));
  EXPECT_EQ(lane.idle_units(), 0u);
}

TEST_F(LaneRingsTest, MoreTasksThanUnitsFillIdleBlocksBeforeAnyRingGetsASecond) {
  lane.load(batch_of(6), LaneRings::Clock::now(), false);
  for (std::uint32_t u : {5u, 12u, 70u, 900u}) EXPECT_GE(tasks_on_unit(u), 1u) << "unit " << u;
  lane.load(batch_of(6), LaneRings::Clock::now(), false);
  for (std::size_t b = 0; b < kBlocks; ++b) EXPECT_EQ(rings.ready(b), 1u) << "block " << b;
  for (std::uint32_t u : {5u, 12u, 70u, 900u}) EXPECT_EQ(tasks_on_unit(u), 3u) << "unit " << u;
}

TEST_F(LaneRingsTest, AUnitWhoseTasksEndedIsIdleAgainAndPickedFirst) {
  lane.load(batch_of(4), LaneRings::Clock::now(), false);
  // Unit 900's block ends its task; the others keep theirs.
  for (std::size_t b = 6; b < 9; ++b) rings.finish(b);
  EXPECT_EQ(lane.collect(outbox, LaneRings::Clock::now()), 1u);
  EXPECT_EQ(lane.idle_units(), 1u);
  lane.load(batch_of(1), LaneRings::Clock::now(), false);
  EXPECT_EQ(tasks_on_unit(900), 1u);
  EXPECT_EQ(lane.idle_units(), 0u);
}

TEST_F(LaneRingsTest, WithoutUnitsEveryBlockIsItsOwn) {
  LaneRings plain{rings.layout(), 0, kBlocks, LaneRings::Options{kCapacity}, watchdog};
  EXPECT_EQ(plain.num_units(), kBlocks);
  plain.load(batch_of(kBlocks), LaneRings::Clock::now(), false);
  for (std::size_t b = 0; b < kBlocks; ++b) EXPECT_EQ(rings.ready(b), 1u) << "block " << b;
}

}  // namespace
}  // namespace weft::gpu::detail
