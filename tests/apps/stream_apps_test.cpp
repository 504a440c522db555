// Seed 001's applications on task streams (apps/stream/) on the host device: block matrix
// multiply gives the product under every coherence policy, on one rank and on several; N-body
// moves the bodies as the CPU executor does, on any number of ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "stream_apps.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
namespace as = apps::stream;

namespace {

ws::World world_of(int streams, ws::DeviceChoice device) {
  ws::WorldOptions o;
  o.streams_per_process = streams;
  o.device = device;
  o.mpi = ws::MpiUse::Off;
  return ws::World(o);
}

ws::World host_world(int streams) { return world_of(streams, ws::DeviceChoice::Host); }

}  // namespace

TEST(StreamBmm, ComputesTheProductUnderEveryPolicy) {
  for (int ranks : {1, 2, 4}) {
    ws::World world = host_world(ranks);
    for (ws::Policy p : {ws::Policy::Simple, ws::Policy::ImprovedSimple, ws::Policy::ReadWrite,
                         ws::Policy::Async}) {
      as::BmmInputs in = as::make_bmm_inputs(64, 4, 11);
      as::run_bmm(world, in, p);
      EXPECT_LT(as::bmm_error(in), 1e-5) << ws::to_string(p) << " on " << ranks << " ranks";
    }
  }
}

TEST(StreamBmm, RejectsShapesThatDoNotDivide) {
  ws::World world = host_world(3);
  as::BmmInputs in = as::make_bmm_inputs(64, 4, 11);
  EXPECT_THROW(as::run_bmm(world, in, ws::Policy::ReadWrite), std::invalid_argument);
}

TEST(StreamNbody, MovesBodiesAsTheCpuExecutorDoes) {
  as::NbodyOptions o;
  o.steps = 4;
  as::Bodies reference = as::make_bodies(256, 5);
  weft::cpu::ExecutorOptions eo;
  eo.workers = 2;
  weft::cpu::Executor executor(eo);
  as::run_nbody_cpu(executor, reference, o);
  for (int ranks : {1, 2, 4}) {
    ws::World world = host_world(ranks);
    as::Bodies bodies = as::make_bodies(256, 5);
    as::run_nbody(world, bodies, o);
    double worst = 0;
    for (std::size_t i = 0; i < bodies.pos.size(); ++i) {
      worst = std::max(worst, double(std::abs(bodies.pos[i] - reference.pos[i])));
    }
    EXPECT_LT(worst, 1e-5) << ranks << " ranks";
    EXPECT_NE(as::nbody_checksum(bodies), as::nbody_checksum(as::make_bodies(256, 5)));
  }
}

// The same on CUDA GPUs (skipped, reported as such, where none is usable): cuBLAS and the
// N-body kernels against the host's results.
namespace {

ws::World cuda_world(int streams) { return world_of(streams, ws::DeviceChoice::Cuda); }

bool have_gpu() {
  try {
    cuda_world(1);
    return true;
  } catch (const weft::InvalidState&) {
    return false;
  }
}

}  // namespace

TEST(StreamAppsGpu, BmmUnderEveryPolicy) {
  if (!have_gpu()) GTEST_SKIP() << "SKIPPED: needs a GPU";
  ws::World world = cuda_world(2);
  for (ws::Policy p :
       {ws::Policy::Simple, ws::Policy::ImprovedSimple, ws::Policy::ReadWrite, ws::Policy::Async}) {
    as::BmmInputs in = as::make_bmm_inputs(256, 4, 13);
    as::run_bmm(world, in, p);
    EXPECT_LT(as::bmm_error(in), 1e-4) << ws::to_string(p);
  }
}

TEST(StreamAppsGpu, NbodyMatchesTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "SKIPPED: needs a GPU";
  as::NbodyOptions o;
  o.steps = 3;
  as::Bodies reference = as::make_bodies(4096, 5);
  weft::cpu::ExecutorOptions eo;
  eo.workers = 2;
  weft::cpu::Executor executor(eo);
  as::run_nbody_cpu(executor, reference, o);
  for (int ranks : {1, 2}) {
    ws::World world = cuda_world(ranks);
    as::Bodies bodies = as::make_bodies(4096, 5);
    as::run_nbody(world, bodies, o);
    double worst = 0;
    for (std::size_t i = 0; i < bodies.pos.size(); ++i) {
      worst = std::max(worst, double(std::abs(bodies.pos[i] - reference.pos[i])));
    }
    EXPECT_LT(worst, 1e-4) << ranks << " ranks";
  }
}
