// Task streams across two processes when a message fails partway (run by ctest under
// `mpirun -np 2` on the loopback interface): the World's device is the host's, wrapped so that
// a copy or an event fails on demand, and so that its memory lives in POSIX shared memory that
// the other process can map, as CUDA IPC maps a GPU buffer. A device message is staged through
// pinned chunks, so a copy that fails after its header went leaves the receiver waiting for
// chunks that never come, unless the transport tells it. The receive must fail with an error
// naming the sender, the channel must carry the next message intact, and a message so cut
// short that nobody receives must not hold up the end of the run. With IPC on, the offer, the
// fallback to chunks and a failed copy of a mapped buffer are checked the same way.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
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
// While set, this process cannot map the other's buffers (an IPC import that fails).
std::atomic<bool> imports_fail{false};

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

// Device memory in POSIX shared memory, one object per allocation: exporting a buffer names
// its object and offset, and importing maps the object (once, as the CUDA device caches its
// mappings).
class SharedMemory {
 public:
  ~SharedMemory() {
    for (auto& [base, a] : allocations_) {
      munmap(base, a.bytes);
      shm_unlink(a.name.c_str());
    }
    for (auto& [name, m] : imports_) munmap(m.base, m.bytes);
  }
  void* allocate(std::size_t bytes) {
    static std::atomic<int> serial{0};
    const std::string name =
        "/weft-test-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
    const std::size_t size = bytes == 0 ? 1 : bytes;
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
      throw std::runtime_error("shm_open/ftruncate failed for " + name);
    }
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) throw std::runtime_error("mmap failed for " + name);
    std::lock_guard lock(mutex_);
    allocations_[base] = {name, size};
    return base;
  }
  void release(void* p) noexcept {
    std::lock_guard lock(mutex_);
    const auto it = allocations_.find(p);
    if (it == allocations_.end()) return;
    munmap(p, it->second.bytes);
    shm_unlink(it->second.name.c_str());
    allocations_.erase(it);
  }
  bool export_buffer(const void* p, wd::IpcHandle& out) {
    std::lock_guard lock(mutex_);
    auto it = allocations_.upper_bound(const_cast<void*>(p));
    if (it == allocations_.begin()) return false;
    --it;
    const auto* base = static_cast<const std::byte*>(it->first);
    const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(p) - base);
    if (offset >= it->second.bytes) return false;
    const std::string id = it->second.name + ":" + std::to_string(it->second.bytes);
    if (id.size() >= sizeof out.handle) return false;
    std::memset(out.handle, 0, sizeof out.handle);
    std::memcpy(out.handle, id.data(), id.size());
    out.offset = offset;
    return true;
  }
  const void* import_buffer(const wd::IpcHandle& h) {
    if (imports_fail) return nullptr;
    const std::string id(reinterpret_cast<const char*>(h.handle));
    std::lock_guard lock(mutex_);
    auto it = imports_.find(id);
    if (it == imports_.end()) {
      const auto colon = id.rfind(':');
      const std::string name = id.substr(0, colon);
      const std::size_t bytes = std::stoull(id.substr(colon + 1));
      const int fd = shm_open(name.c_str(), O_RDWR, 0);
      if (fd < 0) return nullptr;
      void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (base == MAP_FAILED) return nullptr;
      it = imports_.emplace(id, Mapping{base, bytes}).first;
    }
    return static_cast<const std::byte*>(it->second.base) + h.offset;
  }

 private:
  struct Allocation {
    std::string name;
    std::size_t bytes = 0;
  };
  struct Mapping {
    void* base = nullptr;
    std::size_t bytes = 0;
  };
  std::mutex mutex_;
  std::map<void*, Allocation> allocations_;
  std::map<std::string, Mapping> imports_;
};

