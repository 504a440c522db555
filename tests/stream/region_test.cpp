// Shared regions (weft/stream/region.hpp) on the host device, whose device memory is a
// separate host buffer: each policy's state after every kind of access, the copies it makes
// (and only those), and data that comes out right through a chain of kernels.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "weft/error.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
using ws::Access;
using ws::Policy;
using ws::RegionState;

namespace {

ws::World host_world(int streams = 1) {
  ws::WorldOptions o;
  o.streams_per_process = streams;
  o.device = ws::DeviceChoice::Host;
  o.mpi = ws::MpiUse::Off;
  return ws::World(o);
}

// Runs `body` on a World of one task stream.
template <class Body>
void on_stream(Body body) {
  ws::World world = host_world();
  world.run([&](ws::TaskStream& ts) { body(ts); });
}

// A "kernel" of the host device: adds `k` to every element of the device buffer.
void add_on_device(ws::TaskStream& ts, const ws::Region<int>& r, int k, Access access) {
  ts.launch({{&r, access}}, [&](const ws::Launch& l) {
    EXPECT_TRUE(l.on_host);
    int* d = r.device_data();
    for (std::size_t i = 0; i < r.size(); ++i) d[i] = (access == Access::Write ? 0 : d[i]) + k;
  });
}

void fill_host(const ws::Region<int>& r, int value) {
  auto h = r.host(Access::Write);
  std::fill(h.begin(), h.end(), value);
}

int host_value(const ws::Region<int>& r) { return r.host(Access::Read)[0]; }

struct Copies {
  std::uint64_t in, out;
};
Copies copies(const ws::RegionBytes& r) { return {r.copies().to_device, r.copies().to_host}; }
bool operator==(Copies a, Copies b) { return a.in == b.in && a.out == b.out; }
std::ostream& operator<<(std::ostream& os, Copies c) {
  return os << "{in " << c.in << ", out " << c.out << "}";
}

}  // namespace

// A default-constructed or moved-from region reports empty values and refuses host access,
// where its getters dereferenced a null core.
TEST(StreamRegion, AnEmptyRegionReportsEmptyValuesAndRefusesHostAccess) {
  const ws::Region<float> none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.policy(), ws::Policy::Simple);
  EXPECT_EQ(none.state(), ws::RegionState::InHost);
  EXPECT_FALSE(none.copy_in_flight());
  EXPECT_EQ(none.copies().to_device, 0u);
  EXPECT_EQ(none.device_bytes(), nullptr);
  EXPECT_THROW((void)none.host(ws::Access::Read), weft::InvalidState);
}

TEST(StreamRegion, StartsInHostZeroed) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(16, Policy::ReadWrite);
    EXPECT_EQ(r.state(), RegionState::InHost);
    EXPECT_EQ(r.size(), 16u);
    EXPECT_EQ(host_value(r), 0);
    EXPECT_EQ(copies(r), (Copies{0, 0}));
  });
}

TEST(StreamRegion, SimpleCopiesInAndOutAroundEveryKernel) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(8, Policy::Simple);
    fill_host(r, 1);
    EXPECT_EQ(r.state(), RegionState::InHost);
    add_on_device(ts, r, 1, Access::Read);  // even a kernel that only reads: in and out
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    EXPECT_EQ(r.state(), RegionState::InAll);
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(copies(r), (Copies{2, 2}));
    EXPECT_EQ(host_value(r), 3);  // the host is current without a copy of its own
    EXPECT_EQ(copies(r), (Copies{2, 2}));
    add_on_device(ts, r, 5, Access::Write);  // a write-only kernel is copied in all the same
    EXPECT_EQ(copies(r), (Copies{3, 3}));
    EXPECT_EQ(host_value(r), 5);
  });
}

TEST(StreamRegion, ImprovedSimpleCopiesInWhatIsReadAndOutWhatIsWritten) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(8, Policy::ImprovedSimple);
    fill_host(r, 2);
    add_on_device(ts, r, 0, Access::Read);
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    EXPECT_EQ(r.state(), RegionState::InAll);
    add_on_device(ts, r, 7, Access::Write);
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    EXPECT_EQ(host_value(r), 7);
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(copies(r), (Copies{2, 2}));
    EXPECT_EQ(host_value(r), 8);
    fill_host(r, 0);
    EXPECT_EQ(r.state(), RegionState::InHost);
  });
}

