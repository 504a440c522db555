// Task streams across two processes when a send fails partway (run by ctest under
// `mpirun -np 2` on the loopback interface): the World's device is the host's, wrapped so that
// a copy fails on demand. A device message is staged through pinned chunks, so a copy that
// fails after its header went leaves the receiver waiting for chunks that never come, unless
// the transport tells it. The receive must fail with an error naming the sender, the channel
// must carry the next message intact, and a message so cut short that nobody receives must
// not hold up the end of the run.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stream/device.hpp"
#include "stream_test_support.hpp"
#include "weft/error.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
namespace wd = weft::stream::detail;
using stream_test::contains;
using stream_test::iota_from;

namespace {

constexpr int kStreams = 2;
constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kInts = 4 * kChunk / sizeof(std::int32_t);  // four chunks

// Copies that succeed before the next one throws; -1: none throws.
std::atomic<long> copies_before_fault{-1};
// While set, every event recorded reports a failed device when asked, as a CUDA event does
// after an asynchronous error.
std::atomic<bool> events_fail{false};

class FailedEvent final : public wd::DeviceEvent {
 public:
  bool done() override { throw std::runtime_error("injected device failure"); }
  void wait() override { throw std::runtime_error("injected device failure"); }
};

class FaultyQueue final : public wd::Queue {
 public:
  explicit FaultyQueue(std::unique_ptr<wd::Queue> inner) : inner_(std::move(inner)) {}
  [[nodiscard]] cudaStream_t native() const noexcept override { return inner_->native(); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    long left = copies_before_fault.load();
    while (left > 0 && !copies_before_fault.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) throw std::runtime_error("injected copy fault");
    inner_->copy(dst, src, bytes);
  }
  void copy_peer(void* dst, int dst_device, const void* src, int src_device,
                 std::size_t bytes) override {
    inner_->copy_peer(dst, dst_device, src, src_device, bytes);
  }
  wd::EventPtr record() override {
    if (events_fail) return std::make_shared<FailedEvent>();
    return inner_->record();
  }
  bool idle() override { return inner_->idle(); }
  void wait(const wd::EventPtr& event) override { inner_->wait(event); }
  void synchronize() override { inner_->synchronize(); }

 private:
  std::unique_ptr<wd::Queue> inner_;
};

class FaultyDevice final : public wd::Device {
 public:
  [[nodiscard]] bool is_host() const noexcept override { return true; }
  [[nodiscard]] int ordinal() const noexcept override { return -1; }
  [[nodiscard]] std::string name() const override { return "host (faulty copies)"; }
  void make_current() override {}
  void* allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* p) noexcept override { inner_->release(p); }
  void* allocate_pinned(std::size_t bytes) override { return inner_->allocate_pinned(bytes); }
  void release_pinned(void* p) noexcept override { inner_->release_pinned(p); }
  std::unique_ptr<wd::Queue> make_queue() override {
    return std::make_unique<FaultyQueue>(inner_->make_queue());
  }
  bool export_buffer(const void*, wd::IpcHandle&) override { return false; }
  const void* import_buffer(const wd::IpcHandle&) override { return nullptr; }

 private:
  std::unique_ptr<wd::Device> inner_ = wd::make_host_device();
};

std::unique_ptr<wd::Device> make_faulty_device() { return std::make_unique<FaultyDevice>(); }

class StreamMpiFault : public ::testing::Test {
 protected:
  void SetUp() override { wd::set_host_device_maker(&make_faulty_device); }
  void TearDown() override {
    copies_before_fault = -1;
    events_fail = false;
    wd::set_host_device_maker(&wd::make_host_device);
  }
  static ws::WorldOptions options() {
    ws::WorldOptions o;
    o.streams_per_process = kStreams;
    o.device = ws::DeviceChoice::Host;
    o.mpi = ws::MpiUse::On;
    o.chunk_bytes = kChunk;
    o.cuda_ipc = false;
    return o;
  }
};

}  // namespace

