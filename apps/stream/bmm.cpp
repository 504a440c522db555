// Block matrix multiply on task streams (stream_apps.hpp).
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "stream_apps.hpp"
#include "stream_kernels.hpp"

namespace apps::stream {

namespace ws = weft::stream;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check_shape(std::size_t n, int blocks, int ranks) {
  if (blocks < 1 || n % static_cast<std::size_t>(blocks) != 0 ||
      n % static_cast<std::size_t>(ranks) != 0) {
    throw std::invalid_argument("bmm: n = " + std::to_string(n) + " must divide into " +
                                std::to_string(blocks) + " column blocks and " +
                                std::to_string(ranks) + " ranks' rows");
  }
}

}  // namespace

BmmInputs make_bmm_inputs(std::size_t n, int column_blocks, std::uint32_t seed) {
  check_shape(n, column_blocks, 1);
  BmmInputs in;
  in.n = n;
  in.column_blocks = column_blocks;
  const std::size_t width = n / static_cast<std::size_t>(column_blocks);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  in.a.resize(n * n);
  for (float& x : in.a) x = u(rng);
  in.b.assign(static_cast<std::size_t>(column_blocks), std::vector<float>(n * width));
  in.c.assign(static_cast<std::size_t>(column_blocks), std::vector<float>(n * width));
  for (auto& block : in.b) {
    for (float& x : block) x = u(rng);
  }
  return in;
}

double bmm_error(const BmmInputs& in) {
  const std::size_t n = in.n;
  const std::size_t width = n / static_cast<std::size_t>(in.column_blocks);
  std::mt19937 rng(7);
  double worst = 0;
  for (int probe = 0; probe < 64; ++probe) {
    const std::size_t i = rng() % n;
    const std::size_t j = rng() % n;
    const std::size_t block = j / width;
    const std::size_t col = j % width;
    double exact = 0;
    double scale = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double term = static_cast<double>(in.a[i * n + k]) * in.b[block][k * width + col];
      exact += term;
      scale += std::abs(term);
    }
    const double got = in.c[block][i * width + col];
    worst = std::max(worst, std::abs(got - exact) / std::max(scale, 1e-30));
  }
  return worst;
}

double run_bmm(ws::World& world, BmmInputs& in, ws::Policy policy) {
  const std::size_t n = in.n;
  const int blocks = in.column_blocks;
  check_shape(n, blocks, world.size());
  const std::size_t width = n / static_cast<std::size_t>(blocks);
  double seconds = 0;
  world.run([&](ws::TaskStream& ts) {
    const int ranks = ts.size();
    const std::size_t rows = n / static_cast<std::size_t>(ranks);
    const bool root = ts.rank() == 0;
    auto a = ts.region<float>(rows * n, policy);
    std::vector<ws::Region<float>> b;
    std::vector<ws::Region<float>> c;
    for (int j = 0; j < blocks; ++j) {
      b.push_back(ts.region<float>(n * width, policy));
      c.push_back(ts.region<float>(rows * width, policy));
    }
    // Rank 0 starts with its rows of A and all of B in its regions, as a program that read
    // them in would.
    if (root) {
      {
        auto h = a.host(ws::Access::Write);
        std::memcpy(h.data(), in.a.data(), rows * n * sizeof(float));
      }
      for (int j = 0; j < blocks; ++j) {
        auto h = b[static_cast<std::size_t>(j)].host(ws::Access::Write);
        std::memcpy(h.data(), in.b[static_cast<std::size_t>(j)].data(), n * width * sizeof(float));
      }
    }
    ts.synchronize();
    ts.barrier();
    const double t0 = now();
    // Each rank its rows of A, and every rank all of B.
    if (root) {
      std::vector<ws::Request> sends;
      for (int r = 1; r < ranks; ++r) {
        sends.push_back(ts.isend(
            ws::host(in.a.data() + static_cast<std::size_t>(r) * rows * n, rows * n), r, 0));
      }
      for (int j = 0; j < blocks; ++j) {
        auto h = b[static_cast<std::size_t>(j)].host(ws::Access::Read);
        for (int r = 1; r < ranks; ++r) ts.send(ws::host(h.data(), h.size()), r, 1 + j);
      }
      for (auto& s : sends) s.wait();
    } else {
      {
        auto h = a.host(ws::Access::Write);
        ts.recv(ws::host(h.data(), h.size()), 0, 0);
      }
      for (int j = 0; j < blocks; ++j) {
        auto h = b[static_cast<std::size_t>(j)].host(ws::Access::Write);
        ts.recv(ws::host(h.data(), h.size()), 0, 1 + j);
      }
    }
    // One kernel per column block of C.
    for (int j = 0; j < blocks; ++j) {
      const auto& bj = b[static_cast<std::size_t>(j)];
      const auto& cj = c[static_cast<std::size_t>(j)];
      ts.launch({ws::reads(a), ws::reads(bj), ws::writes(cj)}, [&](const ws::Launch& l) {
        if (l.on_host) {
          kernels::sgemm_host(a.device_data(), bj.device_data(), cj.device_data(),
                              static_cast<int>(rows), static_cast<int>(n), static_cast<int>(width));
        } else {
          kernels::sgemm_cuda(l.stream, a.device_data(), bj.device_data(), cj.device_data(),
                              static_cast<int>(rows), static_cast<int>(n), static_cast<int>(width));
        }
      });
    }
    // Rank 0 gathers the rows of C.
    if (root) {
      std::vector<ws::Request> recvs;
      for (int r = 1; r < ranks; ++r) {
        for (int j = 0; j < blocks; ++j) {
          float* at =
              in.c[static_cast<std::size_t>(j)].data() + static_cast<std::size_t>(r) * rows * width;
          recvs.push_back(ts.irecv(ws::host(at, rows * width), r, 100 + j));
        }
      }
      for (int j = 0; j < blocks; ++j) (void)c[static_cast<std::size_t>(j)].host(ws::Access::Read);
      for (auto& r : recvs) r.wait();
      seconds = now() - t0;
      for (int j = 0; j < blocks; ++j) {
        auto h = c[static_cast<std::size_t>(j)].host(ws::Access::Read);
        std::memcpy(in.c[static_cast<std::size_t>(j)].data(), h.data(),
                    rows * width * sizeof(float));
      }
    } else {
      for (int j = 0; j < blocks; ++j) {
        auto h = c[static_cast<std::size_t>(j)].host(ws::Access::Read);
        ts.send(ws::host(h.data(), h.size()), 0, 100 + j);
      }
    }
  });
  return seconds;
}

}  // namespace apps::stream
