// The empty task and the pool type the latency and lane probes share (header-only, so each
// probe still builds with the one nvcc line in its header).
#pragma once

#include <chrono>
#include <cstdint>

#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

using namespace weft::gpu;
struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;
  };
  WEFT_HD static void run(Payload&, const BlockContext&) {}
};
using Types = TaskTypes<Empty>;
using P = Pool<Types, 16>;

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
