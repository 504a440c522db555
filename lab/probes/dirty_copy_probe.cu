// Why does a host-to-device copy that starts right after a CPU node ran at a third of the usual
// bandwidth? In 9a41691's bench (lab/results/h100/copy_after_cpu-9a41691.txt) copies
// of 25.6 MB starting < 0.1 ms after a CPU node ended ran at a median 17.9 GB/s, all others at
// 51.7-54.5: a fixed ~0.5-1 ms more. Two hypotheses, told apart here:
//   (a) the copy reads what the CPU node has just written: lines dirty in the cores' caches, so
//       the copy engine's reads are snoops answered from the caches, not DRAM reads;
//   (b) the idle CPU workers (spinning before they sleep) slow the copy down.
// A team of T threads (one per core, bound as weft's workers are) prepares a pinned buffer
// (cudaHostRegister'ed, as the graph layer's data), then the main thread copies it to the
// device at once, timed with CUDA events around cudaMemcpyAsync. The cases:
//   evicted        written long ago, then 1 GiB of other memory written (past the 300 MiB L3)
//   dirty          written by the team just before; the team then sleeps (atomic wait)
//   dirty-spin     written just before; the team spins on an atomic until the copy ends
//   dirty-1        written by one thread just before
//   dirty-wait2ms  written just before, then 2 ms of nothing (the team asleep)
//   clean          evicted, then read by the team (clean lines in the caches)
//   flushed        written, then each thread clflushopt's its own part (flush time reported)
//   streamed       written with non-temporal stores (_mm256_stream_ps) and sfence
// Medians of 15 repetitions per case and size. Build and run on the GPU machine:
//   nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -Xcompiler -mavx2,-mclflushopt \
//     dirty_copy_probe.cu -o dirty_copy && ./dirty_copy [threads]
#include <cuda_runtime.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "cuda_check.cuh"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// T bound threads that run one job each when `generation` moves; between jobs each either
// sleeps in atomic wait or spins, as `spin` says when the job was posted.
class Team {
 public:
  explicit Team(int n) : n_(n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, i] { loop(i); });
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(i % std::thread::hardware_concurrency(), &set);
      pthread_setaffinity_np(threads_.back().native_handle(), sizeof set, &set);
    }
  }
  ~Team() {
    run([](int) {}, false, true);
    for (auto& t : threads_) t.join();
  }
  int size() const { return n_; }
  // Runs job(i) on every thread and returns when all are done; afterwards the threads spin
  // (until release_spin) or sleep.
  void run(std::function<void(int)> job, bool spin_after, bool exit = false) {
    job_ = std::move(job);
    spin_after_.store(spin_after, std::memory_order_relaxed);
    exit_ = exit;
    done_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);  // pairs with the workers' acquire
    generation_.notify_all();
    while (done_.load(std::memory_order_acquire) < n_) {
    }
  }
  void release_spin() { spinning_.fetch_add(1, std::memory_order_release); }

 private:
  void loop(int i) {
    unsigned seen = 0;
    for (;;) {
      generation_.wait(seen, std::memory_order_acquire);
      seen = generation_.load(std::memory_order_acquire);
      if (exit_) return;
      const unsigned spin_epoch = spinning_.load(std::memory_order_acquire);
      job_(i);
      const bool spin = spin_after_.load(std::memory_order_relaxed);
      done_.fetch_add(1, std::memory_order_acq_rel);
      if (spin) {
        while (spinning_.load(std::memory_order_acquire) == spin_epoch) {
        }
      }
    }
  }
  int n_;
  std::vector<std::thread> threads_;
  std::function<void(int)> job_;
  std::atomic<bool> spin_after_{false};
  bool exit_ = false;
  std::atomic<unsigned> generation_{0};
  std::atomic<int> done_{0};
  std::atomic<unsigned> spinning_{0};
};

struct Part {
  std::size_t begin, end;
};
Part part(std::size_t n, int i, int t) {
  const std::size_t q = (n + t - 1) / t;
  return {std::min(n, q * i), std::min(n, q * (i + 1))};
}

void write_part(float* p, std::size_t n, int i, int t, float v) {
  Part r = part(n, i, t);
  for (std::size_t k = r.begin; k < r.end; ++k) p[k] = v + static_cast<float>(k & 1023);
}