class FaultyDevice final : public wd::Device {
 public:
  [[nodiscard]] bool is_host() const noexcept override { return true; }
  [[nodiscard]] int ordinal() const noexcept override { return -1; }
  [[nodiscard]] std::string name() const override { return "host (shared, faulty copies)"; }
  void make_current() override {}
  void* allocate(std::size_t bytes) override { return shared_.allocate(bytes); }
  void release(void* p) noexcept override { shared_.release(p); }
  void* allocate_pinned(std::size_t bytes) override { return inner_->allocate_pinned(bytes); }
  PinnedRelease pinned_release() const noexcept override { return inner_->pinned_release(); }
  std::unique_ptr<wd::Queue> make_queue() override {
    return std::make_unique<FaultyQueue>(inner_->make_queue());
  }
  bool export_buffer(const void* p, wd::IpcHandle& out) override {
    return shared_.export_buffer(p, out);
  }
  const void* import_buffer(const wd::IpcHandle& h) override { return shared_.import_buffer(h); }

 private:
  std::unique_ptr<wd::Device> inner_ = wd::make_host_device();
  SharedMemory shared_;
};

std::unique_ptr<wd::Device> make_faulty_device() { return std::make_unique<FaultyDevice>(); }

class StreamMpiFault : public ::testing::Test {
 protected:
  void SetUp() override { wd::set_host_device_maker(&make_faulty_device); }
  void TearDown() override {
    copies_before_fault = -1;
    events_fail = false;
    imports_fail = false;
    wd::set_host_device_maker(&wd::make_host_device);
  }
  static ws::WorldOptions options(bool ipc = false) {
    ws::WorldOptions o;
    o.streams_per_process = kStreams;
    o.device = ws::DeviceChoice::Host;
    o.mpi = ws::MpiUse::On;
    o.chunk_bytes = kChunk;
    o.cuda_ipc = ipc;
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

TEST_F(StreamMpiFault, ABufferTheReceiverMapsGoesOverIpcAndOneItCannotMapInChunks) {
  ws::World world(options(/*ipc=*/true));
  constexpr std::size_t n = 2 * kInts;  // 512 KiB: offered over IPC
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 0) {
      for (std::int32_t start : {21, 42}) {
        const auto v = iota_from(start, n);
        std::memcpy(p, v.data(), n * sizeof(std::int32_t));
        ws::Request r = ts.isend(ws::device(p, n), 2, 8);
        r.wait();
        EXPECT_EQ(r.path(), start == 21 ? ws::Path::MpiIpc : ws::Path::MpiStaged);
      }
    } else if (ts.rank() == 2) {
      ws::Request r = ts.irecv(ws::device(p, n), 0, 8);
      r.wait();
      EXPECT_EQ(r.path(), ws::Path::MpiIpc);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(21, n));
      imports_fail = true;  // the second offer cannot be mapped: the chunks follow
      ws::Request again = ts.irecv(ws::device(p, n), 0, 8);
      again.wait();
      EXPECT_EQ(again.path(), ws::Path::MpiStaged);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(42, n));
    }
  });
}

TEST_F(StreamMpiFault, AMappedBufferWhoseCopyFailsFailsBothSidesAndTheChannelStaysClean) {
  ws::World world(options(/*ipc=*/true));
  constexpr std::size_t n = 2 * kInts;
  world.run([](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 1) {
      try {
        ts.send(ws::device(p, n), 3, 6);
        ADD_FAILURE() << "a send whose receiver's copy failed completed";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "rank 3 mapped the buffer sent with tag 6")) << e.what();
      }
      const auto v = iota_from(33, n);
      std::memcpy(p, v.data(), n * sizeof(std::int32_t));
      ts.send(ws::device(p, n), 3, 6);
    } else if (ts.rank() == 3) {
      copies_before_fault = 0;  // the copy out of the mapped buffer fails
      try {
        ts.recv(ws::device(p, n), 1, 6);
        ADD_FAILURE() << "a receive whose copy failed completed";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "injected copy fault")) << e.what();
      }
      copies_before_fault = -1;
      ts.recv(ws::device(p, n), 1, 6);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(33, n));
    }
  });
}
