// Task streams of one process (weft/stream/world.hpp): ranks, messages matched by source and
// tag in the order sent, every path a transfer can take on the host device, collectives, and
// the errors that replace a hang (no such rank, sizes that differ, a peer that ended).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "stream_test_support.hpp"
#include "weft/error.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
using stream_test::contains;
using stream_test::iota_from;

namespace {

ws::World make_world(int streams, std::size_t eager = 64 * 1024) {
  ws::WorldOptions o;
  o.streams_per_process = streams;
  o.device = ws::DeviceChoice::Host;
  o.mpi = ws::MpiUse::Off;
  o.eager_bytes = eager;
  return ws::World(o);
}

}  // namespace

TEST(StreamWorld, RanksAreProcessRankTimesStreamsPlusLocalIndex) {
  ws::World world = make_world(4);
  EXPECT_EQ(world.size(), 4);
  EXPECT_EQ(world.processes(), 1);
  EXPECT_FALSE(world.uses_mpi());
  std::vector<std::atomic<int>> seen(4);
  world.run([&](ws::TaskStream& ts) {
    EXPECT_EQ(ts.rank(), ts.local_index());
    EXPECT_EQ(ts.size(), 4);
    EXPECT_TRUE(ts.device().is_host);
    EXPECT_EQ(ts.cuda_stream(), nullptr);
    seen[static_cast<std::size_t>(ts.rank())].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(StreamWorld, RejectsOptionsOutOfRange) {
  ws::WorldOptions o;
  o.mpi = ws::MpiUse::Off;
  o.streams_per_process = 0;
  EXPECT_THROW(ws::World{o}, weft::InvalidArgument);
  o.streams_per_process = 1;
  o.chunk_bytes = 100;
  EXPECT_THROW(ws::World{o}, weft::InvalidArgument);
  o.chunk_bytes = (std::size_t{1} << 30) + 1;  // MPI counts a chunk in an int
  EXPECT_THROW(ws::World{o}, weft::InvalidArgument);
}

// A run started inside a run would reset the live one's mailboxes: refused.
TEST(StreamWorld, ARunInsideARunIsRefused) {
  ws::World world = make_world(1);
  world.run([&](ws::TaskStream&) {
    EXPECT_THROW(world.run([](ws::TaskStream&) {}), weft::InvalidState);
  });
  int runs = 0;
  world.run([&](ws::TaskStream&) { ++runs; });  // the world runs again afterwards
  EXPECT_EQ(runs, 1);
}

// Sizes past size_t are refused, where they wrapped to a small region or allocation.
TEST(StreamWorld, SizesThatOverflowAreRefused) {
  ws::World world = make_world(1);
  world.run([](ws::TaskStream& ts) {
    EXPECT_THROW((void)ts.region<double>((std::size_t{1} << 61) + 1, ws::Policy::Simple),
                 weft::InvalidArgument);
    EXPECT_THROW((void)ts.allocate(std::numeric_limits<std::size_t>::max() - 10),
                 weft::InvalidArgument);
    EXPECT_THROW((void)ts.region<float>(4, static_cast<ws::Policy>(9)), weft::InvalidArgument);
  });
}

TEST(StreamWorld, BodyErrorIsRethrownAndReported) {
  ws::World world = make_world(3);
  try {
    world.run([](ws::TaskStream& ts) {
      if (ts.rank() == 1) throw std::out_of_range("rank one failed");
    });
    FAIL() << "run() returned";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "rank one failed");
  }
  ASSERT_EQ(world.errors().size(), 1u);
  EXPECT_TRUE(contains(world.errors()[0], "rank 1"));
}

TEST(StreamWorld, RunsSeveralBodiesInTurn) {
  ws::World world = make_world(2);
  for (int round = 0; round < 3; ++round) {
    world.run([&](ws::TaskStream& ts) {
      int v = ts.rank() == 0 ? round : -1;
      if (ts.rank() == 0) ts.send(ws::host(&v, 1), 1, 0);
      if (ts.rank() == 1) ts.recv(ws::host(&v, 1), 0, 0);
      EXPECT_EQ(v, round);
    });
  }
}

TEST(StreamMessages, SendRecvCarriesTheBytes) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 0) {
      const auto v = iota_from(10, 1000);
      ts.send(ws::host(v.data(), v.size()), 1, 3);
    } else {
      std::vector<std::int32_t> v(1000);
      ts.recv(ws::host(v.data(), v.size()), 0, 3);
      EXPECT_EQ(v, iota_from(10, 1000));
      EXPECT_EQ(ts.transfers().of(ws::Path::HostCopy), 1u);
    }
  });
}

