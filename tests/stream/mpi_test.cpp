// Task streams across two processes (run by ctest under `mpirun -np 2` on the loopback
// interface): ranks span the processes, messages of every size and memory cross over MPI by
// the path they report, collectives see every rank, and a peer that ended, sizes that differ
// or a message left unreceived give errors rather than a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
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

constexpr int kStreams = 2;

ws::WorldOptions options(std::size_t chunk = 64 * 1024) {
  ws::WorldOptions o;
  o.streams_per_process = kStreams;
  o.device = ws::DeviceChoice::Host;
  o.mpi = ws::MpiUse::On;
  o.chunk_bytes = chunk;
  return o;
}

// Runs `barriers` barriers on every stream of `world` and checks that every stream got past
// them: the processes' Worlds are in step.
void expect_barriers_pass(ws::World& world, int barriers = 1) {
  std::atomic<int> passed{0};
  world.run([&](ws::TaskStream& ts) {
    for (int i = 0; i < barriers; ++i) ts.barrier();
    passed.fetch_add(1);
  });
  EXPECT_EQ(passed.load(), kStreams);
}

}  // namespace

TEST(StreamMpi, RanksSpanTheProcesses) {
  ws::World world(options());
  ASSERT_TRUE(world.uses_mpi());
  ASSERT_EQ(world.processes(), 2) << "run this test under mpirun -np 2";
  EXPECT_EQ(world.size(), 2 * kStreams);
  world.run([&](ws::TaskStream& ts) {
    EXPECT_EQ(ts.rank(), world.process_rank() * kStreams + ts.local_index());
    EXPECT_EQ(ts.process_rank(), world.process_rank());
  });
}

TEST(StreamMpi, PingPongOfEverySizeAndMemory) {
  ws::World world(options());
  world.run([](ws::TaskStream& ts) {
    // Rank 0 (process 0) with rank 3 (process 1); ranks 1 and 2 with each other, across too.
    const int partner = ts.size() - 1 - ts.rank();
    const bool first = ts.rank() < partner;
    for (std::size_t n : {std::size_t{0}, std::size_t{2}, std::size_t{60}, std::size_t{61},
                          std::size_t{5000}, std::size_t{100000}}) {
      for (ws::Memory memory : {ws::Memory::Host, ws::Memory::Device}) {
        const int tag = static_cast<int>(n % 1000);
        ws::DeviceBytes dev = ts.allocate(n * sizeof(std::int32_t));
        std::vector<std::int32_t> hostv(n);
        auto* data =
            memory == ws::Memory::Host ? hostv.data() : static_cast<std::int32_t*>(dev.data());
        const ws::Buffer buf = memory == ws::Memory::Host ? ws::host(data, n) : ws::device(data, n);
        const auto expect = iota_from(ts.rank() < partner ? 1 : 2, n);
        if (first) {
          std::copy(expect.begin(), expect.end(), data);
          ws::Request r = ts.isend(buf, partner, tag);
          r.wait();
          EXPECT_EQ(r.path(), memory == ws::Memory::Host ? ws::Path::Mpi : ws::Path::MpiStaged);
          ts.recv(buf, partner, tag);
          EXPECT_EQ(std::vector<std::int32_t>(data, data + n), iota_from(2, n)) << n;
        } else {
          ts.recv(buf, partner, tag);
          EXPECT_EQ(std::vector<std::int32_t>(data, data + n), iota_from(1, n)) << n;
          const auto back = iota_from(2, n);
          std::copy(back.begin(), back.end(), data);
          ts.send(buf, partner, tag);
        }
      }
    }
  });
}