void stream_part(float* p, std::size_t n, int i, int t, float v) {
  Part r = part(n, i, t);
  r.begin = (r.begin + 7) / 8 * 8;  // 32-byte aligned (the buffer is page aligned)
  r.end = r.end / 8 * 8;
  const __m256 base = _mm256_set1_ps(v);
  for (std::size_t k = r.begin; k < r.end; k += 8) _mm256_stream_ps(p + k, base);
  _mm_sfence();
}

void flush_part(float* p, std::size_t n, int i, int t) {
  Part r = part(n, i, t);
  auto* b = reinterpret_cast<char*>(p + r.begin);
  auto* e = reinterpret_cast<char*>(p + r.end);
  for (char* c = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(b) & ~std::uintptr_t{63});
       c < e; c += 64) {
    _mm_clflushopt(c);
  }
  _mm_sfence();
}

double read_part(const float* p, std::size_t n, int i, int t) {
  Part r = part(n, i, t);
  double s = 0;
  for (std::size_t k = r.begin; k < r.end; ++k) s += p[k];
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads =
      argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const int reps = 15;
  Team team(threads);
  const std::size_t scratch_n = (std::size_t{1} << 30) / sizeof(float);
  std::vector<float> scratch(scratch_n, 1.0f);
  auto evict = [&] {
    team.run([&](int i) { write_part(scratch.data(), scratch_n, i, team.size(), 2.0f); }, false);
  };
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::printf("threads %d, %d repetitions per case; medians\n", threads, reps);
  std::printf("%-14s %9s %10s %8s %10s\n", "case", "MB", "copy ms", "GB/s", "prep ms");
  for (std::size_t bytes :
       {std::size_t{25583364}, std::size_t{102333456}, std::size_t{255833640}}) {
    const std::size_t n = bytes / sizeof(float);
    float* host = static_cast<float*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    std::memset(host, 0, bytes);
    CHECK(cudaHostRegister(host, bytes, cudaHostRegisterPortable));
    void* dev = nullptr;
    CHECK(cudaMalloc(&dev, bytes));
    auto copy_ms = [&] {
      CHECK(cudaEventRecord(a, stream));
      CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
      CHECK(cudaEventRecord(b, stream));
      CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      return static_cast<double>(ms);
    };
    auto team_write = [&](bool spin) {
      team.run([&](int i) { write_part(host, n, i, team.size(), 3.0f); }, spin);
    };
    struct Case {
      const char* name;
      std::function<void()> prepare;  // timed as "prep ms" from its last step
      bool spinning;
    };
    double prep = 0;
    std::vector<Case> cases = {
        {"evicted",
         [&] {
           team_write(false);
           evict();
           prep = 0;
         },
         false},
        {"dirty",
         [&] {
           evict();
           team_write(false);
           prep = 0;
         },
         false},
        {"dirty-spin",
         [&] {
           evict();
           team_write(true);
           prep = 0;
         },
         true},
        {"dirty-1",
         [&] {
           evict();
           write_part(host, n, 0, 1, 4.0f);
           prep = 0;
         },
         false},
        {"dirty-wait2ms",
         [&] {
           evict();
           team_write(false);
           std::this_thread::sleep_for(std::chrono::milliseconds(2));
           prep = 0;
         },
         false},
        {"clean",
         [&] {
           team_write(false);
           evict();
           static std::atomic<double> sink{0};
           team.run(
               [&](int i) {
                 sink.store(read_part(host, n, i, team.size()), std::memory_order_relaxed);
               },
               false);
           prep = 0;
         },
         false},
        {"flushed",
         [&] {
           evict();
           team_write(false);
           const double t0 = now_ms();
           team.run([&](int i) { flush_part(host, n, i, team.size()); }, false);
           prep = now_ms() - t0;
         },
         false},
        {"streamed",
         [&] {
           evict();
           team.run([&](int i) { stream_part(host, n, i, team.size(), 5.0f); }, false);
           prep = 0;
         },
         false},
    };
    for (Case& c : cases) {
      std::vector<double> ms, preps;
      for (int r = 0; r < reps + 1; ++r) {
        c.prepare();
        const double t = copy_ms();
        if (c.spinning) team.release_spin();
        if (r == 0) continue;  // warm-up
        ms.push_back(t);
        preps.push_back(prep);
      }
      const double m = median(ms);
      std::printf("%-14s %9.1f %10.3f %8.1f %10.3f\n", c.name, bytes / 1e6, m, bytes / m / 1e6,
                  median(preps));
      std::fflush(stdout);
    }
    CHECK(cudaHostUnregister(host));
    CHECK(cudaFree(dev));
    std::free(host);
  }
  return 0;
}
