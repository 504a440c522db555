// How fast can one host thread hand out tasks and take back results, per task, depending on
// how blocks report that a task ended? The pool today (mode "slots"): each block has a ring of
// slots in pinned host memory; a block stores FINISHED in its ring's control line, and a lane
// scans its blocks' control lines, reads each finished slot's results and writes the next task
// into the slot. The alternative (mode "cq"): a block appends {slot, results} to its lane's
// completion queue, a ring in pinned memory that the lane reads in order (an NVMe-style
// completion queue with a phase tag), so the lane reads lines one after another instead of one
// control line per block, and slots are written only by the host (they stay in its cache).
//
// Mode "slots + queues" is "slots" with the pool's data flow around it: a pusher thread copies
// task records into entry vectors queued under a mutex (as push_batch does), the host thread
// takes entries from that queue into its own batch, loads them into any free slot, stages
// results as 48-byte records in vectors it hands to a popper thread under a mutex, and the
// popper copies them out and gives the vectors back (as pop_batch does): the pool's hand-offs
// between threads without its bookkeeping. The gap between it and "slots" is what those
// hand-offs cost; the gap between it and the pool (lab/probes/lane_profile.cu) is the
// pool's own bookkeeping.
//
// Mode "slots" also runs with the pool's pieces added one at a time (see kIdleStore below).
//
// The tasks are empty (result = 2 x payload + 1). With one host thread the figure is mostly the
// host's cost; with 2-4 threads on 792 blocks the GPU becomes the bound (~9 ns per task on the
// H100 machine). Every result is checked: in "slots" and "cq" every (block, task) must come
// back exactly once and in ring order per block, in "slots + queues" every task exactly once.
//
// This is a model of the protocol, not the pool: one thread per block does the block's side,
// and the host side is the slot traffic, plus the queues' hand-offs in "slots + queues".
// Build and run on the GPU machine from the repository root:
//   nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 lab/probes/completion_probe.cu \
//     -o /tmp/completion_probe && /tmp/completion_probe [blocks] [tasks per block]
#include <cuda_runtime.h>
#include <cuda/atomic>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr unsigned kDepth = 8;  // slots per block (the pool's default ring depth)

// A slot: the task's payload and (mode slots) its results, one line.
struct alignas(64) Slot {
  std::uint64_t payload;
  std::uint64_t result;
};
// A block's control line: the state of each of its slots (state = generation * 4 + kind).
struct alignas(64) Control {
  std::uint32_t state[16];
};
constexpr std::uint32_t kReady = 1, kFinished = 2;
// A completion: which slot ended and its results; `tag` (stored last, release) is the round
// of the queue the entry belongs to, + 1, so a stale entry is never taken for a new one.
struct alignas(32) Completion {
  std::uint64_t result;
  std::uint32_t block_slot;
  std::uint32_t pad;
  std::uint64_t pad2;
  std::uint32_t pad3;
  std::uint32_t tag;
};

struct Shared {
  Slot* slots;        // [blocks][kDepth], pinned, mapped
  Control* control;   // [blocks]
  Completion* cq;     // [lanes][cap]
  unsigned* cq_tail;  // [lanes], device memory
  unsigned blocks, tasks, lanes, cap;
  int mode;  // 0: slots, 1: cq, 2: slots + queues
};

__global__ void blocks_kernel(Shared s) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x;
  const unsigned per_lane = (s.blocks + s.lanes - 1) / s.lanes;
  const unsigned lane = b / per_lane;
  for (unsigned k = 0; k < s.tasks; ++k) {
    const unsigned j = k % kDepth;
    const std::uint32_t gen = k / kDepth + 1;
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> state(s.control[b].state[j]);
    unsigned backoff = 32;
    // acquire: pairs with the host's release store of READY (the payload is visible).
    while (state.load(cuda::memory_order_acquire) != gen * 4 + kReady) {
      __nanosleep(backoff);
      backoff = backoff < 2048 ? backoff * 2 : 2048;
    }
    const std::uint64_t result = 2 * s.slots[b * kDepth + j].payload + 1;
    if (s.mode != 1) {  // slots, and slots + queues
      s.slots[b * kDepth + j].result = result;
      // release: the result before FINISHED (pairs with the host's acquire load).
      state.store(gen * 4 + kFinished, cuda::memory_order_release);
    } else {
      const unsigned idx = atomicAdd(&s.cq_tail[lane], 1u);
      Completion& c = s.cq[static_cast<std::size_t>(lane) * s.cap + idx % s.cap];
      c.result = result;
      c.block_slot = b * kDepth + j;
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> tag(c.tag);
      // release: the entry's fields before its tag (pairs with the host's acquire load).
      tag.store(idx / s.cap + 1, cuda::memory_order_release);
    }
  }
}

