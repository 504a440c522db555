// Particle-particle N-body on task streams, and on the CPU executor (stream_apps.hpp).
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include <weft/cpu/parallel.hpp>

#include "stream_apps.hpp"
#include "stream_kernels.hpp"

namespace apps::stream {

namespace ws = weft::stream;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Bodies make_bodies(std::size_t count, std::uint32_t seed) {
  Bodies b;
  b.pos.resize(4 * count);
  b.vel.assign(4 * count, 0.0F);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  for (std::size_t i = 0; i < count; ++i) {
    b.pos[4 * i] = u(rng);
    b.pos[4 * i + 1] = u(rng);
    b.pos[4 * i + 2] = u(rng);
    b.pos[4 * i + 3] = 1.0F / static_cast<float>(count);  // total mass 1
    b.vel[4 * i] = 0.1F * u(rng);
    b.vel[4 * i + 1] = 0.1F * u(rng);
    b.vel[4 * i + 2] = 0.1F * u(rng);
  }
  return b;
}

double nbody_checksum(const Bodies& b) {
  double sum = 0;
  for (std::size_t i = 0; i + 3 < b.pos.size(); i += 4) {
    sum += std::sqrt(double(b.pos[i]) * b.pos[i] + double(b.pos[i + 1]) * b.pos[i + 1] +
                     double(b.pos[i + 2]) * b.pos[i + 2]);
  }
  return sum;
}

double run_nbody(ws::World& world, Bodies& bodies, const NbodyOptions& o) {
  const std::size_t n = bodies.pos.size() / 4;
  if (n % static_cast<std::size_t>(world.size()) != 0) {
    throw std::invalid_argument("nbody: " + std::to_string(n) + " bodies do not divide among " +
                                std::to_string(world.size()) + " ranks");
  }
  double seconds = 0;
  world.run([&](ws::TaskStream& ts) {
    const std::size_t mine = n / static_cast<std::size_t>(ts.size());
    const std::size_t first = mine * static_cast<std::size_t>(ts.rank());
    // Every body's position, this rank's velocities, and its bodies' next positions.
    auto pos = ts.region<float>(4 * n, ws::Policy::ReadWrite);
    auto vel = ts.region<float>(4 * mine, ws::Policy::ReadWrite);
    auto next = ts.region<float>(4 * mine, ws::Policy::ReadWrite);
    {
      auto h = pos.host(ws::Access::Write);
      std::memcpy(h.data(), bodies.pos.data(), 4 * n * sizeof(float));
    }
    {
      auto h = vel.host(ws::Access::Write);
      std::memcpy(h.data(), bodies.vel.data() + 4 * first, 4 * mine * sizeof(float));
    }
    ts.barrier();
    const double t0 = now();
    for (int step = 0; step < o.steps; ++step) {
      ts.launch({ws::updates(pos), ws::updates(vel), ws::writes(next)}, [&](const ws::Launch& l) {
        float* p = pos.device_data();
        if (l.on_host) {
          kernels::nbody_step_host(p, n, first, mine, vel.device_data(), next.device_data(), o.dt,
                                   o.softening);
          std::memcpy(p + 4 * first, next.device_data(), 4 * mine * sizeof(float));
        } else {
          kernels::nbody_step_cuda(l.stream, p, n, first, mine, vel.device_data(),
                                   next.device_data(), o.dt, o.softening);
          kernels::copy_cuda(l.stream, p + 4 * first, next.device_data(), 4 * mine * sizeof(float));
        }
      });
      // Each rank's block of moved bodies from its owner to every other rank.
      float* p = pos.device_data();
      for (int owner = 0; owner < ts.size(); ++owner) {
        ts.bcast(ws::device(p + 4 * mine * static_cast<std::size_t>(owner), 4 * mine), owner);
      }
    }
    ts.synchronize();
    ts.barrier();
    if (ts.rank() == 0) seconds = now() - t0;
    // Every rank's final state back into `bodies` (rank 0's copy of the positions is whole).
    if (ts.rank() == 0) {
      auto h = pos.host(ws::Access::Read);
      std::memcpy(bodies.pos.data(), h.data(), 4 * n * sizeof(float));
    }
  });
  return seconds;
}

double run_nbody_cpu(weft::cpu::Executor& executor, Bodies& bodies, const NbodyOptions& o) {
  const std::size_t n = bodies.pos.size() / 4;
  std::vector<float> next(4 * n);
  const double t0 = now();
  for (int step = 0; step < o.steps; ++step) {
    constexpr std::int64_t kGrain = 64;
    const auto chunks = static_cast<std::int64_t>((n + kGrain - 1) / kGrain);
    weft::cpu::parallel_for(executor, 0, chunks, [&](std::int64_t c) {
      const std::size_t first = static_cast<std::size_t>(c) * kGrain;
      const std::size_t count = std::min<std::size_t>(kGrain, n - first);
      kernels::nbody_step_host(bodies.pos.data(), n, first, count, bodies.vel.data() + 4 * first,
                               next.data() + 4 * first, o.dt, o.softening);
    });
    bodies.pos.swap(next);
  }
  return now() - t0;
}

}  // namespace apps::stream