TEST(StreamMessages, MatchesByTagWhateverTheOrderOfReceives) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 0) {
      for (int tag = 0; tag < 5; ++tag) ts.send(ws::host(&tag, 1), 1, tag);
    } else {
      for (int tag = 4; tag >= 0; --tag) {
        int v = -1;
        ts.recv(ws::host(&v, 1), 0, tag);
        EXPECT_EQ(v, tag);
      }
    }
  });
}

TEST(StreamMessages, MessagesOfOneSourceAndTagArriveInOrderSent) {
  ws::World world = make_world(2, /*eager=*/16);  // large ones go by rendezvous
  world.run([](ws::TaskStream& ts) {
    constexpr int kMessages = 50;
    if (ts.rank() == 0) {
      std::vector<std::vector<std::int32_t>> out;
      std::vector<ws::Request> sends;
      for (int i = 0; i < kMessages; ++i) out.push_back(iota_from(i, 64));
      for (auto& v : out) sends.push_back(ts.isend(ws::host(v.data(), v.size()), 1, 7));
      for (auto& r : sends) r.wait();
    } else {
      for (int i = 0; i < kMessages; ++i) {
        std::vector<std::int32_t> v(64);
        ts.recv(ws::host(v.data(), v.size()), 0, 7);
        EXPECT_EQ(v.front(), i);
      }
    }
  });
}

TEST(StreamMessages, NonBlockingBothWaysNeedsNoOrdering) {
  ws::World world = make_world(2, /*eager=*/0);
  world.run([](ws::TaskStream& ts) {
    const int other = 1 - ts.rank();
    auto out = iota_from(ts.rank() * 100, 4096);
    std::vector<std::int32_t> in(4096);
    ws::Request s = ts.isend(ws::host(out.data(), out.size()), other, 0);
    ws::Request r = ts.irecv(ws::host(in.data(), in.size()), other, 0);
    r.wait();
    s.wait();
    EXPECT_EQ(in, iota_from(other * 100, 4096));
    EXPECT_EQ(r.path(), ws::Path::HostCopy);
    EXPECT_TRUE(r.test());
  });
}

TEST(StreamMessages, EagerSendCompletesBeforeItsReceiveIsPosted) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    int v = 41;
    if (ts.rank() == 0) {
      ws::Request r = ts.isend(ws::host(&v, 1), 1, 0);
      EXPECT_TRUE(r.test());  // buffered: done at once
      v = 0;                  // the buffer is the sender's again
      ts.barrier();
    } else {
      ts.barrier();
      ts.recv(ws::host(&v, 1), 0, 0);
      EXPECT_EQ(v, 41);
    }
  });
}

TEST(StreamMessages, DeviceBuffersTakeTheDevicePaths) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 512;
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* dev = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 0) {
      auto v = iota_from(5, n);
      std::copy(v.begin(), v.end(), dev);    // the host device's memory is host memory
      ts.send(ws::device(dev, n), 1, 0);     // device -> device
      ts.send(ws::host(v.data(), n), 1, 1);  // host -> device
      ts.send(ws::device(dev, n), 1, 2);     // device -> host
    } else {
      ts.recv(ws::device(dev, n), 0, 0);
      EXPECT_EQ(std::vector<std::int32_t>(dev, dev + n), iota_from(5, n));
      std::fill(dev, dev + n, 0);
      ts.recv(ws::device(dev, n), 0, 1);
      EXPECT_EQ(std::vector<std::int32_t>(dev, dev + n), iota_from(5, n));
      std::vector<std::int32_t> h(n);
      ts.recv(ws::host(h.data(), n), 0, 2);
      EXPECT_EQ(h, iota_from(5, n));
      const ws::TransferCounts c = ts.transfers();
      EXPECT_EQ(c.of(ws::Path::DeviceCopy), 1u);
      EXPECT_EQ(c.of(ws::Path::HostToDevice), 1u);
      EXPECT_EQ(c.of(ws::Path::DeviceToHost), 1u);
    }
  });
}

