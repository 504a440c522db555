// The GPU pool on the device backend: the resident kernel, the slot protocol across PCIe, and
// several GPUs as one pool. Each test skips (never passes) where no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <cuda/atomic>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace weft::gpu {
namespace {

int usable_gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
#define REQUIRE_GPU()                                                        \
  do {                                                                       \
    if (usable_gpus() == 0) GTEST_SKIP() << "no usable GPU on this machine"; \
  } while (0)

struct Double {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint32_t x;
    std::uint32_t result;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    if (b.thread() == 0) p.result = 2 * p.x;
  }
};
struct Saxpy {
  static constexpr std::uint32_t kId = 2;
  struct Payload {
    float a;
    int n;
    const float* x;
    float* y;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    for (int i = b.thread(); i < p.n; i += b.threads()) p.y[i] += p.a * p.x[i];
  }
};
struct WhereAmI {  // reports the resident block that ran it and when, after spinning spin_ns
  static constexpr std::uint32_t kId = 3;
  struct Payload {
    int block;
    int threads;
    unsigned long long spin_ns;
    unsigned long long started;  // the GPU's global timer, ns
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    if (b.thread() == 0) {
      p.block = b.block();
      p.threads = b.threads();
#if defined(__CUDA_ARCH__)
      const unsigned long long t0 = weft::gpu::detail::global_ns();
      p.started = t0;
      while (weft::gpu::detail::global_ns() - t0 < p.spin_ns) __nanosleep(500);
#endif
    }
  }
};
struct BlockSum {  // uses the block's shared memory and barriers
  static constexpr std::uint32_t kId = 4;
  static constexpr std::size_t kSharedBytes = 1024 * sizeof(int);
  struct Payload {
    int n;
    long long sum;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    int* partial = static_cast<int*>(b.shared());
    int mine = 0;
    for (int i = b.thread(); i < p.n; i += b.threads()) mine += i;
    partial[b.thread()] = mine;
    b.sync();
    if (b.thread() == 0) {
      long long s = 0;
      for (int t = 0; t < b.threads(); ++t) s += partial[t];
      p.sum = s;
    }
  }
};

struct WaitForHost {  // spins until a word in host-mapped memory is non-zero: a stuck task
  static constexpr std::uint32_t kId = 5;
  struct Payload {
    const volatile int* flag;  // device address of pinned, mapped host memory
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
#if defined(__CUDA_ARCH__)
    if (b.thread() == 0) {
      while (*p.flag == 0) __nanosleep(1000);
    }
#else
    (void)p;
    (void)b;
#endif
  }
};

struct GatedWhere {  // reports the resident block that ran it, once a host-mapped word is set
  static constexpr std::uint32_t kId = 6;
  struct Payload {
    const volatile int* gate;  // device address of pinned, mapped host memory
    int block;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    if (b.thread() == 0) {
      p.block = b.block();
#if defined(__CUDA_ARCH__)
      while (*p.gate == 0) __nanosleep(2000);
#endif
    }
  }
};

struct WriteHost {  // the last task thread writes `value` to host memory, then the result
  static constexpr std::uint32_t kId = 7;
  struct Payload {
    volatile int* where;  // device address of pinned, mapped host memory
    int value;
    int result;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    if (b.thread() == b.threads() - 1) {
      *p.where = p.value;
      p.result = p.value;
    }
  }
};

// Reports the SM and block that ran it, after its threads worked work_ns. With `started`, it
// first counts itself there and holds its block until `hold_for` tasks have (or 2 s passed).
struct OnWhichSm {
  static constexpr std::uint32_t kId = 8;
  struct Payload {
    unsigned long long work_ns;
    unsigned sm;
    int block = -1;
    unsigned* started = nullptr;  // device memory
    unsigned hold_for = 0;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
#if defined(__CUDA_ARCH__)
    if (p.started != nullptr && b.thread() == 0) {
      atomicAdd(p.started, 1u);
      const unsigned long long held = weft::gpu::detail::global_ns();
      while (atomicAdd(p.started, 0u) < p.hold_for &&
             weft::gpu::detail::global_ns() - held < 2'000'000'000ull) {
        __nanosleep(1000);
      }
    }
    b.sync();
    const unsigned long long t0 = weft::gpu::detail::global_ns();
    float x = 1.0f + static_cast<float>(b.thread()) * 1e-7f;
    while (weft::gpu::detail::global_ns() - t0 < p.work_ns) {
      for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 1e-7f);
    }
    if (x == 12345.0f) p.work_ns = 0;  // keeps the arithmetic; never true
    if (b.thread() == 0) asm volatile("mov.u32 %0, %%smid;" : "=r"(p.sm));
#else
    p.sm = 0;
#endif
    if (b.thread() == 0) p.block = b.block();
  }
};

// A task of a graph: stamps cells[me] with 1 + the largest stamp of its inputs, read from
// device memory, or 0 when an input has not stamped yet (it ran too early).
struct Stamp {
  static constexpr std::uint32_t kId = 9;
  struct Payload {
    unsigned* cells;
    std::uint32_t me;
    std::uint32_t inputs;
    std::uint32_t in[8];
    std::uint32_t value;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
#if defined(__CUDA_ARCH__)
    if (b.thread() != 0) return;
    unsigned v = 1;
    for (std::uint32_t i = 0; i < p.inputs; ++i) {
      const unsigned x = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(p.cells[p.in[i]])
                             .load(cuda::memory_order_relaxed);
      v = x == 0 || v == 0 ? 0 : (x + 1 > v ? x + 1 : v);
    }
    cuda::atomic_ref<unsigned, cuda::thread_scope_device>(p.cells[p.me])
        .store(v, cuda::memory_order_relaxed);
    p.value = v;
#else
    (void)p;
    (void)b;
#endif
  }
};

using Types = TaskTypes<Double, Saxpy, WhereAmI, BlockSum, WaitForHost, GatedWhere, WriteHost,
                        OnWhichSm, Stamp>;
constexpr std::size_t kCap = 64;
using GpuPool = Pool<Types, kCap>;

// The device backend's defaults: no graph table, so the resident kernel without the graph
// code, the one most pools run.
PoolOptions device_options(std::size_t queues = 1) {
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, kCap>();
  o.output_queues = queues;
  return o;
}

// A pool that runs graphs (opt-in on the device backend): a table on GPU 0 alone, so the
// kernel with the graph code, also on a machine with several GPUs.
PoolOptions graph_options(std::size_t capacity = 1024) {
  PoolOptions o = device_options();
  o.graph_capacity = capacity;
  o.devices = {0};
  return o;
}