std::uint64_t payload_of(unsigned b, unsigned k) { return (std::uint64_t{b} << 32) | k; }

// The host's side for blocks [first, last): load the first kDepth tasks of each, then collect
// and reload until every task came back. Returns the number of wrong or out-of-order results.
// Mode "slots" with pieces of the pool's lane added, one bit each (`extras`), to see what each
// costs: the IDLE store after collecting; collecting every block before reloading any (the
// pool's two passes, instead of reloading a slot as soon as it is collected); a 40-byte
// per-slot record written at load and read at collect (PoolCore::SlotMeta); each result
// staged as a 48-byte record in a vector (PoolCore::stage; the vector is emptied every round,
// handed to nobody).
constexpr unsigned kIdleStore = 1, kTwoPass = 2, kSlotMeta = 4, kStage = 8;
struct Meta {  // as PoolCore::SlotMeta
  std::uint64_t tag;
  std::uint32_t out, type, size, callback;
  bool lost;
  std::chrono::steady_clock::time_point loaded;
};
struct Staged {  // as TaskRecord<16>
  std::uint32_t type, size;
  std::uint64_t tag;
  std::uint32_t status, pad;
  alignas(16) unsigned char payload[16];
};

std::uint64_t lane_main(const Shared& s, unsigned lane, unsigned first, unsigned last,
                        unsigned extras = 0) {
  std::vector<unsigned> loaded(last - first, 0), collected(last - first, 0);
  std::vector<Meta> meta(extras & kSlotMeta ? static_cast<std::size_t>(last - first) * kDepth : 0);
  std::vector<Staged> staged;
  std::vector<unsigned> reload;  // kTwoPass: blocks to reload after the collect pass
  const auto round_start = std::chrono::steady_clock::now();
  auto load = [&](unsigned b) {
    const unsigned k = loaded[b - first]++;
    const unsigned j = k % kDepth;
    if (extras & kSlotMeta) {
      meta[(b - first) * kDepth + j] = Meta{payload_of(b, k), 0, 1, 8, 0, false, round_start};
    }
    s.slots[b * kDepth + j].payload = payload_of(b, k);
    // release: the payload before READY (pairs with the block's acquire load).
    std::atomic_ref<std::uint32_t>(s.control[b].state[j])
        .store((k / kDepth + 1) * 4 + kReady, std::memory_order_release);
  };
  for (unsigned b = first; b < last; ++b) {
    for (unsigned d = 0; d < kDepth && d < s.tasks; ++d) load(b);
  }
  std::uint64_t wrong = 0;
  const std::uint64_t total = std::uint64_t{last - first} * s.tasks;
  std::uint64_t done = 0;
  auto check = [&](unsigned b, unsigned j, std::uint64_t result) {
    const unsigned k = collected[b - first]++;
    std::uint64_t expect = payload_of(b, k);
    if (extras & kSlotMeta) expect = meta[(b - first) * kDepth + j].tag;
    if (k % kDepth != j || result != 2 * expect + 1) ++wrong;
    if (extras & kStage) {
      Staged& r = staged.emplace_back();
      r.type = 1;
      r.size = 8;
      r.tag = expect;
      r.status = 0;
      std::memcpy(r.payload, &result, 8);
    }
    if (extras & kIdleStore) {
      // relaxed: as PoolCore::collect_block (the block does not act on IDLE).
      std::atomic_ref<std::uint32_t>(s.control[b].state[j]).store(0, std::memory_order_relaxed);
    }
    ++done;
    if (loaded[b - first] < s.tasks) {
      if (extras & kTwoPass) {
        reload.push_back(b);
      } else {
        load(b);
      }
    }
  };
  if (s.mode == 0) {
    while (done < total) {
      // As PoolCore::collect: ask for every control line first, then visit them.
      for (unsigned b = first; b < last; ++b) __builtin_prefetch(&s.control[b], 0, 0);
      for (unsigned b = first; b < last; ++b) {
        while (collected[b - first] < loaded[b - first]) {
          const unsigned k = collected[b - first];
          const unsigned j = k % kDepth;
          // acquire: pairs with the block's release store of FINISHED.
          if (std::atomic_ref<std::uint32_t>(s.control[b].state[j])
                  .load(std::memory_order_acquire) != (k / kDepth + 1) * 4 + kFinished) {
            break;
          }
          check(b, j, s.slots[b * kDepth + j].result);
        }
      }
      for (const unsigned b : reload) load(b);
      reload.clear();
      staged.clear();
    }
  } else {
    Completion* cq = s.cq + static_cast<std::size_t>(lane) * s.cap;
    for (std::uint64_t head = 0; done < total; ++head) {
      Completion& c = cq[head % s.cap];
      __builtin_prefetch(&cq[(head + 8) % s.cap], 0, 0);
      const std::uint32_t want = static_cast<std::uint32_t>(head / s.cap + 1);
      // acquire: pairs with the block's release store of the tag.
      while (std::atomic_ref<std::uint32_t>(c.tag).load(std::memory_order_acquire) != want) {
      }
      const unsigned bs = c.block_slot;
      check(bs / kDepth, bs % kDepth, c.result);
    }
  }
  return wrong;
}

