// apps/gpu/kmeans.hpp - the K-means application (seed 000 §4.3.2; docs/apps.md): Lloyd's
// iterations over n points in d dimensions with K centroids. Each iteration the pool assigns
// every point to its nearest centroid (KmeansAssign tasks of 64 points each: dot products with
// every centroid as GEMM tiles, then the argmin of |c|^2 - 2 x.c), and the host adds each
// task's points to their centroids' sums as the task is popped, then moves each centroid to
// the mean of its points. Written against the public API only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/task_group.hpp>
#include <weft/gpu/pool.hpp>

#include "first_null.hpp"
#include "gemm_tile.hpp"

namespace apps::gpu {

struct KmeansAssign {
  static constexpr std::uint32_t kId = 131;
  static constexpr int kPoints = 64;  // points per task
  static constexpr int kMaxCentroids = 128;
  // The GEMM tile body's staging, then the scores.
  static constexpr std::size_t kScoresOffset = SgemmTile::kSharedBytes;
  static constexpr std::size_t kSharedBytes =
      kScoresOffset + sizeof(float) * kPoints * kMaxCentroids;
  struct Payload {
    const float* points;     // n x d, row-major
    const float* centroids;  // k x d, row-major
    const float* norms;      // |c|^2 of each centroid
    int* labels;             // n
    int d, k, first, count;
  };
  /// |c|^2 - 2 x.c: the squared distance less |x|^2, which every centroid shares.
  WEFT_HD APPS_GEMM_INLINE static float score(const Payload& p, int point, int centroid) {
    const float* x = p.points + static_cast<std::size_t>(point) * p.d;
    const float* c = p.centroids + static_cast<std::size_t>(centroid) * p.d;
    float dot = 0.0f;
    for (int t = 0; t < p.d; ++t) dot += x[t] * c[t];
    return p.norms[centroid] - 2.0f * dot;
  }
  // The dot products of the task's points with 64 centroids at a time are a GEMM tile (points
  // as A, row-major; centroids as B), summed in order of d as score() does; their scores go to
  // shared memory, then each thread takes the argmin of a point's row.
  WEFT_HD static void run(Payload& payload, const weft::gpu::BlockContext& ctx) {
    // A copy: `payload` lives in the block's shared memory, where the scores' stores would
    // make the compiler read its fields again (docs/gpu.md, "Task types").
    const Payload p = payload;
    auto* s = reinterpret_cast<float*>(static_cast<unsigned char*>(ctx.shared()) +
                                       kScoresOffset);  // s[q * k + c]
#if defined(__CUDA_ARCH__)
    if (ctx.threads() < SgemmTile::kMicroTiles) {  // too few threads for the tile body
      for (int e = ctx.thread(); e < p.count * p.k; e += ctx.threads())
        s[e] = score(p, p.first + e / p.k, e % p.k);
      ctx.sync();
      argmin(p, ctx, s);
      return;
    }
#endif
    for (int c0 = 0; c0 < p.k; c0 += SgemmTile::kTile) {
      SgemmTile::Payload g{p.points + static_cast<std::size_t>(p.first) * p.d,
                           p.centroids + static_cast<std::size_t>(c0) * p.d,
                           nullptr,
                           p.count,
                           p.k - c0,
                           p.d,
                           p.d,
                           p.d,
                           0,
                           0,
                           0,
                           1.0f,
                           0.0f};
      g.a_transposed = true;
      float acc[SgemmTile::kMaxMicroPerThread][SgemmTile::kMicroRows][SgemmTile::kMicroCols] = {};
      SgemmTile::accumulate(g, ctx, acc);
      for (int i = 0; i < SgemmTile::kMaxMicroPerThread; ++i) {
        const int v = ctx.thread() + i * ctx.threads();
        if (v >= SgemmTile::kMicroTiles) break;
        for (int r = 0; r < SgemmTile::kMicroRows; ++r) {
          const int q = SgemmTile::micro_row(v) + r;
          for (int j = 0; j < SgemmTile::kMicroCols; ++j) {
            const int c = c0 + SgemmTile::micro_col(v) + j;
            if (q < p.count && c < p.k) s[q * p.k + c] = p.norms[c] - 2.0f * acc[i][r][j];
          }
        }
      }
    }
    ctx.sync();
    argmin(p, ctx, s);
  }
  WEFT_HD APPS_GEMM_INLINE static void argmin(const Payload p, const weft::gpu::BlockContext& ctx,
                                              const float* s) {
    for (int q = ctx.thread(); q < p.count; q += ctx.threads()) {
      int best = 0;
      for (int c = 1; c < p.k; ++c) {
        if (s[q * p.k + c] < s[q * p.k + best]) best = c;  // ties: the lower index
      }
      p.labels[p.first + q] = best;
    }
  }
};

struct KmeansResult {
  std::vector<float> centroids;  // k x d
  std::vector<int> labels;       // n
};

/// |c|^2 of each of the k x d centroids, into norms (k entries).
void centroid_norms(std::span<const float> centroids, int d, std::vector<float>& norms);

/// The per-centroid sums and counts of points an iteration has assigned so far (double sums:
/// exact for the integer-valued test data in any order of addition).
struct CentroidSums {
  std::vector<double> sums;  // k x d
  std::vector<int> counts;   // k
  void reset(int k, int d);
  /// Adds the points [first, first + count) to the sums and counts of their labels (each in
  /// [0, k): unchecked, for the hot loop; update_centroids checks labels it is given).
  void add(std::span<const float> points, int d, std::span<const int> labels, int first, int count);
  /// Moves each centroid to the mean of its points (a centroid with none stays).
  void move(int d, std::vector<float>& centroids) const;
};

/// How many partial sums n points take on `workers`: one per 2048 points (a part costs k x d
/// doubles to clear and to combine), at most one per worker, at least one.
int partial_sums_for(const weft::cpu::Executor& workers, int n);

/// Resets `total` to k x d and adds every part into it, one task per range of centroids.
void combine_sums(std::span<const CentroidSums> parts, int k, int d, CentroidSums& total,
                  weft::cpu::Executor& workers);

/// Moves each centroid to the mean of its points (a centroid with none stays); with `workers`,
/// the points are cut into ranges, each summed into sums of its own by a task on that executor
/// (whole rows of points: what the memory streams best), and the sums combined. Throws
/// std::invalid_argument, naming the value, unless d >= 1, k >= 1, the points hold a row for
/// every label, centroids hold k rows and every label is in [0, k).
void update_centroids(std::span<const float> points, int d, std::span<const int> labels, int k,
                      std::vector<float>& centroids, weft::cpu::Executor* workers = nullptr);

/// Stores true in `flag` when it goes out of scope (relaxed: the flag only ends waits).
struct SetOnExit {
  std::atomic<bool>& flag;
  explicit SetOnExit(std::atomic<bool>& f) : flag(f) {}
  SetOnExit(const SetOnExit&) = delete;
  SetOnExit& operator=(const SetOnExit&) = delete;
  ~SetOnExit() { flag.store(true, std::memory_order_relaxed); }
};

/// Throws std::invalid_argument, naming `caller` and the values, unless d >= 1,
/// 1 <= k <= KmeansAssign::kMaxCentroids, iterations >= 1, and the points are whole rows of d,
/// at least k of them and at most INT_MAX.
void check_kmeans(const char* caller, std::span<const float> points, int d, int k, int iterations);

/// `iterations` of Lloyd's algorithm on the CPU, from the first k points as centroids. Throws
/// as check_kmeans does.
KmeansResult reference_kmeans(std::span<const float> points, int d, int k, int iterations);

/// The same through `pool`: `points_for_blocks` is the points where the blocks reach them,
/// `labels_for_blocks` n ints the blocks write and the host reads (pinned host memory on the
/// device backend), and `upload(host, count)` copies `count` floats (the centroids, then their
/// norms) to `centroids_for_blocks` and `norms_for_blocks` (what the blocks read) and returns
/// when they are there. The points of each popped task join their centroids' sums while the
/// GPU still assigns the rest: on the popping thread, or with `sum_workers`, by tasks on that
/// executor, each taking popped tasks' points in turn into sums of its own, combined at the
/// iteration's end (call it from outside that executor: it waits for those tasks; from one of
/// its workers it throws std::invalid_argument). Throws std::invalid_argument as check_kmeans
/// does, and for a null array or an empty `upload`, before any task is pushed. A task that
/// fails ends the call with std::runtime_error once the iteration's other tasks are popped.
template <class Pool>
KmeansResult kmeans_on_pool(Pool& pool, std::span<const float> points, int d, int k, int iterations,
                            const float* points_for_blocks, float* centroids_for_blocks,
                            float* norms_for_blocks, int* labels_for_blocks,
                            const std::function<void(const float*, float*, std::size_t)>& upload,
                            weft::cpu::Executor* sum_workers = nullptr) {
  using Record = typename Pool::Record;
  check_kmeans("kmeans_on_pool", points, d, k, iterations);
  if (const char* null = first_null({{"points_for_blocks", points_for_blocks},
                                     {"centroids_for_blocks", centroids_for_blocks},
                                     {"norms_for_blocks", norms_for_blocks},
                                     {"labels_for_blocks", labels_for_blocks}})) {
    throw std::invalid_argument(std::string("apps::gpu::kmeans_on_pool: ") + null + " is null");
  }
  if (!upload) throw std::invalid_argument("apps::gpu::kmeans_on_pool: upload is empty");
  if (sum_workers != nullptr && sum_workers->this_worker_index() >= 0) {
    throw std::invalid_argument(
        "apps::gpu::kmeans_on_pool: called from a worker of sum_workers (its summing tasks "
        "would wait for this thread's pops)");
  }
  const int n = static_cast<int>(points.size() / d);
  KmeansResult r;
  r.centroids.assign(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(k) * d);
  std::vector<Record> tasks;
  for (std::int64_t at = 0; at < n; at += KmeansAssign::kPoints) {  // 64 bits: n may near 2^31
    const auto first = static_cast<int>(at);
    const int count = n - first < KmeansAssign::kPoints ? n - first : KmeansAssign::kPoints;
    tasks.push_back(Record::template make<KmeansAssign>({points_for_blocks, centroids_for_blocks,
                                                         norms_for_blocks, labels_for_blocks, d, k,
                                                         first, count}));
  }
  std::vector<float> norms(static_cast<std::size_t>(k));
  std::vector<Record> done(tasks.size());
  const std::span<const int> labels(labels_for_blocks, static_cast<std::size_t>(n));
  CentroidSums sums;
  // With sum_workers: the popped tasks' point ranges in the order popped, of which `published`
  // are final (their labels read); each summing task takes the next ticket and sums that
  // range, once it is published, into its own part.
  std::vector<std::pair<int, int>> popped(tasks.size());
  std::atomic<std::size_t> published{0}, tickets{0};
  std::atomic<bool> abandoned{false};
  std::vector<CentroidSums> parts(
      sum_workers != nullptr ? static_cast<std::size_t>(partial_sums_for(*sum_workers, n)) : 0);
  auto follow_pops = [&](CentroidSums& part) {
    part.reset(k, d);
    // relaxed: the counter only hands out distinct tickets; the join publishes the sums.
    for (std::size_t t = tickets.fetch_add(1, std::memory_order_relaxed); t < popped.size();
         t = tickets.fetch_add(1, std::memory_order_relaxed)) {
      // acquire: pairs with the popping thread's release store, made after it popped task t.
      while (published.load(std::memory_order_acquire) <= t) {
        // relaxed: a flag that only ends the wait; nothing is read after it.
        if (abandoned.load(std::memory_order_relaxed)) return;
        std::this_thread::yield();
      }
      part.add(points, d, labels, popped[t].first, popped[t].second);
    }
  };
  for (int it = 0; it < iterations; ++it) {
    centroid_norms(r.centroids, d, norms);
    upload(r.centroids.data(), centroids_for_blocks, r.centroids.size());
    upload(norms.data(), norms_for_blocks, norms.size());
    pool.push_batch(tasks);
    // relaxed: published to the summing tasks by their spawns.
    published.store(0, std::memory_order_relaxed);
    tickets.store(0, std::memory_order_relaxed);
    abandoned.store(false, std::memory_order_relaxed);
    // Declared after everything its tasks use: on unwinding, it waits for them. The guard,
    // declared after it, goes first: whatever leaves this iteration, the summing tasks stop
    // waiting for pops that will not come.
    std::optional<weft::cpu::TaskGroup> group;
    const SetOnExit abandon_waits{abandoned};
    if (sum_workers != nullptr) {
      group.emplace(*sum_workers);
      for (CentroidSums& part : parts) group->spawn([&follow_pops, &part] { follow_pops(part); });
    } else {
      sums.reset(k, d);
    }
    for (std::size_t got = 0; got < tasks.size();) {
      const std::size_t m = pool.pop_batch(done);
      for (std::size_t j = 0; j < m; ++j) {
        if (!done[j].ok()) {
          // This iteration's other tasks are popped first: none is left to write the labels
          // afterwards, or to come back in the pool's next call.
          for (std::size_t left = tasks.size() - got - m; left > 0;)
            left -= pool.pop_batch(std::span<Record>(done).first(std::min(left, done.size())));
          throw std::runtime_error("apps::gpu::kmeans_on_pool: a task ended " +
                                   std::string(weft::gpu::to_string(done[j].status)));
        }
        const auto& p = done[j].template as<KmeansAssign>();
        if (group) {
          popped[got + j] = {p.first, p.count};
        } else {
          sums.add(points, d, labels, p.first, p.count);
        }
      }
      got += m;
      // release: the summing tasks read these tasks' labels after their acquire load.
      if (group) published.store(got, std::memory_order_release);
    }
    if (group) {
      if (group->wait() != weft::cpu::GroupStatus::complete) {
        throw std::runtime_error("apps::gpu::kmeans_on_pool: the summing tasks were cancelled");
      }
      combine_sums(parts, k, d, sums, *sum_workers);
    }
    r.labels.assign(labels.begin(), labels.end());
    sums.move(d, r.centroids);
  }
  return r;
}

}  // namespace apps::gpu