TEST(GpuPool, ConstructionWithoutAGpuFailsClearly) {
  if (usable_gpus() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  EXPECT_THROW(GpuPool{device_options()}, Error);
}

TEST(GpuPool, RunsATaskOnTheGpu) {
  REQUIRE_GPU();
  GpuPool pool(device_options());
  pool.push<Double>({21, 0}, 0, 5);
  const auto r = pool.pop(0);
  ASSERT_TRUE(r.ok()) << to_string(r.status);
  EXPECT_EQ(r.tag, 5u);
  EXPECT_EQ(r.as<Double>().result, 42u);
}

// The mailbox (docs/gpu.md "The mailbox"): lone tasks run in the last block, whose index is
// num_blocks(), with the block's task threads; what a body writes to host memory is visible
// to the consumer that collected the task (result word 0's release, the collector's acquire).
TEST(GpuPool, TheMailboxRunsLoneTasksAndPublishesWhatTheyWrote) {
  REQUIRE_GPU();
  int* word = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&word), sizeof(int), cudaHostAllocMapped),
            cudaSuccess);
  struct FreeHost {
    void operator()(int* p) const { cudaFreeHost(p); }
  };
  const std::unique_ptr<int, FreeHost> word_owner(word);
  *word = -1;
  int* device_word = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_word), word, 0), cudaSuccess);
  {
    GpuPool pool(device_options());
    pool.push<WhereAmI>({-1, 0, 0});
    const auto where = pool.pop().as<WhereAmI>();
    EXPECT_EQ(static_cast<std::size_t>(where.block), pool.num_blocks());
    EXPECT_EQ(where.threads, 128);
    int stale = 0;
    for (int k = 0; k < 2000; ++k) {
      pool.push<WriteHost>({device_word, k, -1});
      const auto r = pool.pop();
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r.as<WriteHost>().result, k);
      if (std::atomic_ref<int>(*word).load(std::memory_order_relaxed) != k) ++stale;
    }
    EXPECT_EQ(stale, 0) << "results came back before the body's own write was visible";
    const PoolStats st = pool.stats();
    std::printf("mailbox tasks %llu of 2001, collected by the consumer %llu\n",
                static_cast<unsigned long long>(st.mailbox_tasks),
                static_cast<unsigned long long>(st.mailbox_taken));
    // Each push found the mailbox free. (How many the consumer collected itself depends on
    // timing: under compute-sanitizer a task outlasts the consumer's spin and a lane delivers
    // it.)
    EXPECT_EQ(st.mailbox_tasks, 2001u);
  }
  GpuPool off([] {
    PoolOptions o = device_options();
    o.mailbox = false;
    return o;
  }());
  off.push<Double>({4, 0});
  EXPECT_EQ(off.pop().as<Double>().result, 8u);
  EXPECT_EQ(off.stats().mailbox_tasks, 0u);
}

TEST(GpuPool, DeliversAMillionTasksExactlyOnceFromEightPushers) {
  REQUIRE_GPU();
  constexpr std::size_t kQueues = 4;
  constexpr int kPushers = 8;
  constexpr std::uint32_t kPer = 125000;
  GpuPool pool(device_options(kQueues));
  const std::uint64_t total = std::uint64_t{kPer} * kPushers;
  std::vector<std::atomic<std::uint8_t>> seen(total);
  std::atomic<std::uint64_t> wrong{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      std::vector<GpuPool::Record> batch;
      for (std::uint32_t k = 0; k < kPer; ++k) {
        const std::uint64_t tag = std::uint64_t{kPer} * p + k;
        pool.push<Double>({static_cast<std::uint32_t>(tag), 0}, tag % kQueues, tag);
      }
    });
  }
  for (std::size_t q = 0; q < kQueues; ++q) {
    threads.emplace_back([&, q] {
      std::vector<GpuPool::Record> got(256);
      try {
        for (;;) {
          const std::size_t n = pool.pop_batch(got, q);
          for (std::size_t i = 0; i < n; ++i) {
            const auto& r = got[i];
            if (!r.ok() || r.tag >= total ||
                r.as<Double>().result != 2 * static_cast<std::uint32_t>(r.tag)) {
              wrong.fetch_add(1);
              continue;
            }
            seen[r.tag].fetch_add(1);
          }
        }
      } catch (const ShutDown&) {
      }
    });
  }
  for (int p = 0; p < kPushers; ++p) threads[static_cast<std::size_t>(p)].join();
  pool.no_more_tasks();
  for (std::size_t t = kPushers; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(wrong.load(), 0u);
  for (std::uint64_t t = 0; t < total; ++t) ASSERT_EQ(seen[t].load(), 1) << "tag " << t;
}

// Both resident kernels: with the graph code (a pool with a graph table) and without it.
TEST(GpuPool, EveryRingDepthDeliversExactlyOnceWithItsOwnResults) {
  REQUIRE_GPU();
  for (const std::size_t graphs : {0, 1024}) {
    for (std::size_t depth : {1, 2, 7, 32}) {
      SCOPED_TRACE("graph_capacity " + std::to_string(graphs));
      PoolOptions o = graphs == 0 ? device_options() : graph_options(graphs);
      o.ring_depth = depth;
      o.blocks_per_sm = 1;  // few blocks, a long backlog: rings fill and blocks take runs
      GpuPool pool(o);
      ASSERT_EQ(pool.ring_depth(), depth);
      ASSERT_EQ(pool.graph_capacity(), graphs);
      const std::uint32_t n = 20'000;
      std::vector<GpuPool::Record> batch;
      for (std::uint32_t k = 0; k < n; ++k)
        batch.push_back(GpuPool::Record::make<Double>({k, 0}, k));
      pool.push_batch(batch, 0);
      std::vector<int> seen(n, 0);
      std::size_t wrong = 0;
      std::vector<GpuPool::Record> got(512);
      for (std::uint32_t done = 0; done < n;) {
        const std::size_t k = pool.pop_batch(got, 0);
        for (std::size_t i = 0; i < k; ++i) {
          const auto& r = got[i];
          if (!r.ok() || r.tag >= n || r.as<Double>().result != 2 * r.tag) {
            ++wrong;
            continue;
          }
          ++seen[r.tag];
        }
        done += static_cast<std::uint32_t>(k);
      }
      EXPECT_EQ(wrong, 0u) << "depth " << depth;
      for (std::uint32_t k = 0; k < n; ++k)
        ASSERT_EQ(seen[k], 1) << "depth " << depth << " tag " << k;
    }
  }
}