TEST(StreamMessages, SendToItselfWorks) {
  ws::World world = make_world(1);
  world.run([](ws::TaskStream& ts) {
    int out = 9, in = 0;
    ws::Request r = ts.irecv(ws::host(&in, 1), 0, 0);
    ts.send(ws::host(&out, 1), 0, 0);
    r.wait();
    EXPECT_EQ(in, 9);
  });
}

// Only the stream itself could post the match of a message to or from its own rank, and it is
// the one waiting: the wait fails at once, naming it, where it waited forever.
TEST(StreamMessages, ABlockingReceiveFromItsOwnRankThatNothingSentFails) {
  ws::World world = make_world(1);
  world.run([](ws::TaskStream& ts) {
    int in = 0;
    try {
      ts.recv(ws::host(&in, 1), 0, 3);
      FAIL() << "the receive returned";
    } catch (const weft::MessageError& e) {
      EXPECT_TRUE(contains(e.what(), "receive from rank 0 (tag 3, 4 bytes), its own rank"))
          << e.what();
    }
  });  // failed and observed: run() has nothing left to report
}

TEST(StreamMessages, ALargeBlockingSendToItsOwnRankFailsAndASmallOneIsBuffered) {
  ws::World world = make_world(1, /*eager=*/16);
  world.run([](ws::TaskStream& ts) {
    std::vector<std::int32_t> big = iota_from(0, 64), in(64);
    EXPECT_THROW(ts.send(ws::host(big.data(), big.size()), 0, 1), weft::MessageError);
    // A withdrawn send leaves nothing behind: a later pair on the same tag matches each other.
    ws::Request r = ts.irecv(ws::host(in.data(), in.size()), 0, 1);
    ts.send(ws::host(big.data(), big.size()), 0, 1);
    r.wait();
    EXPECT_EQ(in, big);
    std::int32_t small = 7, got = 0;
    ts.send(ws::host(&small, 1), 0, 2);  // eager: it ends at once, its bytes wait to be received
    ts.recv(ws::host(&got, 1), 0, 2);
    EXPECT_EQ(got, 7);
  });
}

TEST(StreamMessages, NoSuchRankIsAnError) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    int v = 0;
    try {
      ts.send(ws::host(&v, 1), 2, 0);
      ADD_FAILURE() << "send to rank 2 of 2 returned";
    } catch (const weft::MessageError& e) {
      EXPECT_TRUE(contains(e.what(), "rank 2 does not exist")) << e.what();
    }
    EXPECT_THROW(ts.recv(ws::host(&v, 1), -1, 0), weft::MessageError);
    EXPECT_THROW(ts.send(ws::host(&v, 1), 0, -5), weft::MessageError);
    EXPECT_THROW(ts.send(ws::host(&v, 1), 0, ts.max_tag() + 1), weft::MessageError);
    EXPECT_THROW(ts.send(ws::Buffer{nullptr, 8, ws::Memory::Host}, 0, 0), weft::InvalidArgument);
  });
}

TEST(StreamMessages, SizeMismatchFailsBothSidesNamingTheSizes) {
  for (std::size_t eager : {std::size_t{0}, std::size_t{1} << 20}) {
    ws::World world = make_world(2, eager);
    world.run([](ws::TaskStream& ts) {
      std::vector<char> buf(ts.rank() == 0 ? 100 : 60);
      try {
        if (ts.rank() == 0) ts.send(ws::host(buf.data(), buf.size()), 1, 0);
        if (ts.rank() == 1) {
          ts.recv(ws::host(buf.data(), buf.size()), 0, 0);
          ADD_FAILURE() << "the receive of 60 bytes took 100";
        }
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "100 bytes")) << e.what();
        EXPECT_TRUE(contains(e.what(), "60 bytes")) << e.what();
      }
    });
  }
}

TEST(StreamMessages, ReceiveFromAStreamThatEndedFailsInsteadOfHanging) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 1) {
      int v = 0;
      try {
        ts.recv(ws::host(&v, 1), 0, 0);
        ADD_FAILURE() << "received a message never sent";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "ended without sending")) << e.what();
      }
    }
  });
}

