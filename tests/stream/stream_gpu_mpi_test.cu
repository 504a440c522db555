// Task streams on GPUs in two processes (run by ctest under `mpirun -np 2`; skipped, reported as
// such, without a GPU): device buffers written by a kernel and sent at once cross to the other
// process over CUDA IPC (from 256 KiB), or through pinned chunks when IPC is off, and arrive
// whole.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "stream_test_support.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
using stream_test::fill_slowly;
using stream_test::gpus;

namespace {

void exchange(bool ipc, ws::Path expected) {
  if (gpus() == 0) GTEST_SKIP() << "SKIPPED: needs a GPU";
  ws::WorldOptions o;
  o.device = ws::DeviceChoice::Cuda;
  o.mpi = ws::MpiUse::On;
  o.cuda_ipc = ipc;
  o.chunk_bytes = 1 << 20;
  ws::World world(o);
  ASSERT_EQ(world.size(), 2) << "run this test under mpirun -np 2";
  world.run([&](ws::TaskStream& ts) {
    for (std::size_t n : {std::size_t{1000}, std::size_t{(3 << 20) + 17}}) {
      ws::DeviceBytes d = ts.allocate(n * sizeof(int));
      auto* p = static_cast<int*>(d.data());
      if (ts.rank() == 0) {
        fill_slowly<<<64, 256, 0, ts.cuda_stream()>>>(p, n, 3);
        ws::Request r = ts.isend(ws::device(p, n), 1, 0);  // ordered after the kernel
        r.wait();
        // Small device messages are staged whatever the option (IPC starts at 256 KiB).
        const ws::Path want = n * sizeof(int) < (256u << 10) ? ws::Path::MpiStaged : expected;
        EXPECT_EQ(r.path(), want) << n << " ints: " << ws::to_string(r.path());
      } else {
        ts.recv(ws::device(p, n), 0, 0);
        std::vector<int> h(n);
        cudaMemcpy(h.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost);
        for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(h[i], 3 + static_cast<int>(i));
        EXPECT_EQ(h[n - 1], 3 + static_cast<int>(n - 1));
      }
    }
  });
}

}  // namespace

TEST(StreamGpuMpi, DeviceBuffersCrossOverCudaIpc) { exchange(true, ws::Path::MpiIpc); }

TEST(StreamGpuMpi, WithoutIpcTheyGoThroughPinnedChunks) { exchange(false, ws::Path::MpiStaged); }
