// Task streams on CUDA GPUs (skipped, reported as such, where none is usable): messages
// between device buffers ordered after the kernels that write them and before those that read
// them, on one GPU, between two (over peer access and through pinned chunks), and shared
// regions under every policy around real kernels.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "stream_test_support.hpp"
#include "weft/stream/world.hpp"

namespace ws = weft::stream;
using stream_test::fill_slowly;
using stream_test::gpus;
using stream_test::iota_from;

namespace {

#define SKIP_WITHOUT_GPUS(n)                                                 \
  do {                                                                       \
    if (gpus() < (n)) GTEST_SKIP() << "SKIPPED: needs " << (n) << " GPU(s)"; \
  } while (0)

__global__ void add(int* data, std::size_t n, int k) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] += k;
  }
}

__global__ void twice_plus_one(const int* in, int* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = in[i] * 2 + 1;
  }
}

std::vector<int> to_host(const int* device, std::size_t n) {
  std::vector<int> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

ws::World cuda_world(std::vector<int> gpus_of_streams, bool peer = true,
                     std::size_t chunk = 4u << 20) {
  ws::WorldOptions o;
  o.streams_per_process = static_cast<int>(gpus_of_streams.size());
  o.gpus = std::move(gpus_of_streams);
  o.device = ws::DeviceChoice::Cuda;
  o.mpi = ws::MpiUse::Off;
  o.peer_access = peer;
  o.chunk_bytes = chunk;
  return ws::World(o);
}

// Rank 0 fills a device buffer with a slow kernel and sends it at once; rank 1 receives it and
// adds one on its GPU. Returns what rank 1 ends with, and the path of its receive.
void kernel_send_kernel(ws::World& world, std::size_t n, ws::Path expected) {
  world.run([&](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(n * sizeof(int));
    auto* p = static_cast<int*>(d.data());
    if (ts.rank() == 0) {
      fill_slowly<<<64, 256, 0, ts.cuda_stream()>>>(p, n, 7);
      ts.send(ws::device(p, n), 1, 0);  // no synchronize: the send is ordered after the kernel
    } else {
      ws::Request r = ts.irecv(ws::device(p, n), 0, 0);
      r.wait();
      EXPECT_EQ(r.path(), expected) << ws::to_string(r.path());
      add<<<64, 256, 0, ts.cuda_stream()>>>(p, n, 1);
      ts.synchronize();
      EXPECT_EQ(to_host(p, n), iota_from(8, n));
    }
  });
}

}  // namespace

TEST(StreamGpu, OneGpuTwoStreamsCopyOnTheDevice) {
  SKIP_WITHOUT_GPUS(1);
  ws::World world = cuda_world({0, 0});
  kernel_send_kernel(world, 1 << 20, ws::Path::DeviceCopy);
}

TEST(StreamGpu, TwoGpusCopyOverPeerAccess) {
  SKIP_WITHOUT_GPUS(2);
  ws::World world = cuda_world({0, 1});
  kernel_send_kernel(world, 1 << 20, ws::Path::PeerCopy);
}

TEST(StreamGpu, TwoGpusWithoutPeerAccessGoThroughPinnedChunks) {
  SKIP_WITHOUT_GPUS(2);
  ws::World world = cuda_world({0, 1}, /*peer=*/false, /*chunk=*/256 * 1024);
  kernel_send_kernel(world, (3 << 20) + 100, ws::Path::StagedCopy);
}

TEST(StreamGpu, HostAndDeviceBuffersMeetInEitherDirection) {
  SKIP_WITHOUT_GPUS(1);
  ws::World world = cuda_world({0, 0});
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 100000;
    ws::DeviceBytes d = ts.allocate(n * sizeof(int));
    auto* p = static_cast<int*>(d.data());
    if (ts.rank() == 0) {
      const auto v = iota_from(3, n);
      ts.send(ws::host(v.data(), n), 1, 0);
      fill_slowly<<<64, 256, 0, ts.cuda_stream()>>>(p, n, 11);
      ts.send(ws::device(p, n), 1, 1);
    } else {
      ts.recv(ws::device(p, n), 0, 0);
      EXPECT_EQ(to_host(p, n), iota_from(3, n));
      std::vector<int> h(n);
      ts.recv(ws::host(h.data(), n), 0, 1);
      EXPECT_EQ(h, iota_from(11, n));
      EXPECT_EQ(ts.transfers().of(ws::Path::HostToDevice), 1u);
      EXPECT_EQ(ts.transfers().of(ws::Path::DeviceToHost), 1u);
    }
  });
}

