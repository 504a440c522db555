// What building a Cholesky plan's task records costs on the host (CholeskyPlan keeps them while
// the matrix's address and leading dimension stay the same): cholesky_records for each size
// and block side of the bench, 10 builds each, no pool and no GPU.
//   g++ -std=c++20 -O2 -Iinclude -Iapps/gpu lab/probes/cholesky_records_probe.cpp \
//     build/apps/libweft_gpu_apps.a build/src/libweft.a -lopenblas -lhwloc -lpthread \
//     -o /tmp/records && /tmp/records
#include <chrono>
#include <cstdio>
#include <vector>

#include "app_pool.hpp"
#include "cholesky.hpp"
int main() {
  using namespace apps::gpu;
  for (int n : {1024, 2048, 4096, 8192}) {
    for (int block : {1, 2}) {
      CholeskyGraph g(n, block);
      std::vector<AppPool::Record> recs;
      // Only written into the records, never dereferenced.
      double* a = reinterpret_cast<double*>(0x10000);
      cholesky_records(g, a, n, recs);
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < 10; ++r) cholesky_records(g, a, n, recs);
      auto t1 = std::chrono::steady_clock::now();
      std::printf("n=%d block=%d tasks=%zu records: %.1f us per build\n", n, block,
                  g.tasks().size(),
                  std::chrono::duration<double, std::micro>(t1 - t0).count() / 10);
    }
  }
}