// ---- mode 2: slots + queues (one host thread for all blocks) ----
struct Entry {  // a queued task, as PoolCore::Entry (40 bytes)
  std::uint32_t type, size;
  std::uint64_t tag;
  std::uint32_t out, callback;
  unsigned char payload[16];
};
struct Rec {  // a delivered task, as TaskRecord<16> (48 bytes)
  std::uint32_t type, size;
  std::uint64_t tag;
  std::uint32_t status, pad;
  alignas(16) unsigned char payload[16];
};
template <class T>
struct Handoff {  // vectors passed between two threads under a mutex, emptied ones returned
  std::mutex m;
  std::deque<std::vector<T>> full;     // under m
  std::vector<std::vector<T>> spares;  // under m
  std::atomic<std::size_t> queued{0};  // full.size(), a hint read without the lock
  void put(std::vector<T>& v) {
    std::lock_guard<std::mutex> lock(m);
    full.push_back(std::move(v));
    queued.store(full.size(), std::memory_order_relaxed);  // relaxed: a hint (under m)
    v = {};
    if (!spares.empty()) {
      v = std::move(spares.back());
      spares.pop_back();
    }
    v.clear();
  }
  bool get(std::vector<T>& v) {
    if (queued.load(std::memory_order_relaxed) == 0) return false;  // relaxed: a hint
    std::lock_guard<std::mutex> lock(m);
    if (full.empty()) return false;
    v = std::move(full.front());
    full.pop_front();
    queued.store(full.size(), std::memory_order_relaxed);  // relaxed: a hint (under m)
    return true;
  }
  void give_back(std::vector<T>& v) {
    v.clear();
    std::lock_guard<std::mutex> lock(m);
    spares.push_back(std::move(v));
  }
};