TEST(StreamMpi, ManyMessagesOfOneTagArriveInOrder) {
  ws::World world(options(4096));
  world.run([](ws::TaskStream& ts) {
    constexpr int kMessages = 20;
    if (ts.rank() == 1) {
      std::vector<std::vector<std::int32_t>> out;
      for (int i = 0; i < kMessages; ++i) out.push_back(iota_from(i, 3000));  // 3 chunks each
      std::vector<ws::Request> sends;
      for (int i = 0; i < kMessages; ++i) {
        sends.push_back(ts.isend(ws::host(out[static_cast<std::size_t>(i)].data(), 3000), 2, 5));
      }
      for (auto& r : sends) r.wait();
    } else if (ts.rank() == 2) {
      std::vector<std::vector<std::int32_t>> in(kMessages, std::vector<std::int32_t>(3000));
      std::vector<ws::Request> recvs;
      for (int i = 0; i < kMessages; ++i) {
        recvs.push_back(ts.irecv(ws::device(in[static_cast<std::size_t>(i)].data(), 3000), 1, 5));
      }
      for (auto& r : recvs) r.wait();
      for (int i = 0; i < kMessages; ++i) EXPECT_EQ(in[static_cast<std::size_t>(i)][0], i);
    }
  });
}

TEST(StreamMpi, CollectivesSeeEveryRank) {
  ws::World world(options());
  world.run([](ws::TaskStream& ts) {
    for (int root = 0; root < ts.size(); ++root) {
      std::vector<std::int32_t> v(20000, -1);
      if (ts.rank() == root) v = iota_from(root, 20000);
      ts.bcast(ws::host(v.data(), v.size()), root);
      EXPECT_EQ(v, iota_from(root, 20000));
    }
    double d = ts.rank();
    ts.allreduce_sum(&d, 1);
    EXPECT_DOUBLE_EQ(d, 6.0);
    for (int i = 0; i < 10; ++i) ts.barrier();
  });
}

TEST(StreamMpi, SizeMismatchFailsTheReceiveAndLeavesTheChannelClean) {
  ws::World world(options(4096));
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 0) {
      std::vector<char> big(10000, 'x');
      ts.send(ws::host(big.data(), big.size()), 3, 1);
      int after = 77;
      ts.send(ws::host(&after, 1), 3, 1);
    } else if (ts.rank() == 3) {
      std::vector<char> small(100);
      try {
        ts.recv(ws::host(small.data(), small.size()), 0, 1);
        ADD_FAILURE() << "a receive of 100 bytes took 10000";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "10000 bytes")) << e.what();
      }
      int after = 0;
      ts.recv(ws::host(&after, 1), 0, 1);
      EXPECT_EQ(after, 77);
    }
  });
}

TEST(StreamMpi, ReceiveFromARemoteStreamThatEndedFails) {
  ws::World world(options());
  world.run([](ws::TaskStream& ts) {
    if (ts.rank() == 2) {
      int v = 0;
      try {
        ts.recv(ws::host(&v, 1), 1, 0);  // rank 1 (the other process) never sends
        ADD_FAILURE() << "received a message never sent";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), "ended without sending")) << e.what();
      }
    }
  });
}

TEST(StreamMpi, AMessageNobodyReceivesIsReportedWhereItWasSent) {
  ws::World world(options(4096));
  bool threw = false;
  try {
    world.run([](ws::TaskStream& ts) {
      if (ts.rank() == 0) {
        std::vector<char> v(50000, 'y');  // several chunks, drained at the end
        ts.send(ws::host(v.data(), v.size()), 2, 8);
      }
    });
  } catch (const weft::MessageError& e) {
    threw = true;
    EXPECT_TRUE(contains(e.what(), "ended without receiving it")) << e.what();
  }
  EXPECT_EQ(threw, world.process_rank() == 1);
  // The World is clean for the next run.
  world.run([](ws::TaskStream& ts) { ts.barrier(); });
}

TEST(StreamMpi, ProcessesMustAgreeOnTheirStreams) {
  ws::WorldOptions o = options();
  ws::World probe(o);
  o.streams_per_process = probe.process_rank() == 0 ? 2 : 3;
  EXPECT_THROW(ws::World{o}, weft::MessageError);
}

TEST(StreamMpi, SmallHostSendsAreBufferedSoBothMaySendFirst) {
  ws::WorldOptions o = options(64 * 1024);
  o.eager_bytes = 1 << 20;  // above what MPI itself buffers
  ws::World world(o);
  world.run([](ws::TaskStream& ts) {
    const int partner = ts.size() - 1 - ts.rank();  // in the other process
    std::vector<std::int32_t> out = iota_from(ts.rank(), 100000);
    std::vector<std::int32_t> in(100000);
    ts.send(ws::host(out.data(), out.size()), partner, 0);  // both send first
    ts.recv(ws::host(in.data(), in.size()), partner, 0);
    EXPECT_EQ(in, iota_from(partner, 100000));
  });
}