TEST(StreamRegion, ReadWriteCopiesOnlyWhenAReadNeedsTheOtherSide) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(8, Policy::ReadWrite);
    // InHost: host accesses stay there; a GPU read copies in -> InAll.
    fill_host(r, 3);
    EXPECT_EQ(r.state(), RegionState::InHost);
    add_on_device(ts, r, 0, Access::Read);
    EXPECT_EQ(r.state(), RegionState::InAll);
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    // InAll: reads on either side copy nothing.
    add_on_device(ts, r, 0, Access::Read);
    EXPECT_EQ(host_value(r), 3);
    EXPECT_EQ(r.state(), RegionState::InAll);
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    // A GPU write -> InDevice without a copy; further GPU accesses copy nothing.
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(r.state(), RegionState::InDevice);
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    // InDevice: a host read copies out -> InAll.
    EXPECT_EQ(host_value(r), 5);
    EXPECT_EQ(r.state(), RegionState::InAll);
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    // InAll: a host write -> InHost without a copy; a GPU write from InHost -> InDevice
    // without one either (Write promises the whole region).
    fill_host(r, 9);
    EXPECT_EQ(r.state(), RegionState::InHost);
    add_on_device(ts, r, 4, Access::Write);
    EXPECT_EQ(r.state(), RegionState::InDevice);
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    // InDevice: a host write -> InHost, no copy; a host update from InDevice copies out first.
    add_on_device(ts, r, 1, Access::ReadWrite);
    {
      auto h = r.host(Access::ReadWrite);
      EXPECT_EQ(h[0], 5);
      h[0] += 1;
    }
    EXPECT_EQ(r.state(), RegionState::InHost);
    EXPECT_EQ(copies(r), (Copies{1, 2}));
    add_on_device(ts, r, 0, Access::Read);
    EXPECT_EQ(r.device_data()[0], 6);
    add_on_device(ts, r, 0, Access::Write);
    fill_host(r, 1);  // InDevice -> host write: no copy out
    EXPECT_EQ(r.state(), RegionState::InHost);
    EXPECT_EQ(copies(r), (Copies{2, 2}));
  });
}

TEST(StreamRegion, AsyncStartsTheCopyAtTheWriteAndWaitsAtTheRead) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(8, Policy::Async);
    fill_host(r, 4);  // the end of the host write starts the copy in
    EXPECT_EQ(r.state(), RegionState::InAll);
    EXPECT_TRUE(r.copy_in_flight());
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    add_on_device(ts, r, 0, Access::Read);  // waits for it; nothing more to copy
    EXPECT_FALSE(r.copy_in_flight());
    EXPECT_EQ(copies(r), (Copies{1, 0}));
    add_on_device(ts, r, 1, Access::ReadWrite);  // the GPU write starts the copy out
    EXPECT_EQ(r.state(), RegionState::InAll);
    EXPECT_TRUE(r.copy_in_flight());
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    EXPECT_EQ(host_value(r), 5);  // waits for it
    EXPECT_FALSE(r.copy_in_flight());
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    {
      auto h = r.host(Access::Read);  // reads copy nothing more
      EXPECT_EQ(h[7], 5);
    }
    EXPECT_EQ(copies(r), (Copies{1, 1}));
    {
      auto h = r.host(Access::Write);  // InHost while the write lasts
      EXPECT_EQ(r.state(), RegionState::InHost);
      std::fill(h.begin(), h.end(), 6);
    }
    EXPECT_EQ(copies(r), (Copies{2, 1}));
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(host_value(r), 7);
  });
}

TEST(StreamRegion, ChainsOfKernelsGiveTheSameResultUnderEveryPolicy) {
  for (Policy p : {Policy::Simple, Policy::ImprovedSimple, Policy::ReadWrite, Policy::Async}) {
    on_stream([&](ws::TaskStream& ts) {
      auto a = ts.region<int>(64, p);
      auto b = ts.region<int>(64, p);
      {
        auto h = a.host(Access::Write);
        std::iota(h.begin(), h.end(), 0);
      }
      for (int step = 0; step < 5; ++step) {
        ts.launch({ws::reads(a), ws::writes(b)}, [&](const ws::Launch&) {
          for (int i = 0; i < 64; ++i) b.device_data()[i] = a.device_data()[i] * 2;
        });
        ts.launch({ws::reads(b), ws::writes(a)}, [&](const ws::Launch&) {
          for (int i = 0; i < 64; ++i) a.device_data()[i] = b.device_data()[i] + 1;
        });
        auto h = a.host(Access::ReadWrite);  // the host takes a hand between steps
        h[0] += 1;
      }
      auto h = a.host(Access::Read);
      // a <- 2a + 1 five times, and a[0] gets one more each step.
      int expect_1 = 1;
      int expect_0 = 0;
      for (int step = 0; step < 5; ++step) {
        expect_1 = expect_1 * 2 + 1;
        expect_0 = expect_0 * 2 + 1 + 1;
      }
      EXPECT_EQ(h[1], expect_1) << ws::to_string(p);
      EXPECT_EQ(h[0], expect_0) << ws::to_string(p);
    });
  }
}