TEST(StreamMessages, LargeSendToAStreamThatEndedFails) {
  ws::World world = make_world(2, /*eager=*/0);
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 0) {
      std::vector<char> big(1 << 16);
      EXPECT_THROW(ts.send(ws::host(big.data(), big.size()), 1, 0), weft::MessageError);
    }
  });
}

TEST(StreamMessages, AnUnreceivedMessageIsReportedByRun) {
  ws::World world = make_world(2);
  try {
    world.run([](ws::TaskStream& ts) {
      int v = 1;
      if (ts.rank() == 0) ts.send(ws::host(&v, 1), 1, 4);
      ts.barrier();
    });
    FAIL() << "run() did not report the message";
  } catch (const weft::MessageError& e) {
    EXPECT_TRUE(contains(e.what(), "ended without receiving it")) << e.what();
    EXPECT_TRUE(contains(e.what(), "tag 4")) << e.what();
  }
}

TEST(StreamMessages, ARequestLeftPendingIsWithdrawnAndReported) {
  ws::World world = make_world(2);
  try {
    world.run([](ws::TaskStream& ts) {
      static int sink = 0;
      if (ts.rank() == 1) (void)ts.irecv(ws::host(&sink, 1), 0, 9);
    });
    FAIL() << "run() did not report the pending receive";
  } catch (const weft::MessageError& e) {
    // Withdrawn when rank 1 ended first; failed (and the failure reported) when rank 0 did.
    EXPECT_TRUE(
        contains(e.what(), "rank 1 ended with a receive from rank 0 (tag 9, 4 bytes) pending") ||
        contains(e.what(), "never waited on failed"))
        << e.what();
  }
}

// A request kept past run() whose receive was withdrawn at the stream's end fails when waited
// on, naming it, where it stayed pending and wait() never returned.
TEST(StreamMessages, ARequestKeptPastRunFailsInsteadOfWaitingForever) {
  ws::World world = make_world(2);
  ws::Request kept;
  static int sink = 0;
  try {
    world.run([&](ws::TaskStream& ts) {
      if (ts.rank() == 1) kept = ts.irecv(ws::host(&sink, 1), 0, 9);
    });
  } catch (const weft::MessageError&) {  // reported by run(), as the test above says
  }
  EXPECT_THROW((void)kept.test(), weft::MessageError);  // ended, failed: test() throws
  try {
    kept.wait();
    FAIL() << "the withdrawn receive completed";
  } catch (const weft::MessageError& e) {
    EXPECT_TRUE(contains(e.what(), "tag 9")) << e.what();  // withdrawn, or failed as above
  }
}

TEST(StreamMessages, CallsFromAnotherThreadAreRefused) {
  ws::World world = make_world(1);
  world.run([](ws::TaskStream& ts) {
    int v = 0;
    std::thread other([&] { EXPECT_THROW(ts.send(ws::host(&v, 1), 0, 0), weft::InvalidState); });
    other.join();
  });
}

// A request is moved on by its own stream's thread only: from another, its wait and test are
// refused (they raced with the stream's own progress).
TEST(StreamMessages, ARequestWaitedOnFromAnotherThreadIsRefused) {
  ws::World world = make_world(1);
  world.run([](ws::TaskStream& ts) {
    int in = 0, out = 5;
    ws::Request r = ts.irecv(ws::host(&in, 1), 0, 1);
    std::thread other([&] {
      EXPECT_THROW(r.wait(), weft::InvalidState);
      EXPECT_THROW((void)r.test(), weft::InvalidState);
    });
    other.join();
    ts.send(ws::host(&out, 1), 0, 1);
    r.wait();
    EXPECT_EQ(in, 5);
  });
}

