// A device task that traps kills the resident kernel (and, CUDA being what it is, the
// process's context on that GPU): its own process (ctest runs each test alone). Every waiter
// must learn what happened; nothing may hang; every task is delivered exactly once.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace weft::gpu {
namespace {

struct Trap {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t unused;
  };
  WEFT_HD static void run(Payload&, const BlockContext&) {
#if defined(__CUDA_ARCH__)
    __trap();
#endif
  }
};
struct Nop {
  static constexpr std::uint32_t kId = 2;
  struct Payload {
    std::uint64_t unused;
  };
  WEFT_HD static void run(Payload&, const BlockContext&) {}
};
using Types = TaskTypes<Trap, Nop>;
using FaultPool = Pool<Types, 8>;

TEST(GpuPoolFault, ATrappingTaskFailsEveryWaiterWithTheCause) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    GTEST_SKIP() << "no usable GPU on this machine";
  }
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 8>();
  o.devices = {0};
  std::size_t ok = 0, failed = 0, cancelled = 0;
  {
    FaultPool pool(o);
    pool.push<Nop>({0});
    ASSERT_TRUE(pool.pop().ok());
    pool.push<Trap>({0});
    std::vector<FaultPool::Record> many(10'000, FaultPool::Record::make<Nop>({0}));
    pool.push_batch(many);
    for (std::size_t k = 0; k < 1 + many.size(); ++k) {
      const auto r = pool.pop();  // each task comes back once, whatever happened
      if (r.status == TaskStatus::ok) {
        ++ok;
      } else if (r.status == TaskStatus::device_failed) {
        ++failed;
      } else if (r.status == TaskStatus::cancelled) {
        ++cancelled;
      }
    }
    EXPECT_EQ(ok + failed + cancelled, 1 + many.size());
    EXPECT_GE(failed, 1u) << "the trapping task itself";
    // Nothing more can come: the next pop names the cause instead of waiting forever.
    try {
      (void)pool.pop();
      ADD_FAILURE() << "pop after the failure returned";
    } catch (const ShutDown& e) {
      EXPECT_NE(std::string(e.what()).find("resident kernel"), std::string::npos) << e.what();
    }
    EXPECT_THROW(pool.push<Nop>({0}), ShutDown);
  }  // destroying a failed pool does not hang
  std::printf("ok %zu, device_failed %zu, cancelled %zu\n", ok, failed, cancelled);
}

}  // namespace
}  // namespace weft::gpu