TEST(StreamMpi, ASendMovesOnWhileItsStreamWaitsInABarrier) {
  ws::World world(options(64 * 1024));
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 1 << 18;  // 1 MiB of device memory: staged, chunk by chunk
    ws::DeviceBytes d = ts.allocate(n * sizeof(std::int32_t));
    auto* p = static_cast<std::int32_t*>(d.data());
    if (ts.rank() == 0) {
      const auto v = iota_from(7, n);
      std::copy(v.begin(), v.end(), p);
      ws::Request r = ts.isend(ws::device(p, n), 2, 0);
      ts.barrier();  // rank 2 receives before it reaches the barrier
      r.wait();
    } else if (ts.rank() == 2) {
      ts.recv(ws::device(p, n), 0, 0);
      EXPECT_EQ(std::vector<std::int32_t>(p, p + n), iota_from(7, n));
      ts.barrier();
    } else {
      ts.barrier();
    }
  });
}

TEST(StreamMpi, AFailedBarrierLeavesTheNextRunsBarriersWhole) {
  ws::World world(options());
  bool threw = false;
  try {
    world.run([](ws::TaskStream& ts) {
      if (ts.process_rank() == 0) ts.barrier();  // process 1's streams never come
    });
  } catch (const weft::MessageError& e) {
    threw = true;
    EXPECT_TRUE(contains(e.what(), "ended without reaching barrier 0")) << e.what();
  }
  EXPECT_EQ(threw, world.process_rank() == 0);
  // The failed barrier's arrival is passed over: the next run's barriers match each other.
  expect_barriers_pass(world, 3);
}

// Process 1 destroys its World after one run; process 0 runs three more, each failing with an
// error that names process 1 rather than waiting for it: a barrier, a receive from it, and a
// send to it too large for MPI to buffer. Both Worlds' destructions end, and the next World of
// the two processes works.
TEST(StreamMpi, ARunThatAnotherProcessNeverMakesFailsNamingIt) {
  auto world = std::make_unique<ws::World>(options(4096));
  world->run([](ws::TaskStream& ts) { ts.barrier(); });
  if (world->process_rank() == 1) {
    world.reset();  // waits until process 0 destroys its World too
  } else {
    const std::string gone = "process 1 destroyed its World after 1 run, before run ";
    auto expect_gone = [&](const std::function<void(ws::TaskStream&)>& body, const char* what) {
      try {
        world->run(body);
        ADD_FAILURE() << what << ": the run did not fail";
      } catch (const weft::MessageError& e) {
        EXPECT_TRUE(contains(e.what(), gone)) << what << ": " << e.what();
      }
    };
    expect_gone([](ws::TaskStream& ts) { ts.barrier(); }, "a barrier");
    expect_gone(
        [](ws::TaskStream& ts) {
          int v = 0;
          ts.recv(ws::host(&v, 1), 2 + ts.local_index(), 0);
        },
        "a receive");
    expect_gone(
        [](ws::TaskStream& ts) {
          std::vector<char> v(1 << 20, 'x');  // chunks of 4096 bytes, past MPI's own buffering
          ts.send(ws::host(v.data(), v.size()), 2 + ts.local_index(), 0);
        },
        "a send");
    EXPECT_TRUE(contains(world->errors().front(), gone + "4")) << world->errors().front();
    world.reset();
  }
  ws::World next(options());
  expect_barriers_pass(next);
}

// Runs in a row whose bodies end at once, every other one with a message: a process may start
// the next run while the other is still ending this one (a stress loop; spec/world_close.pml
// checks that the news of the next run is not taken for this one's).
TEST(StreamMpi, ManyShortRunsInARowEachEndCleanly) {
  ws::World world(options());
  for (int run = 0; run < 200; ++run) {
    world.run([&](ws::TaskStream& ts) {
      if (run % 2 == 1 && ts.rank() == 0) ts.send(ws::host(&run, 1), 2, 0);
      if (run % 2 == 1 && ts.rank() == 2) {
        int v = -1;
        ts.recv(ws::host(&v, 1), 0, 0);
        EXPECT_EQ(v, run);
      }
    });
  }
}