TEST(GpuPool, TasksComputeOnDeviceMemory) {
  REQUIRE_GPU();
  constexpr int kN = 1 << 16, kTasks = 64;
  std::vector<float> hx(kN), hy(kN);
  for (int i = 0; i < kN; ++i) {
    hx[i] = static_cast<float>(i % 97) * 0.5f;
    hy[i] = static_cast<float>(i % 13);
  }
  float *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, hx.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dy, hy.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  {
    GpuPool pool(device_options());
    const int chunk = kN / kTasks;
    for (int t = 0; t < kTasks; ++t) {
      pool.push<Saxpy>({3.0f, chunk, dx + t * chunk, dy + t * chunk}, 0, t);
    }
    for (int t = 0; t < kTasks; ++t) ASSERT_TRUE(pool.pop(0).ok());
  }
  std::vector<float> out(kN);
  ASSERT_EQ(cudaMemcpy(out.data(), dy, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < kN; ++i) ASSERT_FLOAT_EQ(out[i], hy[i] + 3.0f * hx[i]) << i;
  cudaFree(dx);
  cudaFree(dy);
}

TEST(GpuPool, BlocksUseSharedMemoryAndBarriers) {
  REQUIRE_GPU();
  GpuPool pool(device_options());
  for (int n : {1, 100, 1000, 100000})
    pool.push<BlockSum>({n, 0}, 0, static_cast<std::uint64_t>(n));
  for (int k = 0; k < 4; ++k) {
    const auto r = pool.pop(0);
    ASSERT_TRUE(r.ok());
    const long long n = static_cast<long long>(r.tag);
    EXPECT_EQ(r.as<BlockSum>().sum, n * (n - 1) / 2);
  }
}

// A task type may ask for more dynamic shared memory than the 48 KiB a kernel gets without
// opting in: the pool opts in (up to the device's maximum per block) and derives how many
// blocks fit per SM from it.
template <std::size_t Bytes>
struct WideShared {  // fills Bytes of shared memory with word indexes, then sums them
  static constexpr std::uint32_t kId = 1;
  static constexpr std::size_t kSharedBytes = Bytes;
  struct Payload {
    unsigned long long sum;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
    auto* words = static_cast<std::uint32_t*>(b.shared());
    constexpr std::uint32_t n = Bytes / 4;
    for (std::uint32_t i = b.thread(); i < n; i += b.threads()) words[i] = i;
    b.sync();
    if (b.thread() == 0) {
      unsigned long long sum = 0;
      for (std::uint32_t i = 0; i < n; ++i) sum += words[i];
      p.sum = sum;
    }
  }
};

TEST(GpuPool, TaskTypesMayAskForMoreThan48KiBOfSharedMemory) {
  REQUIRE_GPU();
  constexpr std::size_t kBytes = 96 * 1024;
  using Wide = WideShared<kBytes>;
  using WidePool = Pool<TaskTypes<Wide>, 16>;
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<TaskTypes<Wide>, 16>();
  WidePool pool(o);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  std::printf("pool with %zu KiB of task shared memory: %s\n", kBytes / 1024,
              pool.describe().c_str());
  EXPECT_GE(pool.num_blocks() + 1, static_cast<std::size_t>(sms)) << "at least a block per SM";
  const std::size_t tasks = 4 * static_cast<std::size_t>(sms);
  for (std::size_t k = 0; k < tasks; ++k) pool.push<Wide>({0}, 0, k);
  constexpr unsigned long long n = kBytes / 4;
  for (std::size_t k = 0; k < tasks; ++k) {
    const auto r = pool.pop();
    ASSERT_TRUE(r.ok()) << to_string(r.status);
    EXPECT_EQ(r.as<Wide>().sum, n * (n - 1) / 2) << "task " << r.tag;
  }
}

TEST(GpuPool, SharedMemoryPastTheDevicesLimitIsRefusedNamingIt) {
  REQUIRE_GPU();
  using Huge = WideShared<300 * 1024>;  // past every current GPU's 227-228 KiB per block
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<TaskTypes<Huge>, 16>();
  try {
    Pool<TaskTypes<Huge>, 16> pool(o);
    ADD_FAILURE() << "a pool whose blocks cannot have their shared memory was made";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("allows a block at most"), std::string::npos) << e.what();
  }
}

TEST(GpuPool, UnknownTypesAndWrongSizesComeBackWithAStatus) {
  REQUIRE_GPU();
  GpuPool pool(device_options());
  GpuPool::Record unknown;
  unknown.type = 99;
  unknown.payload_size = 8;
  pool.push_record(unknown);
  auto wrong = GpuPool::Record::make<Double>({1, 0});
  wrong.payload_size = 4;
  pool.push_record(wrong);
  std::set<TaskStatus> got{pool.pop().status, pool.pop().status};
  EXPECT_EQ(got, (std::set<TaskStatus>{TaskStatus::unknown_type, TaskStatus::bad_payload_size}));
}

