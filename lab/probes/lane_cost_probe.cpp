// Host-side cost of the pool's scheduler per task, for an A/B of two trees under callgrind
// (instructions are repeatable where seconds on a shared VM are not): one pusher thread pushes
// empty tasks in batches of 4096, the main thread pops them in batches, one scheduler lane
// serves 8 host blocks with rings of 8. Build against a tree (its include/ and src/gpu/):
//   T=. ; g++ -O3 -std=c++20 -DNDEBUG -I$T/include -I$T/src lab/probes/lane_cost_probe.cpp
//     $T/src/gpu/*.cpp -o /tmp/lane_cost -lpthread
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out /tmp/lane_cost 100000
//   callgrind_annotate /tmp/cg.out | head -40
#include <cstdio>
#include <cstdlib>
#include <span>
#include <thread>
#include <vector>

#include "weft/gpu/pool.hpp"

struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;
  };
  WEFT_HD static void run(Payload&, const weft::gpu::BlockContext&) {}
};
using Pool = weft::gpu::Pool<weft::gpu::TaskTypes<Empty>, 16>;

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  weft::gpu::PoolOptions o;
  o.host_blocks = 8;
  o.ring_depth = 8;
  o.scheduler_lanes = 1;
  o.mailbox = false;
  Pool pool(o);
  std::vector<Pool::Record> records(n);
  for (std::size_t i = 0; i < n; ++i) records[i] = Pool::Record::make<Empty>({i});
  std::thread pusher([&] {
    for (std::size_t i = 0; i < n; i += 4096) {
      const std::size_t len = std::min<std::size_t>(4096, n - i);
      pool.push_batch(std::span<const Pool::Record>(records.data() + i, len));
    }
  });
  std::vector<Pool::Record> got(4096);
  std::uint64_t sum = 0;
  for (std::size_t done = 0; done < n;) {
    const std::size_t k = pool.pop_batch(got);
    for (std::size_t j = 0; j < k; ++j) sum += got[j].as<Empty>().seq;
    done += k;
  }
  pusher.join();
  std::printf("%s\n", sum == n * (n - 1) / 2 ? "ok" : "WRONG");
  return sum == n * (n - 1) / 2 ? 0 : 1;
}