TEST(StreamRegion, LaunchRejectsARegionTwiceOrOfAnotherStream) {
  ws::World world = host_world(2);
  std::vector<ws::Region<int>> regions(2);
  world.run([&](ws::TaskStream& ts) {
    regions[static_cast<std::size_t>(ts.rank())] = ts.region<int>(4, Policy::ReadWrite);
    ts.barrier();
    const auto& mine = regions[static_cast<std::size_t>(ts.rank())];
    const auto& theirs = regions[static_cast<std::size_t>(1 - ts.rank())];
    EXPECT_THROW(ts.launch({ws::reads(mine), ws::writes(mine)}, [](const ws::Launch&) {}),
                 weft::InvalidArgument);
    EXPECT_THROW(ts.launch({ws::reads(theirs)}, [](const ws::Launch&) {}), weft::InvalidArgument);
    ts.barrier();
  });
  regions.clear();
}

// A launch while a HostAccess of one of its regions is open is refused: the kernel and the
// policy's copies would race with the host's reads and writes through it.
TEST(StreamRegion, ALaunchWhileAHostAccessIsOpenIsRefused) {
  on_stream([](ws::TaskStream& ts) {
    auto r = ts.region<int>(4, Policy::ReadWrite);
    {
      auto h = r.host(Access::Write);
      auto moved = std::move(h);  // the access stays open until the one holding it goes
      EXPECT_THROW(add_on_device(ts, r, 1, Access::ReadWrite), weft::InvalidState);
      moved[0] = 5;
    }
    add_on_device(ts, r, 1, Access::ReadWrite);
    EXPECT_EQ(host_value(r), 6);
  });
}

// Regions and allocations kept past their World: the World freed their memory as it went, and
// the handles refuse access instead of reaching for a stream that is gone.
TEST(StreamRegion, ARegionOutlivingItsWorldRefusesAccessAndFreesNothingTwice) {
  ws::Region<int> kept;
  ws::DeviceBytes bytes;
  {
    ws::World world = host_world();
    world.run([&](ws::TaskStream& ts) {
      kept = ts.region<int>(8, Policy::Async);
      fill_host(kept, 3);  // an Async write: its copy to the device is in flight
      bytes = ts.allocate(64);
    });
  }
  EXPECT_EQ(kept.size(), 8u);
  EXPECT_EQ(kept.device_data(), nullptr);
  try {
    (void)kept.host(Access::Read);
    FAIL() << "a host access to a region whose World is gone";
  } catch (const weft::InvalidState& e) {
    EXPECT_NE(std::string(e.what()).find("World was destroyed"), std::string::npos) << e.what();
  }
}  // `kept` and `bytes` go here: nothing is freed twice (the sanitizer builds check it)

// An access still open as its World goes keeps the host buffer it points at: the World frees the
// rest, and the access frees the buffer as it ends (the sanitizer builds check both).
TEST(StreamRegion, AHostAccessOpenAsItsWorldGoesKeepsItsBufferUntilItEnds) {
  std::unique_ptr<ws::HostAccess<int>> access;
  {
    ws::World world = host_world();
    world.run([&](ws::TaskStream& ts) {
      access = std::make_unique<ws::HostAccess<int>>(
          ts.region<int>(8, Policy::Async).host(Access::Write));
    });
  }
  std::fill(access->begin(), access->end(), 5);
  EXPECT_EQ((*access)[7], 5);
  access.reset();
}

// An access may end on another thread while its World goes: whichever comes first, the copy in
// that the access's end queues is waited for before the region's memory goes (ThreadSanitizer
// and AddressSanitizer builds check it; both reported it before the life's lock covered it).
TEST(StreamRegion, AnAccessEndingOnAnotherThreadAsItsWorldGoesIsSafe) {
  for (int round = 0; round < 50; ++round) {
    std::unique_ptr<ws::HostAccess<int>> access;
    ws::WorldOptions o;
    o.device = ws::DeviceChoice::Host;
    o.mpi = ws::MpiUse::Off;
    auto world = std::make_unique<ws::World>(o);
    world->run([&](ws::TaskStream& ts) {
      access = std::make_unique<ws::HostAccess<int>>(
          ts.region<int>(1024, Policy::Async).host(Access::Write));
    });
    std::thread ender([&] { access.reset(); });
    world.reset();
    ender.join();
  }
}

// An access keeps its region alive: one taken from a temporary Region writes into a buffer that
// is still there.
TEST(StreamRegion, AHostAccessKeepsATemporaryRegionAlive) {
  on_stream([](ws::TaskStream& ts) {
    auto h = ts.region<int>(8, Policy::Async).host(Access::Write);
    std::fill(h.begin(), h.end(), 3);
    EXPECT_EQ(h[7], 3);
  });  // the access ends (an Async write starts its copy in), then the region goes
}
