// docs/streams.md's opening example, built and run as a test so that it stays true. It runs on
// the host device (host memory standing in for a GPU), so it runs anywhere.
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

namespace ws = weft::stream;

int main() {
  // Two task streams in this process; DeviceChoice::Auto would take the GPUs where there are.
  ws::WorldOptions options;
  options.streams_per_process = 2;
  options.device = ws::DeviceChoice::Host;
  ws::World world(options);
  world.run([](ws::TaskStream& ts) {
    constexpr std::size_t n = 1000;
    // A shared region: a host buffer and a device buffer kept coherent by the runtime.
    auto x = ts.region<double>(n, ws::Policy::ReadWrite);
    {
      auto h = x.host(ws::Access::Write);  // the host writes all of it: state InHost
      for (std::size_t i = 0; i < n; ++i) h[i] = double(i);
    }
    // A kernel that reads x: the region copies it in first (InHost -> InAll).
    ts.launch({ws::updates(x)}, [&](const ws::Launch& l) {
      // On a GPU (l.on_host false): scale<<<blocks, threads, 0, l.stream>>>(x.device_data(), n);
      if (l.on_host)
        for (std::size_t i = 0; i < n; ++i) x.device_data()[i] *= 2;  // the host device's kernel
    });
    // Rank 0 sends its result to rank 1, device buffer to host buffer; the send is ordered
    // after the kernel without a synchronize.
    std::vector<double> got(n);
    if (ts.rank() == 0) ts.send(ws::device(x.device_data(), n), 1, /*tag=*/0);
    if (ts.rank() == 1) {
      ts.recv(ws::host(got.data(), n), 0, 0);
      std::printf("rank 1 got x[999] = %.0f from rank 0\n", got[n - 1]);
    }
    // Every rank sums its last element: 1998 + 1998.
    double last = x.host(ws::Access::Read)[n - 1];  // copied back here (InDevice -> InAll)
    ts.allreduce_sum(&last, 1);
    if (ts.rank() == 0) std::printf("sum of last elements = %.0f\n", last);
  });
}