// A process that cannot build its part of a World (here: a GPU that is not there) throws its own
// error, and the others one naming it, together; the next World of the two processes works.
TEST(StreamMpi, AWorldThatOneProcessCannotBuildFailsOnEveryProcess) {
  ws::World probe(options());
  const int process = probe.process_rank();
  ws::WorldOptions o = options();
  if (process == 0) {
    o.device = ws::DeviceChoice::Cuda;
    o.gpus = {99};
  }
  try {
    ws::World world(o);
    ADD_FAILURE() << "process " << process << " built a World that process 0 could not";
  } catch (const weft::InvalidState& e) {
    if (process == 1) {
      EXPECT_TRUE(contains(e.what(), "process 0 could not build its part of the World"))
          << e.what();
    }
  } catch (const weft::InvalidArgument& e) {
    EXPECT_EQ(process, 0) << e.what();  // "gpus names GPU 99", where there are GPUs
  }
  expect_barriers_pass(probe);
}

// Both processes leave a staged message of many chunks unreceived, each to the other: each
// takes in the other's while its own goes out chunk by chunk through its pinned slots.
TEST(StreamMpi, StagedMessagesNobodyReceivesAreTakenInBothWays) {
  ws::World world(options(4096));
  bool threw = false;
  try {
    world.run([](ws::TaskStream& ts) {
      if (ts.local_index() != 0) return;
      constexpr std::size_t n = 16 * 4096;  // 16 chunks, more than the pinned slots
      ws::DeviceBytes d = ts.allocate(n);
      std::fill_n(static_cast<char*>(d.data()), n, 'z');
      // Left in flight: the end of the run finishes it.
      [[maybe_unused]] const ws::Request r =
          ts.isend(ws::device(static_cast<char*>(d.data()), n), ts.size() - 2 - ts.rank(), 5);
    });
  } catch (const weft::MessageError& e) {
    threw = true;
    EXPECT_TRUE(contains(e.what(), "ended without receiving it")) << e.what();
  }
  EXPECT_TRUE(threw);
  world.run([](ws::TaskStream& ts) { ts.barrier(); });
}

// Options out of range on one process only: that process throws its range error, the other the
// comparison's naming it, and neither waits for the other; the next World works.
TEST(StreamMpi, OptionsOutOfRangeOnOneProcessFailEveryProcess) {
  ws::World probe(options());
  const int process = probe.process_rank();
  ws::WorldOptions o = options();
  if (process == 0) o.streams_per_process = 0;
  try {
    ws::World world(o);
    ADD_FAILURE() << "process " << process << " built a World with process 0's options";
  } catch (const weft::InvalidArgument& e) {
    EXPECT_EQ(process, 0) << e.what();
    EXPECT_TRUE(contains(e.what(), "streams_per_process must be in 1..1024, not 0")) << e.what();
  } catch (const weft::MessageError& e) {
    EXPECT_NE(process, 0) << e.what();
    EXPECT_TRUE(contains(e.what(), "process 0 has streams_per_process = 0")) << e.what();
  }
  expect_barriers_pass(probe);
}

// A receive already waiting when the news comes that its sender's process destroyed its World
// (after one run fewer) fails then, naming that process.
TEST(StreamMpi, AReceiveWaitingWhenItsSendersProcessClosesFails) {
  auto world = std::make_unique<ws::World>(options());
  world->run([](ws::TaskStream& ts) { ts.barrier(); });
  if (world->process_rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // process 0's receive waits
    world.reset();
  } else {
    try {
      world->run([](ws::TaskStream& ts) {
        if (ts.local_index() != 0) return;
        int v = 0;
        ts.recv(ws::host(&v, 1), 2, 0);
      });
      ADD_FAILURE() << "the run did not fail";
    } catch (const weft::MessageError& e) {
      EXPECT_TRUE(contains(e.what(),
                           "rank 0 waits for a message (tag 0) from rank 2, whose "
                           "process 1 destroyed its World after 1 run, before run 2"))
          << e.what();
    }
    world.reset();
  }
  ws::World next(options());
  expect_barriers_pass(next);
}