TEST_F(StreamMpiFault, AReceiveFromASendThatFailedPartwayFailsAndTheChannelStaysClean) {
  ws::World world(options());
  ASSERT_EQ(world.processes(), 2) << "run this test under mpirun -np 2";
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(kInts * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 0) {       // process 0
      copies_before_fault = 1;  // the second chunk's copy out of the "GPU" fails
      ws::Request r = ts.isend(ws::device(p, kInts), 3, 5);
      try {
        r.wait();
        ADD_FAILURE() << "a send whose copy failed completed";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "injected copy fault")) << e.what();
      }
      copies_before_fault = -1;
      const auto v = iota_from(40, kInts);
      std::memcpy(p, v.data(), kInts * sizeof(std::int32_t));
      ts.send(ws::device(p, kInts), 3, 5);
    } else if (ts.rank() == 3) {  // process 1
      try {
        ts.recv(ws::device(p, kInts), 0, 5);
        ADD_FAILURE() << "a receive completed from a send that failed partway";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "rank 0's send with tag 5 to rank 3 failed partway"))
            << e.what();
      }
      ts.recv(ws::device(p, kInts), 0, 5);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + kInts), iota_from(40, kInts));
    }
  });
}

TEST_F(StreamMpiFault, ASendCutShortThatNobodyReceivesDoesNotHoldUpTheEndOfTheRun) {
  ws::World world(options());
  try {
    world.run([](ws::TaskStream& ts) {
      if (ts.rank() != 0) return;
      ws::DeviceBytes d = ts.allocate(kInts * sizeof(std::int32_t));
      copies_before_fault = 2;
      ws::Request r = ts.isend(ws::device(static_cast<std::int32_t*>(d.data()), kInts), 2, 9);
      EXPECT_THROW(r.wait(), weft::MessageError);
    });
    if (world.process_rank() == 1) ADD_FAILURE() << "the message rank 2 never took went unreported";
  } catch (const weft::MessageError& e) {
    EXPECT_EQ(world.process_rank(), 1) << e.what();  // the receiving process reports it
    EXPECT_TRUE(contains(e.what(), "ended without receiving it")) << e.what();
  }
}

TEST_F(StreamMpiFault, AReceiveWhoseOwnCopyFailsTakesTheRestAndLeavesTheChannelClean) {
  ws::World world(options());
  // Eight chunks, twice the slots a staged receive posts at once: the last ones are still to
  // come when the copy fails.
  constexpr std::size_t n = 2 * kInts;
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 1) {  // process 0
      for (std::int32_t start : {7, 70}) {
        const auto v = iota_from(start, n);
        std::memcpy(p, v.data(), n * sizeof(std::int32_t));
        ts.send(ws::device(p, n), 2, 4);
      }
    } else if (ts.rank() == 2) {  // process 1
      copies_before_fault = 1;    // the second chunk's copy into the "GPU" fails
      try {
        ts.recv(ws::device(p, n), 1, 4);
        ADD_FAILURE() << "a receive whose copy failed completed";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "injected copy fault")) << e.what();
      }
      copies_before_fault = -1;
      ts.recv(ws::device(p, n), 1, 4);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(70, n));
    }
  });
}

TEST_F(StreamMpiFault, ASendFailingAfterSomeChunksWentTellsItsReceiverAllTheSame) {
  ws::World world(options());
  constexpr std::size_t n = 2 * kInts;  // eight chunks
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 0) {
      copies_before_fault = 5;  // chunks 0-4 are copied out and go; chunk 5's copy fails
      EXPECT_THROW(ts.send(ws::device(p, n), 2, 3), weft::MessageError);
      copies_before_fault = -1;
      const auto v = iota_from(11, n);
      std::memcpy(p, v.data(), n * sizeof(std::int32_t));
      ts.send(ws::device(p, n), 2, 3);
    } else if (ts.rank() == 2) {
      try {
        ts.recv(ws::device(p, n), 0, 3);
        ADD_FAILURE() << "a receive completed from a send that failed partway";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "failed partway")) << e.what();
      }
      ts.recv(ws::device(p, n), 0, 3);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(11, n));
    }
  });
}

TEST_F(StreamMpiFault, AReceiveWhoseDeviceFailsTakesTheRestWithoutAskingItAgain) {
  ws::World world(options());
  constexpr std::size_t n = 2 * kInts;  // eight chunks, twice the slots posted at once
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 1) {
      for (std::int32_t start : {5, 50}) {
        const auto v = iota_from(start, n);
        std::memcpy(p, v.data(), n * sizeof(std::int32_t));
        ts.send(ws::device(p, n), 3, 2);
      }
    } else if (ts.rank() == 3) {
      events_fail = true;  // the first chunk's copy into the "GPU" never reports done
      try {
        ts.recv(ws::device(p, n), 1, 2);
        ADD_FAILURE() << "a receive whose device failed completed";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "injected device failure")) << e.what();
      }
      events_fail = false;
      ts.recv(ws::device(p, n), 1, 2);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(50, n));
    }
  });
}