TEST(StreamGpu, BroadcastAndAllreduceOfDeviceBuffers) {
  SKIP_WITHOUT_GPUS(1);
  const int g = gpus();
  ws::World world = cuda_world({0, g > 1 ? 1 : 0, 0, g > 1 ? 1 : 0});
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 1 << 18;
    ws::DeviceBytes d = ts.allocate(n * sizeof(int));
    auto* p = static_cast<int*>(d.data());
    if (ts.rank() == 2) fill_slowly<<<64, 256, 0, ts.cuda_stream()>>>(p, n, 5);
    ts.bcast(ws::device(p, n), 2);
    EXPECT_EQ(to_host(p, n), iota_from(5, n));
    ws::DeviceBytes s = ts.allocate(sizeof(double));
    const double mine = ts.rank() + 0.5;
    cudaMemcpy(s.data(), &mine, sizeof(double), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();  // a copy from pageable memory may still be landing on return
    ts.allreduce_sum(static_cast<double*>(s.data()), 1, ws::Memory::Device);
    double sum = 0;
    cudaMemcpy(&sum, s.data(), sizeof(double), cudaMemcpyDeviceToHost);
    EXPECT_DOUBLE_EQ(sum, 8.0);
  });
}

TEST(StreamGpu, RegionsUnderEveryPolicyAroundRealKernels) {
  SKIP_WITHOUT_GPUS(1);
  for (ws::Policy policy :
       {ws::Policy::Simple, ws::Policy::ImprovedSimple, ws::Policy::ReadWrite, ws::Policy::Async}) {
    ws::World world = cuda_world({0});
    world.run([&](ws::TaskStream& ts) {
      constexpr std::size_t n = 1 << 20;
      auto a = ts.region<int>(n, policy);
      auto b = ts.region<int>(n, policy);
      {
        auto h = a.host(ws::Access::Write);
        std::iota(h.begin(), h.end(), 0);
      }
      for (int step = 0; step < 4; ++step) {
        ts.launch({ws::reads(a), ws::writes(b)}, [&](const ws::Launch& l) {
          twice_plus_one<<<256, 256, 0, l.stream>>>(a.device_data(), b.device_data(), n);
        });
        ts.launch({ws::updates(b)}, [&](const ws::Launch& l) {
          add<<<256, 256, 0, l.stream>>>(b.device_data(), n, -1);
        });
        {
          auto hb = b.host(ws::Access::Read);
          auto ha = a.host(ws::Access::Write);
          for (std::size_t i = 0; i < n; ++i) ha[i] = hb[i] + 1;  // a <- 2a + 1
        }
      }
      auto h = a.host(ws::Access::Read);
      // a[i] <- 2 a[i] + 1, four times: 16 i + 15.
      for (std::size_t i = 0; i < n; i += 4099) {
        ASSERT_EQ(h[i], 16 * static_cast<int>(i) + 15) << ws::to_string(policy) << " at " << i;
      }
    });
  }
}

TEST(StreamGpu, AMessageOfARegionsDeviceBytesFollowsTheAsyncCopyIn) {
  SKIP_WITHOUT_GPUS(1);
  ws::World world = cuda_world({0, 0});
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 1 << 24;  // long enough a copy in for a message to overtake it
    if (ts.rank() == 0) {
      auto a = ts.region<int>(n, ws::Policy::Async);
      {
        auto h = a.host(ws::Access::Write);
        std::iota(h.begin(), h.end(), 9);
      }  // the copy in starts here, on the stream's transfer queue
      ts.send(ws::device(a.device_data(), n), 1, 0);
    } else {
      ws::DeviceBytes d = ts.allocate(n * sizeof(int));
      auto* p = static_cast<int*>(d.data());
      ts.recv(ws::device(p, n), 0, 0);
      EXPECT_EQ(to_host(p, n), iota_from(9, n));
    }
  });
}