// Device memory for Stamp tasks, zeroed, allocated before the pool and freed after it (a
// cudaFree waits for the device, which a living pool never lets go).
class Cells {
 public:
  explicit Cells(std::size_t n) {
    EXPECT_EQ(cudaMalloc(&cells_, n * sizeof(unsigned)), cudaSuccess);
    EXPECT_EQ(cudaMemset(cells_, 0, n * sizeof(unsigned)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Cells() { cudaFree(cells_); }
  Cells(const Cells&) = delete;
  Cells& operator=(const Cells&) = delete;
  [[nodiscard]] unsigned* at(std::size_t i) const { return cells_ + i; }

 private:
  unsigned* cells_ = nullptr;
};

// A random acyclic graph of Stamp tasks over `cells` (device memory, zeroed), at most 8 inputs
// each; `expected` gets each task's stamp if it runs after all its inputs.
struct StampGraph {
  std::vector<GpuPool::Record> records;
  std::vector<Edge> edges;
  std::vector<unsigned> expected;
};
StampGraph stamp_graph(std::mt19937& rng, std::uint32_t n, unsigned* cells) {
  StampGraph g;
  std::vector<std::vector<std::uint32_t>> ins(n);
  for (std::uint32_t to = 1; to < n; ++to) {
    for (int e = 0; e < 3; ++e) {
      if (rng() % 2 == 0) ins[to].push_back(static_cast<std::uint32_t>(rng() % to));
    }
  }
  for (std::uint32_t t = 0; t < n; ++t) {
    Stamp::Payload p{cells, t, static_cast<std::uint32_t>(ins[t].size()), {}, 0};
    unsigned v = 1;
    for (std::size_t i = 0; i < ins[t].size(); ++i) {
      p.in[i] = ins[t][i];
      g.edges.push_back({ins[t][i], t});
      v = std::max(v, g.expected[ins[t][i]] + 1);
    }
    g.expected.push_back(v);
    g.records.push_back(GpuPool::Record::make<Stamp>(p, t));
  }
  return g;
}

// Task graphs on the GPU (docs/decisions/017-gpu-device-dependencies.md): the blocks take the
// ready tasks from the table's queue in device memory; every task comes back once, having run
// after all its inputs (its stamp is one more than theirs), graph after graph.
TEST(GpuPool, TaskGraphsRunEachTaskOnceAfterItsInputs) {
  REQUIRE_GPU();
  constexpr int kRounds = 30;
  const Cells cells(1024 * kRounds);  // each round its own
  GpuPool pool(graph_options());
  ASSERT_EQ(pool.graph_capacity(), 1024u);
  std::mt19937 rng(5);
  for (int round = 0; round < kRounds; ++round) {
    const std::uint32_t n = round == 0 ? 1024 : 1 + rng() % 300;
    const StampGraph g = stamp_graph(rng, n, cells.at(1024 * round));
    pool.push_graph(g.records, g.edges);
    std::vector<int> seen(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      const GpuPool::Record r = pool.pop();
      ASSERT_TRUE(r.ok()) << to_string(r.status);
      ASSERT_LT(r.tag, n);
      ++seen[r.tag];
      EXPECT_EQ(r.as<Stamp>().value, g.expected[r.tag]) << "task " << r.tag << ", round " << round;
    }
    for (std::uint32_t t = 0; t < n; ++t) ASSERT_EQ(seen[t], 1) << "task " << t;
  }
}

// Prepared shapes pushed again with new records, in turn: a shape still in the table keeps
// its successors there (only the records, counts and poison flags are written again), a
// different one is written whole. Every run's tasks come back once, from that run's records
// (its own tags), having run after all their inputs; a run with a failing task cancels its
// successors, and the same shape's next run, written over it, runs every task.
TEST(GpuPool, PreparedShapesRunAgainInAnyOrder) {
  REQUIRE_GPU();
  const std::vector<int> order{0, 1, 0, 0, 0, 1, 1, 0};
  constexpr std::size_t kFailingRun = 3;  // shape 0, after a run of itself
  const std::uint32_t sizes[2] = {300, 200};
  const Cells cells(512 * order.size());  // each run its own
  GpuPool pool(graph_options());
  std::vector<GraphShape> shapes;
  for (int s = 0; s < 2; ++s) {
    std::mt19937 rng(21 + s);
    shapes.push_back(pool.prepare_graph(sizes[s], stamp_graph(rng, sizes[s], cells.at(0)).edges));
  }
  for (std::size_t run = 0; run < order.size(); ++run) {
    const int s = order[run];
    std::mt19937 rng(21 + s);  // the shape's edges again, over this run's cells
    StampGraph g = stamp_graph(rng, sizes[s], cells.at(512 * run));
    const std::uint64_t base = 1000 * run;
    for (auto& r : g.records) r.tag += base;
    std::uint32_t failing = sizes[s];  // none
    if (run == kFailingRun) {
      failing = g.edges.front().from;  // a task with a successor
      g.records[failing].type = 99;
    }
    pool.push_graph(shapes[s], g.records);
    std::vector<int> seen(sizes[s], 0);
    std::size_t cancelled = 0;
    for (std::uint32_t i = 0; i < sizes[s]; ++i) {
      const GpuPool::Record r = pool.pop();
      ASSERT_GE(r.tag, base) << "a record of an earlier run, run " << run;
      ASSERT_LT(r.tag - base, sizes[s]) << "run " << run;
      const std::uint64_t t = r.tag - base;
      ++seen[t];
      if (t == failing) {
        EXPECT_EQ(r.status, TaskStatus::unknown_type);
      } else if (r.status == TaskStatus::cancelled) {
        ++cancelled;
      } else {
        ASSERT_TRUE(r.ok()) << to_string(r.status);
        EXPECT_EQ(r.as<Stamp>().value, g.expected[t]) << "task " << t << ", run " << run;
      }
    }
    for (std::uint32_t t = 0; t < sizes[s]; ++t) ASSERT_EQ(seen[t], 1) << "task " << t;
    if (run == kFailingRun) {
      EXPECT_GT(cancelled, 0u) << "the failing task's successors ran";
    } else {
      EXPECT_EQ(cancelled, 0u) << "run " << run << " kept a poison flag of an earlier run";
    }
  }
}

// A task that fails (an unknown type) cancels the tasks after it, unrun; the others run.
TEST(GpuPool, AFailedGraphTaskCancelsItsSuccessors) {
  REQUIRE_GPU();
  const Cells cells(8);
  std::map<std::uint64_t, TaskStatus> status;
  {
    GpuPool pool(graph_options());
    std::vector<GpuPool::Record> tasks;
    for (std::uint32_t t = 0; t < 5; ++t) {
      tasks.push_back(GpuPool::Record::make<Stamp>({cells.at(0), t, 0, {}, 0}, t));
    }
    tasks[1].type = 99;  // 0 -> 1 (unknown) -> 2 -> 3; 0 -> 4
    const std::vector<Edge> edges{{0, 1}, {1, 2}, {2, 3}, {0, 4}};
    pool.push_graph(tasks, edges);
    for (int i = 0; i < 5; ++i) {
      const auto r = pool.pop();
      status[r.tag] = r.status;
    }
  }
  EXPECT_EQ(status[0], TaskStatus::ok);
  EXPECT_EQ(status[1], TaskStatus::unknown_type);
  EXPECT_EQ(status[2], TaskStatus::cancelled);
  EXPECT_EQ(status[3], TaskStatus::cancelled);
  EXPECT_EQ(status[4], TaskStatus::ok);
  std::vector<unsigned> got(8);
  ASSERT_EQ(cudaMemcpy(got.data(), cells.at(0), 8 * sizeof(unsigned), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(got[2], 0u) << "a cancelled task ran";
  EXPECT_EQ(got[3], 0u) << "a cancelled task ran";
}

// Between graphs the pool pauses, other GPU work runs, and graphs run again after resume().
TEST(GpuPool, GraphsRunAcrossAPause) {
  REQUIRE_GPU();
  const Cells cells(3 * 256);
  GpuPool pool(graph_options());
  std::mt19937 rng(11);
  for (int round = 0; round < 3; ++round) {
    const StampGraph g = stamp_graph(rng, 200, cells.at(256 * round));
    pool.push_graph(g.records, g.edges);
    for (int i = 0; i < 200; ++i) {
      const auto r = pool.pop();
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r.as<Stamp>().value, g.expected[r.tag]);
    }
    pool.pause();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    pool.resume();
  }
}

// A graph of one root and `fan` successors that each spin `spin_ns` on their block.
std::vector<GpuPool::Record> fan_out(std::size_t fan, unsigned long long spin_ns,
                                     std::vector<Edge>& edges) {
  std::vector<GpuPool::Record> tasks{GpuPool::Record::make<WhereAmI>({-1, 0, 0}, 0)};
  for (std::uint32_t t = 1; t <= fan; ++t) {
    tasks.push_back(GpuPool::Record::make<WhereAmI>({-1, 0, spin_ns}, t));
    edges.push_back({0, t});
  }
  return tasks;
}

// A block takes a ready graph task only when its task threads are free: with more idle blocks
// than ready tasks, no block runs two of them (one taken while its block still ran another
// would wait behind it, on the graph's critical path, while other blocks idle).
TEST(GpuPool, AReadyGraphTaskGoesToAFreeBlockNotBehindARunningOne) {
  REQUIRE_GPU();
  GpuPool pool(graph_options());
  const std::size_t fan = std::min<std::size_t>(pool.num_blocks() / 4, 1023);
  std::vector<Edge> edges;
  const auto tasks = fan_out(fan, 200'000, edges);
  for (int round = 0; round < 3; ++round) {
    pool.push_graph(tasks, edges);
    std::map<int, int> ran;  // block -> successors it ran
    for (std::size_t i = 0; i <= fan; ++i) {
      const auto r = pool.pop();
      ASSERT_TRUE(r.ok()) << to_string(r.status);
      if (r.tag != 0) ++ran[r.as<WhereAmI>().block];
    }
    for (const auto& [block, count] : ran) {
      EXPECT_EQ(count, 1) << "block " << block << " ran " << count << " of the " << fan
                          << " ready tasks, round " << round;
    }
  }
}

// A pushed task reaches its block's task threads while the ready queue still has graph work
// (counted by start times, not pop order):
// the loader reads its ring while a graph task runs, so ring tasks wait for at most the graph
// task in hand, not for the whole graph.
TEST(GpuPool, PushedTasksRunWhileAGraphKeepsEveryBlockBusy) {
  REQUIRE_GPU();
  PoolOptions o = graph_options(16384);
  o.mailbox = false;  // the lone task through a ring, not the mailbox's own block
  GpuPool pool(o);
  // Eight waves of 400 us: the root's block counts the fan down faster than the blocks take it.
  const std::size_t fan = std::min<std::size_t>(8 * pool.num_blocks(), 16383);
  std::vector<Edge> edges;
  const auto tasks = fan_out(fan, 400'000, edges);
  pool.push_graph(tasks, edges);
  ASSERT_TRUE(pool.pop().ok());  // the root: its successors are ready from now on
  pool.push<WhereAmI>({-1, 0, 0, 0}, 0, fan + 1);
  std::size_t position = 0;  // of the pushed task among the records popped after the root
  WhereAmI::Payload pushed{};
  std::vector<unsigned long long> starts;  // the graph tasks'
  std::map<int, int> on_block;             // graph tasks per block
  for (std::size_t i = 0; i < fan + 1; ++i) {
    const auto r = pool.pop();
    ASSERT_TRUE(r.ok()) << to_string(r.status);
    if (r.tag == fan + 1) {
      pushed = r.as<WhereAmI>();
      position = i;
    } else {
      starts.push_back(r.as<WhereAmI>().started);
      ++on_block[r.as<WhereAmI>().block];
    }
  }
  std::sort(starts.begin(), starts.end());
  const auto started_before =
      std::lower_bound(starts.begin(), starts.end(), pushed.started) - starts.begin();
  std::printf(
      "the pushed task came back after %zu of %zu graph tasks; it started after %td of them "
      "(%.0f us after the first), on block %d, which ran %d graph tasks\n",
      position, fan, started_before, (static_cast<double>(pushed.started) - starts.front()) / 1e3,
      pushed.block, on_block[pushed.block]);
  EXPECT_LT(started_before, static_cast<std::ptrdiff_t>(fan / 2))
      << "the pushed task waited for the graph";
}

// An urgent graph task (priority above 0) is taken before the normal ones ready when it
// becomes ready: a second root makes it ready while waves of normal tasks are still queued
// (eight waves of 400 us; the root's block counts them down faster than the blocks take them).
TEST(GpuPool, AnUrgentGraphTaskOvertakesTheOthersReadyWithIt) {
  REQUIRE_GPU();
  PoolOptions o = graph_options(16384);
  GpuPool pool(o);
  const std::size_t fan = std::min<std::size_t>(8 * pool.num_blocks(), 16380);
  std::vector<Edge> edges;
  auto tasks = fan_out(fan, 400'000, edges);
  const auto second_root = static_cast<std::uint32_t>(tasks.size());
  tasks.push_back(GpuPool::Record::make<WhereAmI>({-1, 0, 600'000, 0}, second_root));
  tasks.push_back(GpuPool::Record::make<WhereAmI>({-1, 0, 0, 0}, second_root + 1));
  edges.push_back({second_root, second_root + 1});
  std::vector<int> priorities(tasks.size(), 0);
  priorities.back() = 1;
  pool.push_graph(tasks, edges, 0, priorities);
  unsigned long long urgent = 0;
  std::vector<unsigned long long> starts;  // the fan's
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto r = pool.pop();
    ASSERT_TRUE(r.ok()) << to_string(r.status);
    if (r.tag == second_root + 1) {
      urgent = r.as<WhereAmI>().started;
    } else if (r.tag != 0 && r.tag != second_root) {
      starts.push_back(r.as<WhereAmI>().started);
    }
  }
  std::sort(starts.begin(), starts.end());
  const auto started_before =
      std::lower_bound(starts.begin(), starts.end(), urgent) - starts.begin();
  std::printf("the urgent task started after %td of the fan's %zu tasks\n", started_before, fan);
  EXPECT_LT(started_before, static_cast<std::ptrdiff_t>(fan / 2))
      << "the urgent task waited for the others";
}

TEST(GpuPool, APoolOverSeveralGpusRefusesGraphsSayingSo) {
  REQUIRE_GPU();
  if (usable_gpus() < 2) GTEST_SKIP() << "needs 2 GPUs";
  PoolOptions o = device_options();
  o.graph_capacity = 1024;  // over every GPU: refused
  GpuPool pool(o);
  EXPECT_EQ(pool.graph_capacity(), 0u);
  const std::vector<GpuPool::Record> tasks(1, GpuPool::Record::make<Double>({1, 0}));
  try {
    pool.push_graph(tasks, {});
    ADD_FAILURE() << "a graph was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("several GPUs"), std::string::npos) << e.what();
  }
}

TEST(GpuPool, EveryGpuServesTasks) {
  REQUIRE_GPU();
  GpuPool pool(device_options());
  std::printf("pool: %s, %zu blocks\n", pool.describe().c_str(), pool.num_blocks());
  // One batch (one lock): the scheduler's first round finds every slot free and n tasks
  // queued, so it loads every slot, and each resident block runs at least one task.
  const std::size_t n = pool.num_blocks() * 20;
  std::vector<GpuPool::Record> batch;
  for (std::size_t k = 0; k < n; ++k) batch.push_back(GpuPool::Record::make<WhereAmI>({-1, 0}, k));
  pool.push_batch(batch, 0);
  std::set<int> blocks;
  for (std::size_t k = 0; k < n; ++k) {
    const auto r = pool.pop(0);
    ASSERT_TRUE(r.ok());
    const auto p = r.as<WhereAmI>();
    ASSERT_GE(p.block, 0);
    ASSERT_LT(static_cast<std::size_t>(p.block), pool.num_blocks());
    EXPECT_EQ(p.threads, 128);
    blocks.insert(p.block);
  }
  EXPECT_EQ(blocks.size(), pool.num_blocks());
  if (usable_gpus() > 1) {
    const int first_of_last_gpu =
        static_cast<int>(pool.num_blocks()) - static_cast<int>(pool.num_blocks() / usable_gpus());
    EXPECT_GE(*blocks.rbegin(), first_of_last_gpu) << "the last GPU ran nothing";
    EXPECT_LT(*blocks.begin(), first_of_last_gpu) << "the first GPU ran nothing";
  }
}

// A batch of as many equal compute-bound tasks as the GPU has SMs, pushed five times to a
// pool of `lanes` scheduler lanes (0: the default), runs one per SM each time, however the
// blocks' order was shuffled by the batches before (several blocks share an SM). With `held`,
// each task holds its block until all of its batch have started.
void expect_one_task_per_sm(std::size_t lanes, bool held) {
  constexpr int kRounds = 5;
  Cells started(kRounds);  // before the pool: a cudaFree waits for the device
  PoolOptions o = device_options();
  o.devices = {0};
  o.scheduler_lanes = lanes;
  GpuPool pool(o);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const auto sms = static_cast<std::size_t>(prop.multiProcessorCount);
  ASSERT_GE(pool.num_blocks(), 2 * sms) << pool.describe();  // several blocks per SM
  for (int round = 0; round < kRounds; ++round) {
    OnWhichSm::Payload task{200'000, ~0u};
    if (held) {
      task.started = started.at(static_cast<std::size_t>(round));
      task.hold_for = static_cast<unsigned>(sms);
    }
    std::vector<GpuPool::Record> batch(sms, GpuPool::Record::make<OnWhichSm>(task));
    pool.push_batch(batch, 0);
    std::multiset<unsigned> on;
    std::multimap<unsigned, int> rings_on;  // SM -> the rings (blocks) that ran there
    for (std::size_t k = 0; k < sms; ++k) {
      const auto r = pool.pop(0);
      ASSERT_TRUE(r.ok());
      on.insert(r.as<OnWhichSm>().sm);
      rings_on.emplace(r.as<OnWhichSm>().sm, r.as<OnWhichSm>().block);
    }
    std::string doubled;  // where two tasks met: the SM and its rings, for the lanes' ranges
    for (auto it = rings_on.begin(); it != rings_on.end(); ++it) {
      if (rings_on.count(it->first) > 1) {
        doubled += " SM " + std::to_string(it->first) + " ring " + std::to_string(it->second);
      }
    }
    EXPECT_EQ(std::set<unsigned>(on.begin(), on.end()).size(), sms)
        << pool.num_lanes() << " lane(s), round " << round << ": " << sms
        << " tasks ran on fewer SMs;" << doubled;
  }
}

// The lanes' shares: each task holds its block until the whole batch has started, so a lane
// whose thread is late (asleep, or not scheduled) still finds its share queued, as the other
// lanes' SMs are all busy; the test checks where the lanes put the tasks, not how soon the
// host ran the lanes (docs/gpu.md "Placement": a late lane's share otherwise runs as a second
// wave on other lanes' SMs).
TEST(GpuPool, ABatchOfOneTaskPerSmRunsOnePerSm) {
  REQUIRE_GPU();
  expect_one_task_per_sm(0, true);
}

// One lane places the whole batch itself: one per SM without holding, whatever the timing.
TEST(GpuPool, ABatchOfOneTaskPerSmRunsOnePerSmWithOneLane) {
  REQUIRE_GPU();
  expect_one_task_per_sm(1, false);
}

// Placement (docs/gpu.md "Placement"): the rings of one SM are one run of blocks-per-SM
// adjacent ranks starting at a multiple of it, so that the lanes' ranges (whole multiples)
// never split an SM; with the mailbox on, its block is the last SM's, the one SM with a ring
// fewer. Every block runs a task of a batch of one per block; each task reports its block
// (ring) and SM.
TEST(GpuPool, TheRingsOfOneSmAreOneAlignedRunWithTheMailboxOn) {
  REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const auto sms = static_cast<std::size_t>(prop.multiProcessorCount);
  for (int launch = 0; launch < 5; ++launch) {  // the placement differs from launch to launch
    PoolOptions o = device_options();
    o.devices = {0};
    o.mailbox = true;
    GpuPool pool(o);
    const std::size_t rings = pool.num_blocks();
    ASSERT_EQ((rings + 1) % sms, 0u) << pool.describe();  // the mailbox's block is the one more
    const std::size_t per_sm = (rings + 1) / sms;
    std::vector<GpuPool::Record> batch(rings, GpuPool::Record::make<OnWhichSm>({20'000, ~0u}));
    pool.push_batch(batch, 0);
    std::map<int, unsigned> sm_of_ring;
    for (std::size_t k = 0; k < rings; ++k) {
      const auto r = pool.pop(0);
      ASSERT_TRUE(r.ok());
      const auto& p = r.as<OnWhichSm>();
      ASSERT_GE(p.block, 0);
      ASSERT_LT(static_cast<std::size_t>(p.block), rings);
      const auto [at, fresh] = sm_of_ring.emplace(p.block, p.sm);
      EXPECT_EQ(at->second, p.sm) << "ring " << p.block << " ran on two SMs";
    }
    std::map<std::size_t, unsigned> sm_of_run;  // run of per_sm ranks -> its SM
    std::map<unsigned, std::size_t> run_of_sm;
    for (const auto& [ring, sm] : sm_of_ring) {
      const std::size_t run = static_cast<std::size_t>(ring) / per_sm;
      const auto [a, fresh_run] = sm_of_run.emplace(run, sm);
      EXPECT_EQ(a->second, sm) << "launch " << launch << ": rings " << run * per_sm << ".."
                               << run * per_sm + per_sm - 1 << " span SMs " << a->second << " and "
                               << sm << " (ring " << ring << ")";
      const auto [b, fresh_sm] = run_of_sm.emplace(sm, run);
      EXPECT_EQ(b->second, run) << "launch " << launch << ": SM " << sm << " has rings in runs "
                                << b->second << " and " << run;
    }
  }
}

__global__ void add_one(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += 1.0f;
}

// While paused, the pool's kernels are gone: the caller's kernels and cudaDeviceSynchronize
// run; resume() brings the blocks back, and tasks see what the caller's kernel wrote.
TEST(GpuPool, APausedPoolLetsOtherKernelsAndDeviceSynchronizeRun) {
  REQUIRE_GPU();
  constexpr int n = 1 << 16;
  float* x = nullptr;
  float* y = nullptr;
  ASSERT_EQ(cudaMalloc(&x, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, n * sizeof(float)), cudaSuccess);
  const std::vector<float> ones(n, 1.0f);
  ASSERT_EQ(cudaMemcpy(x, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, n * sizeof(float)), cudaSuccess);
  {
    GpuPool pool(device_options());
    for (int phase = 0; phase < 3; ++phase) {
      pool.push<Saxpy>({2.0f, n, x, y}, 0);  // y += 2x: through the pool
      ASSERT_TRUE(pool.pop(0).ok());
      pool.pause();
      ASSERT_TRUE(pool.paused());
      add_one<<<n / 256, 256>>>(y, n);  // y += 1: a kernel of the caller's own
      // In a thread of its own, so that a hang is a failure, not a stuck test.
      auto synced = std::async(std::launch::async, [] { return cudaDeviceSynchronize(); });
      ASSERT_EQ(synced.wait_for(std::chrono::seconds(20)), std::future_status::ready)
          << "cudaDeviceSynchronize did not return while the pool was paused";
      ASSERT_EQ(synced.get(), cudaSuccess);
      pool.resume();
      // A lone task (the mailbox) and a batch (the rings) both run after the resume.
      const auto d = pool.submit(GpuPool::Record::make<Double>({21, 0})).get();
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d.as<Double>().result, 42u);
    }
  }
  std::vector<float> got(n);
  ASSERT_EQ(cudaMemcpy(got.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < n; i += 997) ASSERT_EQ(got[i], 9.0f) << "element " << i;  // 3 x (2 + 1)
  cudaFree(x);
  cudaFree(y);
}

// Copies on a non-blocking stream of the caller's run beside a pool that is not paused (the
// applications upload their inputs so): host to device, then (with `device_to_device`) device
// to device, then device to host, each synchronized in a thread of its own so that a hang is
// reported as a failure; a task then reads what the copies wrote. A copy between host and
// device memory runs on a copy engine beside any pool; one from device to device may run as a
// kernel of the driver's, which needs room on an SM, so docs/gpu.md ("Sharing the GPU") puts it
// beside a pool of fewer blocks per SM than fit, and so does this test.
void copies_beside_the_running_pool(const PoolOptions& options, bool device_to_device) {
  constexpr int n = 1 << 22;  // 16 MiB of floats: a device-to-device copy of some size
  float *x = nullptr, *y = nullptr, *staged = nullptr;
  ASSERT_EQ(cudaMalloc(&x, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&staged, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, n * sizeof(float)), cudaSuccess);
  cudaStream_t side{};
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<float> ones(n, 1.0f);
  std::vector<float> back(n, 0.0f);
  {
    GpuPool pool(options);
    pool.push<Saxpy>({1.0f, 1, y, y}, 0);  // the blocks are up and have run a task
    ASSERT_TRUE(pool.pop(0).ok());
    // "" when the copy ended well, else what went wrong.
    auto copy = [&](void* to, const void* from, cudaMemcpyKind kind) -> std::string {
      auto done = std::make_shared<std::promise<cudaError_t>>();
      auto result = done->get_future();
      std::thread([=] {
        cudaError_t e = cudaMemcpyAsync(to, from, n * sizeof(float), kind, side);
        if (e == cudaSuccess) e = cudaStreamSynchronize(side);
        done->set_value(e);
      }).detach();  // a copy that never ends leaves a thread behind, not a stuck test
      if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        return "did not finish beside the running pool";
      }
      const cudaError_t e = result.get();
      return e == cudaSuccess ? "" : cudaGetErrorString(e);
    };
    ASSERT_EQ(copy(device_to_device ? staged : x, ones.data(), cudaMemcpyHostToDevice), "")
        << "host to device";
    if (device_to_device) {
      ASSERT_EQ(copy(x, staged, cudaMemcpyDeviceToDevice), "") << "device to device";
    }
    pool.push<Saxpy>({2.0f, n, x, y}, 0);  // y += 2x
    ASSERT_TRUE(pool.pop(0).ok());
    ASSERT_EQ(copy(back.data(), y, cudaMemcpyDeviceToHost), "") << "device to host";
  }
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(back[i], 2.0f) << "element " << i;
  cudaStreamDestroy(side);
  cudaFree(x);
  cudaFree(y);
  cudaFree(staged);
}

TEST(GpuPool, CopiesOnAStreamOfTheirOwnRunBesideTheRunningPool) {
  REQUIRE_GPU();
  for (const bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "the kernel with the graph code" : "the kernel without it");
    const PoolOptions full = graphs ? graph_options() : device_options();
    {
      SCOPED_TRACE("between host and device, beside as many blocks as fit");
      copies_beside_the_running_pool(full, false);
    }
    SCOPED_TRACE("device to device too, beside one block a SM");
    PoolOptions roomy = full;
    roomy.blocks_per_sm = 1;
    copies_beside_the_running_pool(roomy, true);
  }
}

TEST(GpuPool, BadDeviceOptionsAreRejected) {
  REQUIRE_GPU();
  PoolOptions o = device_options();
  o.devices = {usable_gpus()};  // one past the last
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o = device_options();
  o.threads_per_block = 100;
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o.threads_per_block = 1024;  // + the loader and publisher warps: more than a block may have
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o = device_options();
  o.blocks_per_sm = 1000;
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o = device_options();
  o.program = DeviceProgram{};
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o = device_options();
  o.program = device_program<Types, 128>();  // made for another capacity
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
  o = device_options();
  o.ring_depth = 33;
  EXPECT_THROW(GpuPool{o}, InvalidArgument);
}

TEST(GpuPool, AnIdlePoolStopsPollingHostMemoryAndWakesForWork) {
  REQUIRE_GPU();
  // The gate of the batch below, allocated before the pool and freed after it: cudaFreeHost
  // waits for the device, and the pool's kernel runs until the pool is destroyed.
  int* gate = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&gate), sizeof(int), cudaHostAllocMapped),
            cudaSuccess);
  struct FreeHost {
    void operator()(int* p) const { cudaFreeHost(p); }
  };
  const std::unique_ptr<int, FreeHost> gate_owner(gate);
  *gate = 0;
  int* device_gate = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_gate), gate, 0), cudaSuccess);
  PoolOptions o = device_options();
  o.warm_idle = std::chrono::microseconds(100);
  GpuPool pool(o);
  // Opens the gate however the test ends, before the pool's destructor waits for its tasks.
  struct OpenGate {
    int* g;
    ~OpenGate() { std::atomic_ref<int>(*g).store(1, std::memory_order_release); }
  } const open_gate{gate};
  pool.push<Double>({1, 0});
  ASSERT_TRUE(pool.pop().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // every block in deep idle
  const std::uint64_t before = pool.stats().host_polls;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::uint64_t idle_polls = pool.stats().host_polls - before;
  // Deep idle: the watcher reads host memory (one read per ~1-2 us), each standby block (one
  // per lane) and the mailbox's server about once per microsecond, and every deep-idle block
  // once per 2 ms (the safety poll). Warm polling by every block would be ~2000 blocks x one
  // read per ~3 us: 10^8 reads in 200 ms.
  std::printf("host reads in 200 ms of idle: %llu (%zu blocks, %zu standby)\n",
              static_cast<unsigned long long>(idle_polls), pool.num_blocks(), pool.num_lanes());
  const double bound = 0.2 * (1e6 + 1.5e6 * static_cast<double>(pool.num_lanes() + 1) +
                              600.0 * static_cast<double>(pool.num_blocks()));
  EXPECT_LT(static_cast<double>(idle_polls), bound);
  EXPECT_GT(idle_polls, 0u) << "the watcher polls the doorbell";
  // Work wakes every block: a single task, then a batch that needs them all.
  pool.push<Double>({2, 0}, 0, 7);
  const auto r = pool.pop();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.as<Double>().result, 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // One task per block, held until every task has had time to be placed: every lane's blocks
  // must wake (a lane fills only its own idle blocks while another lane has most of its blocks
  // idle). Held, not timed: a lane asleep for 20 ms can take more than 200 us to start on the
  // H100 machine (latency_cold in bench/results/h100/gpu-pool.md), and tasks of 200 us then
  // ended before it took any (two of eight runs at 1102bab-262b6ac: the two other lanes ran
  // two tasks per block).
  const std::size_t n = pool.num_blocks();
  std::vector<GpuPool::Record> batch;
  for (std::size_t k = 0; k < n; ++k) {
    batch.push_back(GpuPool::Record::make<GatedWhere>({device_gate, -1}, k));
  }
  pool.push_batch(batch, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::atomic_ref<int>(*gate).store(1, std::memory_order_release);
  std::set<int> blocks;
  std::vector<int> per_block(pool.num_blocks(), 0);
  for (std::size_t k = 0; k < n; ++k) {
    const auto d = pool.pop();
    ASSERT_TRUE(d.ok());
    const int b = d.as<GatedWhere>().block;
    blocks.insert(b);
    if (b >= 0 && static_cast<std::size_t>(b) < per_block.size()) ++per_block[b];
  }
  // Which blocks ran none, in ranges (each lane owns a contiguous range of blocks).
  std::string idle_ranges;
  for (std::size_t b = 0; b < per_block.size();) {
    if (per_block[b] != 0) {
      ++b;
      continue;
    }
    std::size_t e = b;
    while (e + 1 < per_block.size() && per_block[e + 1] == 0) ++e;
    idle_ranges += " " + std::to_string(b) + (e > b ? "-" + std::to_string(e) : "");
    b = e + 1;
  }
  EXPECT_GT(blocks.size(), pool.num_blocks() * 9 / 10)
      << "deep-idle blocks woke for the batch; blocks that ran none:" << idle_ranges
      << "; most tasks in one block: " << *std::max_element(per_block.begin(), per_block.end());
}

TEST(GpuPool, WatchdogTimesOutAStuckTaskAndShutdownDoesNotHang) {
  REQUIRE_GPU();
  int* flag = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocMapped),
            cudaSuccess);
  *flag = 0;
  int* device_flag = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0), cudaSuccess);
  {
    PoolOptions o = device_options();
    o.task_deadline = std::chrono::milliseconds(20);
    GpuPool pool(o);
    pool.push<WaitForHost>({device_flag}, 0, 1);
    const auto r = pool.pop();
    EXPECT_EQ(r.status, TaskStatus::timed_out);
    EXPECT_EQ(r.tag, 1u);
    for (std::uint32_t k = 0; k < 1000; ++k) pool.push<Double>({k, 0}, 0, k);
    for (int k = 0; k < 1000; ++k) EXPECT_TRUE(pool.pop().ok());
    EXPECT_EQ(pool.stats().slots_lost, 1u);
    EXPECT_EQ(pool.stats().timed_out, 1u);
  }  // returns although one block is still inside the stuck task
  // Let the abandoned block finish: it finds EXIT and returns, and the GPU is free again.
  std::atomic_ref<int>(*flag).store(1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  GpuPool again(device_options());
  again.push<Double>({5, 0});
  EXPECT_EQ(again.pop().as<Double>().result, 10u);
}

}  // namespace
}  // namespace weft::gpu
