// docs/gpu.md's opening example, built and run as a test so that it stays true. It uses the
// host backend (blocks are host threads), so it runs on any machine; the device backend runs
// the same task types on GPUs (docs/gpu.md, "On a GPU").
#include <weft/gpu/pool.hpp>

#include <cstdint>
#include <span>
#include <vector>

// A task type: an id, a trivially copyable payload, and a body that one block runs with all
// its threads (here the host backend's block of one thread).
struct Saxpy {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    float a;
    const float* x;
    float* y;
    int n;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
    for (int i = b.thread(); i < p.n; i += b.threads()) p.y[i] += p.a * p.x[i];
  }
};
// Results travel back in the payload.
struct Square {
  static constexpr std::uint32_t kId = 2;
  struct Payload {
    double x;
    double y;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext&) { p.y = p.x * p.x; }
};

int main() {
  using Tasks = weft::gpu::TaskTypes<Saxpy, Square>;
  using Pool = weft::gpu::Pool<Tasks, 64>;  // payloads of at most 64 bytes
  weft::gpu::PoolOptions options;           // Backend::host by default
  options.output_queues = 2;
  Pool pool(options);
  bool ok = true;

  // One task, waited for on output queue 0.
  std::vector<float> x(4096, 1.0f), y(4096, 2.0f);
  pool.push<Saxpy>({3.0f, x.data(), y.data(), static_cast<int>(x.size())}, /*out=*/0);
  const Pool::Record done = pool.pop(0);  // blocks until a task of queue 0 is finished
  ok = ok && done.ok() && y[0] == 5.0f && y[4095] == 5.0f;

  // A batch for output queue 1; each record carries a tag of the caller's.
  std::vector<Pool::Record> batch;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    batch.push_back(Pool::Record::make<Square>({static_cast<double>(i), 0.0}, /*tag=*/i));
  }
  pool.push_batch(batch, /*out=*/1);
  std::vector<Pool::Record> results(batch.size());
  for (std::size_t got = 0; got < results.size();) {
    got += pool.pop_batch(std::span(results).subspan(got), 1);  // in any order
  }
  for (const Pool::Record& r : results) {
    const double i = static_cast<double>(r.tag);
    ok = ok && r.ok() && r.as<Square>().y == i * i;
  }

  // One task whose result comes back through a future instead of a queue.
  auto f = pool.submit(Pool::Record::make<Square>({7.0, 0.0}));
  ok = ok && f.get().as<Square>().y == 49.0;

  pool.no_more_tasks();  // later pushes throw weft::ShutDown
  return ok ? 0 : 1;
}  // the destructor delivers what is still queued as cancelled and stops the blocks