// A thread that polls a request while its run ends and the next begins is refused, then told
// how the transfer ended, without reading the stream's own state (ThreadSanitizer saw it race
// with the next run's start).
TEST(StreamMessages, ARequestPolledFromAnotherThreadAcrossRunsLeavesTheStreamAlone) {
  ws::World world = make_world(2);
  ws::Request r;
  std::atomic<bool> posted{false}, stop{false};
  std::atomic<int> refused{0}, ended{0};
  static int in = 0, out = 5;
  std::thread poller([&] {
    while (!posted.load()) std::this_thread::yield();
    while (!stop.load()) {
      try {
        if (r.test()) ended.fetch_add(1);
      } catch (const weft::InvalidState&) {
        refused.fetch_add(1);
      }
    }
  });
  world.run([&](ws::TaskStream& ts) {
    if (ts.rank() == 0) {
      r = ts.irecv(ws::host(&in, 1), 1, 1);
      posted = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      r.wait();
    } else {
      ts.send(ws::host(&out, 1), 0, 1);
    }
  });
  world.run([](ws::TaskStream&) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); });
  while (ended.load() == 0) std::this_thread::yield();  // once the run is over it reports
  stop = true;
  poller.join();
  EXPECT_EQ(in, 5);
  EXPECT_GT(refused.load(), 0);
}

// A request kept past its World reports how its transfer ended without touching the stream,
// which is gone.
TEST(StreamMessages, ARequestOutlivingItsWorldReportsHowItEnded) {
  ws::Request sent, withdrawn;
  static int out = 4, in = 0, sink = 0;
  {
    ws::World world = make_world(2);
    try {
      world.run([&](ws::TaskStream& ts) {
        if (ts.rank() == 0) {
          sent = ts.isend(ws::host(&out, 1), 1, 1);
          sent.wait();
        } else {
          ts.recv(ws::host(&in, 1), 0, 1);
          withdrawn = ts.irecv(ws::host(&sink, 1), 0, 9);
        }
      });
    } catch (const weft::MessageError&) {  // the receive left pending, reported by run()
    }
  }
  EXPECT_EQ(in, 4);
  EXPECT_TRUE(sent.test());
  sent.wait();
  EXPECT_EQ(sent.path(), ws::Path::HostCopy);
  EXPECT_THROW(withdrawn.wait(), weft::MessageError);
  EXPECT_THROW((void)withdrawn.test(), weft::MessageError);
}

TEST(StreamCollectives, BarrierHoldsEveryRankUntilAllArrive) {
  ws::World world = make_world(4);
  std::atomic<int> arrived{0};
  world.run([&](ws::TaskStream& ts) {
    for (int round = 1; round <= 20; ++round) {
      arrived.fetch_add(1);
      ts.barrier();
      EXPECT_GE(arrived.load(), round * 4);
      ts.barrier();
    }
  });
}

TEST(StreamCollectives, BarrierFailsWhenARankEndedBeforeIt) {
  ws::World world = make_world(3);
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 2) return;
    try {
      ts.barrier();
      ADD_FAILURE() << "a barrier passed without rank 2";
    } catch (const weft::MessageError& e) {
      EXPECT_TRUE(contains(e.what(), "rank 2 ended without reaching barrier")) << e.what();
    }
  });
}

// Collectives that differ between ranks (the kind, the root or the size) fail on the rank
// that finds the difference, and the others' collectives fail as it ends: where they waited
// on each other, each in its own collective, none returned.
TEST(StreamCollectives, MismatchedCollectivesFailInsteadOfWaiting) {
  struct Case {
    const char* name;
    std::function<void(ws::TaskStream&, std::vector<std::int32_t>&)> call;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"kind",
       [](ws::TaskStream& ts, std::vector<std::int32_t>& v) {
         if (ts.rank() == 0) {
           ts.barrier();
         } else {
           ts.bcast(ws::host(v.data(), v.size()), 1);
         }
       },
       "is barrier"},
      {"root",
       [](ws::TaskStream& ts, std::vector<std::int32_t>& v) {
         ts.bcast(ws::host(v.data(), v.size()), ts.rank());
       },
       "bcast (root"},
      {"size",
       [](ws::TaskStream& ts, std::vector<std::int32_t>& v) {
         ts.bcast(ws::host(v.data(), v.size() - static_cast<std::size_t>(ts.rank())), 0);
       },
       "bytes)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ws::World world = make_world(2, /*eager=*/16);  // large: a send waits for its receive
    try {
      world.run([&](ws::TaskStream& ts) {
        std::vector<std::int32_t> v = iota_from(0, 64);
        ts.barrier();  // a matching collective first: the check compares by position
        c.call(ts, v);
      });
      FAIL() << "mismatched collectives returned";
    } catch (const weft::MessageError&) {
    }
    bool named = false;
    for (const std::string& e : world.errors()) {
      named = named || (contains(e, "collective call 2 (counting from 1) of rank") &&
                        contains(e, c.expected));
    }
    EXPECT_TRUE(named) << testing::PrintToString(world.errors());
  }
}