std::uint64_t queues_lane(const Shared& s, Handoff<Entry>& in, Handoff<Rec>& out) {
  const unsigned blocks = s.blocks;
  const std::uint64_t total = std::uint64_t{blocks} * s.tasks;
  std::vector<unsigned> loaded(blocks, 0), collected(blocks, 0);
  std::vector<std::uint64_t> meta(static_cast<std::size_t>(blocks) * kDepth);  // task tag
  std::vector<Entry> batch, chunk;  // chunk: the input vector being read, from position at
  std::size_t at = 0;
  std::vector<Rec> staged;
  std::uint64_t done = 0, taken = 0;
  unsigned cursor = 0;  // next block to try loading
  while (done < total) {
    // Collect (control lines asked for first, as PoolCore::collect).
    for (unsigned b = 0; b < blocks; ++b) __builtin_prefetch(&s.control[b], 0, 0);
    for (unsigned b = 0; b < blocks; ++b) {
      while (collected[b] < loaded[b]) {
        const unsigned k = collected[b];
        const unsigned j = k % kDepth;
        // acquire: pairs with the block's release store of FINISHED.
        if (std::atomic_ref<std::uint32_t>(s.control[b].state[j]).load(std::memory_order_acquire) !=
            (k / kDepth + 1) * 4 + kFinished) {
          break;
        }
        Rec& r = staged.emplace_back();
        r.type = 1;
        r.size = 8;
        r.tag = meta[b * kDepth + j];
        r.status = 0;
        const std::uint64_t result = s.slots[b * kDepth + j].result;
        std::memcpy(r.payload, &result, 8);
        ++collected[b];
        ++done;
      }
    }
    if (!staged.empty()) out.put(staged);
    // Take what fits in the free slots, then load it.
    // Slots a task can go to: a block takes exactly s.tasks tasks (the kernel's count).
    std::size_t usable = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      usable += std::min<unsigned>(kDepth - (loaded[b] - collected[b]), s.tasks - loaded[b]);
    }
    batch.clear();
    while (batch.size() < usable && taken < total) {
      if (at == chunk.size()) {
        if (!chunk.empty() || chunk.capacity() > 0) in.give_back(chunk);
        at = 0;
        if (!in.get(chunk)) break;
      }
      const std::size_t n = std::min(usable - batch.size(), chunk.size() - at);
      batch.insert(batch.end(), chunk.begin() + static_cast<std::ptrdiff_t>(at),
                   chunk.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      taken += n;
    }
    for (const Entry& e : batch) {
      while (loaded[cursor] - collected[cursor] >= kDepth || loaded[cursor] >= s.tasks) {
        cursor = cursor + 1 == blocks ? 0 : cursor + 1;
      }
      const unsigned b = cursor;
      cursor = cursor + 1 == blocks ? 0 : cursor + 1;
      const unsigned k = loaded[b]++;
      const unsigned j = k % kDepth;
      meta[b * kDepth + j] = e.tag;
      std::memcpy(&s.slots[b * kDepth + j].payload, e.payload, 8);
      // release: the payload before READY (pairs with the block's acquire load).
      std::atomic_ref<std::uint32_t>(s.control[b].state[j])
          .store((k / kDepth + 1) * 4 + kReady, std::memory_order_release);
    }
  }
  return 0;
}