// A refused collective is not counted: a body that catches the refusal and makes the right call
// goes on in step with the others.
TEST(StreamCollectives, ACaughtMismatchLeavesTheCallsInStep) {
  ws::World world = make_world(2);
  world.run([](ws::TaskStream& ts) {
    std::int32_t v = 0;
    if (ts.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // rank 1 records first
      EXPECT_THROW(ts.bcast(ws::host(&v, 1), 0), weft::MessageError);
      ts.bcast(ws::host(&v, 1), 1);
    } else {
      v = 7;
      ts.bcast(ws::host(&v, 1), 1);
    }
    EXPECT_EQ(v, 7);
    ts.barrier();
  });
}

TEST(StreamCollectives, BroadcastFromEveryRootToEverySize) {
  for (int streams = 1; streams <= 6; ++streams) {
    ws::World world = make_world(streams, /*eager=*/32);
    world.run([&](ws::TaskStream& ts) {
      for (int root = 0; root < streams; ++root) {
        std::vector<std::int32_t> v(100, -1);
        if (ts.rank() == root) v = iota_from(root, 100);
        ts.bcast(ws::host(v.data(), v.size()), root);
        EXPECT_EQ(v, iota_from(root, 100)) << "root " << root << " of " << streams;
      }
    });
  }
}

TEST(StreamCollectives, AllreduceSumsOnEveryRank) {
  ws::World world = make_world(5);
  world.run([](ws::TaskStream& ts) {
    std::vector<double> d{1.0 * ts.rank(), 1.0};
    ts.allreduce_sum(d.data(), d.size());
    EXPECT_DOUBLE_EQ(d[0], 10.0);
    EXPECT_DOUBLE_EQ(d[1], 5.0);
    std::int64_t i = ts.rank() + 1;
    ts.allreduce_sum(&i, 1);
    EXPECT_EQ(i, 15);
    ws::DeviceBytes dev = ts.allocate(sizeof(float));
    *static_cast<float*>(dev.data()) = 2.0F;
    ts.allreduce_sum(static_cast<float*>(dev.data()), 1, ws::Memory::Device);
    EXPECT_FLOAT_EQ(*static_cast<float*>(dev.data()), 10.0F);
  });
}

// Many streams exchanging many messages of random sizes with random partners: every byte
// arrives where it was sent (ThreadSanitizer runs this).
TEST(StreamStress, RandomExchangesDeliverEveryMessage) {
  constexpr int kStreams = 4;
  constexpr int kRounds = 2000;
  ws::World world = make_world(kStreams, /*eager=*/256);
  world.run([&](ws::TaskStream& ts) {
    std::mt19937 shared(12345);  // every rank draws the same schedule
    for (int round = 0; round < kRounds; ++round) {
      const int from = static_cast<int>(shared() % kStreams);
      const int to = static_cast<int>(shared() % kStreams);
      const std::size_t n = 1 + shared() % 300;
      const bool on_device = shared() % 2 == 0;
      if (ts.rank() != from && ts.rank() != to) continue;
      std::vector<std::int32_t> v(n, -1);
      ws::DeviceBytes dev = ts.allocate(n * sizeof(std::int32_t));
      auto* d = static_cast<std::int32_t*>(dev.data());
      ws::Request recv;
      if (ts.rank() == to) {
        recv = ts.irecv(on_device ? ws::device(d, n) : ws::host(v.data(), n), from, round);
      }
      if (ts.rank() == from) {
        const auto out = iota_from(round, n);
        ts.send(ws::host(out.data(), n), to, round);
      }
      if (ts.rank() == to) {
        recv.wait();
        const std::int32_t* got = on_device ? d : v.data();
        EXPECT_EQ(std::vector<std::int32_t>(got, got + n), iota_from(round, n)) << round;
      }
    }
    ts.barrier();
  });
}