double run(unsigned blocks, unsigned tasks, unsigned lanes, int mode, bool& ok,
           unsigned extras = 0) {
  Shared s{};
  s.blocks = blocks;
  s.tasks = tasks;
  s.lanes = lanes;
  s.mode = mode;
  const unsigned per_lane = (blocks + lanes - 1) / lanes;
  s.cap = per_lane * kDepth;  // a lane's slots: never more completions outstanding
  CHECK(cudaHostAlloc(&s.slots, sizeof(Slot) * blocks * kDepth, cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&s.control, sizeof(Control) * blocks, cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&s.cq, sizeof(Completion) * lanes * s.cap, cudaHostAllocMapped));
  std::memset(s.slots, 0, sizeof(Slot) * blocks * kDepth);
  std::memset(s.control, 0, sizeof(Control) * blocks);
  std::memset(s.cq, 0, sizeof(Completion) * lanes * s.cap);
  CHECK(cudaMalloc(&s.cq_tail, sizeof(unsigned) * lanes));
  CHECK(cudaMemset(s.cq_tail, 0, sizeof(unsigned) * lanes));
  Shared d = s;  // the device's view: the mapped addresses (UVA: the same pointers)
  blocks_kernel<<<blocks, 32>>>(d);
  CHECK(cudaGetLastError());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> wrong(lanes, 0);
  if (mode == 2) {
    const std::uint64_t total = std::uint64_t{blocks} * tasks;
    Handoff<Entry> in;
    Handoff<Rec> out;
    // The pusher: records -> entries, 4096 at a time (as push_batch). Records made before the
    // timing would be fairer; made here they are cheap next to the copy (one store each).
    threads.emplace_back([&] {
      std::vector<Rec> records(4096);
      std::vector<Entry> chunk;
      for (std::uint64_t i = 0; i < total; i += 4096) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(4096, total - i));
        for (std::size_t k = 0; k < n; ++k) {
          records[k].type = 1;
          records[k].size = 8;
          records[k].tag = i + k;
          std::memcpy(records[k].payload, &records[k].tag, 8);
        }
        chunk.clear();
        for (std::size_t k = 0; k < n; ++k) {
          Entry e;
          e.type = records[k].type;
          e.size = records[k].size;
          e.tag = records[k].tag;
          e.out = 0;
          e.callback = 0;
          std::memcpy(e.payload, records[k].payload, 16);
          chunk.push_back(e);
        }
        in.put(chunk);
      }
    });
    // The popper: copies each delivered record out and checks it (as pop_batch and a user).
    std::uint64_t bad = 0;
    std::thread popper([&] {
      std::vector<unsigned char> seen(total, 0);
      std::vector<Rec> v, got;
      for (std::uint64_t n = 0; n < total;) {
        if (!out.get(v)) continue;
        got.assign(v.begin(), v.end());
        out.give_back(v);
        for (const Rec& r : got) {
          std::uint64_t result;
          std::memcpy(&result, r.payload, 8);
          if (r.tag >= total || seen[r.tag]++ != 0 || result != 2 * r.tag + 1) ++bad;
        }
        n += got.size();
      }
    });
    (void)queues_lane(s, in, out);
    for (auto& t : threads) t.join();
    popper.join();
    threads.clear();
    wrong[0] = bad;
  }
  for (unsigned l = 0; mode != 2 && l < lanes; ++l) {
    threads.emplace_back([&, l] {
      const unsigned first = l * per_lane, last = std::min(blocks, first + per_lane);
      if (first < last) wrong[l] = lane_main(s, l, first, last, extras);
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(cudaDeviceSynchronize());
  std::uint64_t w = 0;
  for (auto x : wrong) w += x;
  ok = ok && w == 0;
  cudaFreeHost(s.slots);
  cudaFreeHost(s.control);
  cudaFreeHost(s.cq);
  cudaFree(s.cq_tail);
  return secs / (static_cast<double>(blocks) * tasks) * 1e9;
}

int main(int argc, char** argv) {
  const unsigned blocks = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 792;
  const unsigned tasks = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1000;
  if (blocks == 0 || tasks == 0) {
    std::fprintf(stderr, "usage: completion_probe [blocks > 0] [tasks per block > 0]\n");
    return 2;
  }
  bool ok = true;
  (void)run(blocks, tasks / 10 + 1, 1, 0, ok);  // warm-up (context, first touches)
  for (int rep = 0; rep < 3; ++rep) {
    for (unsigned lanes : {1u, 2u, 4u}) {
      const double a = run(blocks, tasks, lanes, 0, ok);
      const double b = run(blocks, tasks, lanes, 1, ok);
      std::printf(
          "rep %d, %u blocks x %u tasks, %u host thread(s): slots %.1f ns/task, "
          "completion queue %.1f ns/task\n",
          rep, blocks, tasks, lanes, a, b);
    }
    std::printf("rep %d, 1 host thread, slots with the pool's pieces (ns/task):", rep);
    for (unsigned extras : {0u, kIdleStore, kTwoPass, kSlotMeta, kStage, 15u}) {
      std::printf(" %s%s%s%s%s %.1f;", extras == 0 ? "none" : "",
                  extras & kIdleStore ? "+idle" : "", extras & kTwoPass ? "+two-pass" : "",
                  extras & kSlotMeta ? "+meta" : "", extras & kStage ? "+stage" : "",
                  run(blocks, tasks, 1, 0, ok, extras));
    }
    std::printf("\n");
    const double c = run(blocks, tasks, 1, 2, ok);
    std::printf(
        "rep %d, %u blocks x %u tasks, 1 host thread + pusher + popper: slots + queues "
        "%.1f ns/task\n",
        rep, blocks, tasks, c);
  }
  std::printf("results %s\n", ok ? "all correct, each once, in ring order" : "WRONG");
  return ok ? 0 : 1;
}
