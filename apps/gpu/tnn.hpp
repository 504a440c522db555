// apps/gpu/tnn.hpp - the T-nearest-neighbours application (seed 000 §4.3.1; docs/apps.md): for
// each of n points in d dimensions, the T others nearest to it (squared Euclidean distance,
// ties to the lower index). The GPU computes tiles of -2 X X^T (GemmTileBody tasks, the tiles
// on or above the diagonal), each into a buffer of its own that the host can read; the host
// keeps a max-heap of T per point and feeds it from each tile as soon as the tile's task is
// popped, while later tiles still run (on the popping thread, or on a CPU executor's workers).
// Written against the public API only.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/task_group.hpp>
#include <weft/gpu/pool.hpp>

#include "first_null.hpp"
#include "gemm_tile.hpp"

namespace apps::gpu {

/// A neighbour: squared distance, then index (the order of "nearer").
using Neighbour = std::pair<float, int>;

/// n points of d dimensions, as the tiles read them: column-major (n x d, for A) and row-major
/// (the same numbers, for B = X^T), and each point's squared norm.
struct PointSet {
  int n = 0, d = 0;
  std::vector<float> col_major, row_major, norms;
  /// Small integer coordinates (sums of their products are exact in FP32): a fixed seed.
  static PointSet random(int n, int d, std::uint64_t seed);
};

/// Throws std::invalid_argument, naming `caller` and the values, unless the set is whole:
/// n >= 2, d >= 1, n norms, n x d coordinates in each layout; and 1 <= t < n.
void check_tnn(const char* caller, const PointSet& points, int t);

/// The T nearest of every point, nearest first, by brute force on the CPU. Throws as check_tnn
/// does.
std::vector<std::vector<Neighbour>> reference_tnn(const PointSet& p, int t);

/// Keeps the T nearest neighbours of every point: a max-heap of T per point, the farthest kept
/// on top, all of them in one array. Most candidates are farther than a full heap's top, so
/// offer() turns those away inline by one comparison with the point's bound; only the others
/// reach the heap, where each neighbour is one 64-bit key (the distance's bits in the floats'
/// order, then the index), so that the heap compares integers. Candidates are indices >= 0;
/// -0.0 counts as 0, and a NaN distance is never kept. Calls for different points may run at
/// once; calls for one point may not.
class NeighbourHeaps {
 public:
  /// Throws std::invalid_argument for n < 1 or t < 1.
  NeighbourHeaps(int n, int t);
  /// Keeps `candidate` among `point`'s T nearest if it is nearer (in Neighbour's order) than the
  /// farthest kept, or while fewer than T are kept. Throws std::out_of_range for a point not in
  /// [0, n), std::invalid_argument for a negative candidate index that reaches the heap.
  void offer(int point, Neighbour candidate) {
    check_points(point, 1);
    // Strictly farther than the farthest kept: never kept (a tie in distance goes on, to be
    // decided by the index; a NaN distance goes on, to be turned away there).
    if (candidate.first > bound_[static_cast<std::size_t>(point)]) return;
    offer_to_heap(point, candidate);
  }
  /// Offers candidates first_candidate, first_candidate + 1, ... at distances `dist` to `point`
  /// (a run of one point's pairs, as a row of the Gram matrix holds them). Throws as offer().
  void offer_run(int point, int first_candidate, std::span<const float> dist);
  /// Offers `candidate` at distance dist[q] to point first_point + q, for each q (a run of
  /// points sharing one candidate, as a column of a Gram tile holds them). Throws as offer(),
  /// also for a run that passes point n - 1.
  void offer_to_run(int first_point, int candidate, std::span<const float> dist);
  /// The distance above which `point` keeps no candidate: +infinity until it keeps T. Throws
  /// std::out_of_range for a point not in [0, n).
  [[nodiscard]] float bound(int point) const {
    check_points(point, 1);
    return bound_[static_cast<std::size_t>(point)];
  }
  /// Each point's neighbours, nearest first.
  [[nodiscard]] std::vector<std::vector<Neighbour>> sorted() const;

 private:
  // Points [first, first + count) must lie in [0, n).
  void check_points(int first, std::size_t count) const {
    if (first < 0 || static_cast<std::size_t>(first) + count > bound_.size()) {
      throw std::out_of_range("apps::gpu::NeighbourHeaps: points " + std::to_string(first) +
                              " .. " + std::to_string(static_cast<std::size_t>(first) + count) +
                              " past the " + std::to_string(bound_.size()) + " it holds");
    }
  }
  void offer_to_heap(int point, Neighbour candidate);

  std::size_t t_;
  std::vector<std::uint64_t> kept_;  // point p's heap of keys: [p t, p t + size_[p])
  std::vector<std::size_t> size_;    // how many each point keeps, up to t_
  std::vector<float> bound_;         // a full heap's top distance, else +infinity
};

/// The seed's baseline's host half: each point's T nearest, nearest first, from the whole of
/// G = -2 X X^T (n x n, column-major, where the host reads it), each task of `workers` offering
/// whole rows of G (read as columns: G is symmetric) to the heaps of a band of 64 points.
/// Throws as check_tnn does, and for a null `gram`.
std::vector<std::vector<Neighbour>> tnn_from_gram(weft::cpu::Executor& workers,
                                                  const PointSet& points, const float* gram, int t);

/// The pairs of tile (r, c) of -2 X X^T (in `g`, leading dimension 64) offered to the heaps
/// of its row points (rows side) or of its column points (columns side); a diagonal tile
/// offers each pair once per side, a point never itself.
inline void offer_tile(NeighbourHeaps& heaps, const PointSet& points, const float* g, int r, int c,
                       bool rows_side) {
  constexpr int kTile = SgemmTile::kTile;
  const int rows = std::min(kTile, points.n - r * kTile),
            cols = std::min(kTile, points.n - c * kTile);
  const float* row_norms = points.norms.data() + r * kTile;
  float dist[kTile];
  // Column jj of the tile holds point j's distances to the tile's row points, contiguous. A
  // diagonal tile offers only the pairs above its diagonal (i < j), once to each side.
  for (int jj = 0; jj < cols; ++jj) {
    const int j = c * kTile + jj, run = r == c ? std::min(rows, jj) : rows;
    const float j_norm = points.norms[static_cast<std::size_t>(j)];
    const float* column = g + jj * kTile;
    for (int ii = 0; ii < run; ++ii) dist[ii] = row_norms[ii] + j_norm + column[ii];
    const std::span<const float> run_dist(dist, static_cast<std::size_t>(run));
    if (rows_side) {
      heaps.offer_to_run(r * kTile, j, run_dist);
    } else {
      heaps.offer_run(j, r * kTile, run_dist);
    }
  }
}

/// Runs TNN through `pool`. `col_major`, `row_major`: the points where the pool's blocks reach
/// them; `buffers`: `slots` buffers of 64 x 64 floats, one per task in flight, where the
/// blocks write and the host reads (pinned host memory on the device backend). With
/// `heap_workers` (call it from outside that executor: it waits for its tasks), the tiles of
/// each pop are offered by at most one task per worker of that executor (a lock per band of 64
/// points), whose tiles' buffers go to later tiles once all of them are offered; without, the
/// popping thread offers them itself. Returns each point's T nearest, nearest first. Throws
/// std::invalid_argument as check_tnn does, for a null array, for slots outside
/// [1, kMaxTnnSlots], and when called from a worker of `heap_workers`.
inline constexpr std::size_t kMaxTnnSlots = std::size_t{1} << 20;  // the tag's slot field
template <class Pool>
std::vector<std::vector<Neighbour>> tnn_on_pool(Pool& pool, const PointSet& points,
                                                const float* col_major, const float* row_major,
                                                float* buffers, std::size_t slots, int t,
                                                weft::cpu::Executor* heap_workers = nullptr) {
  using Record = typename Pool::Record;
  constexpr int kTile = SgemmTile::kTile;
  check_tnn("tnn_on_pool", points, t);
  if (const char* null =
          first_null({{"col_major", col_major}, {"row_major", row_major}, {"buffers", buffers}})) {
    throw std::invalid_argument(std::string("apps::gpu::tnn_on_pool: ") + null + " is null");
  }
  if (slots == 0 || slots > kMaxTnnSlots) {
    throw std::invalid_argument("apps::gpu::tnn_on_pool: slots must be in [1, 2^20] (got " +
                                std::to_string(slots) + ")");
  }
  if (heap_workers != nullptr && heap_workers->this_worker_index() >= 0) {
    throw std::invalid_argument(
        "apps::gpu::tnn_on_pool: called from a worker of heap_workers (its heap tasks would "
        "wait for this thread's pops)");
  }
  const int tiles = (points.n + kTile - 1) / kTile;
  // (tile row, tile column), column >= row, one diagonal after the other: consecutive tiles
  // then touch other bands of points, so the heap workers' band locks rarely meet (in row
  // order every tile of a row would wait for the same row band).
  std::vector<std::pair<int, int>> work;
  for (int d = 0; d < tiles; ++d) {
    for (int r = 0; r + d < tiles; ++r) work.emplace_back(r, r + d);
  }
  NeighbourHeaps heaps(points.n, t);
  auto task = [&](std::size_t w, std::size_t slot) {
    const auto [r, c] = work[w];
    float* out = buffers + slot * kTile * kTile;
    // This tile of -2 X X^T, into the slot's buffer (leading dimension 64); the tag carries
    // the work item and the slot.
    SgemmTile::Payload p{col_major + r * kTile,
                         row_major + static_cast<std::size_t>(c) * kTile * points.d,
                         out,
                         std::min(kTile, points.n - r * kTile),
                         std::min(kTile, points.n - c * kTile),
                         points.d,
                         points.n,
                         points.d,
                         kTile,
                         0,
                         0,
                         -2.0f,
                         0.0f};
    p.c_through_shared = true;  // the buffer is mapped host memory on a GPU: whole lines
    return Record::template make<SgemmTile>(p, (static_cast<std::uint64_t>(w) << 20) | slot);
    static_assert(kMaxTnnSlots == std::size_t{1} << 20, "the tag's slot field is 20 bits");
  };
  // The free buffers; a tile's buffer is free again once its heap task has offered every tile
  // it holds.
  std::mutex free_mutex;
  std::condition_variable freed;
  std::vector<std::size_t> free_slots(slots);
  for (std::size_t s = 0; s < slots; ++s) free_slots[s] = slots - 1 - s;
  std::vector<std::pair<int, int>> slot_tile(slots);  // the tile a slot's buffer holds
  std::vector<std::mutex> bands(heap_workers != nullptr ? static_cast<std::size_t>(tiles) : 0);
  std::vector<Record> batch, done(slots);
  std::vector<std::size_t> popped;
  // Offers both sides of the tiles in `held` and gives their buffers back. It never throws: it
  // keeps the first error and gives every buffer back all the same, so that the loop below
  // cannot wait for a buffer that never returns.
  std::exception_ptr heap_error;
  auto offer_tiles = [&](std::span<const std::size_t> held) {
    try {
      for (const std::size_t slot : held) {
        const auto [r, c] = slot_tile[slot];
        const float* g = buffers + slot * kTile * kTile;
        for (const bool rows_side : {true, false}) {
          std::unique_lock<std::mutex> band;
          if (!bands.empty())
            band = std::unique_lock(bands[static_cast<std::size_t>(rows_side ? r : c)]);
          offer_tile(heaps, points, g, r, c, rows_side);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(free_mutex);
      if (!heap_error) heap_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(free_mutex);
    free_slots.insert(free_slots.end(), held.begin(), held.end());
    freed.notify_one();
  };
  // Declared after offer_tiles: on unwinding, the group waits for its tasks before offer_tiles
  // goes.
  std::optional<weft::cpu::TaskGroup> group;
  if (heap_workers != nullptr) group.emplace(*heap_workers);
  // Before an error leaves: the heap tasks end and the tiles still on the GPU are popped, so
  // that nothing writes the caller's buffers or reads this frame afterwards.
  auto drain = [&](std::size_t on_gpu) {
    if (group) group->wait();
    for (std::size_t left = on_gpu; left > 0;)
      left -= pool.pop_batch(std::span<Record>(done).first(std::min(left, done.size())));
  };
  // The tiles of one pop go to the heap workers as at most one task per worker, each offering
  // a run of whole tiles: a task per tile, or per side, would make the popping thread's spawns
  // (and the workers' hunt for them) cost more than the heaps (decision 036).
  const std::size_t task_count = heap_workers != nullptr ? heap_workers->num_workers() : 1;
  std::size_t next = 0, finished = 0, in_flight = 0;
  while (finished < work.size()) {
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(free_mutex);
      // With nothing on the GPU, every buffer is with the heap workers: wait for one.
      if (in_flight == 0) freed.wait(lock, [&] { return !free_slots.empty() || heap_error; });
      if (heap_error) {
        lock.unlock();
        drain(in_flight);
        std::rethrow_exception(heap_error);
      }
      while (next < work.size() && !free_slots.empty()) {
        batch.push_back(task(next++, free_slots.back()));
        free_slots.pop_back();
      }
    }
    if (!batch.empty()) pool.push_batch(batch);
    in_flight += batch.size();
    const std::size_t got = pool.pop_batch(done);
    in_flight -= got;
    popped.clear();
    for (std::size_t k = 0; k < got; ++k) {
      if (!done[k].ok()) {
        const std::string status = weft::gpu::to_string(done[k].status);
        // The tiles popped with it are back on the host: only the heap tasks remain.
        drain(in_flight);
        throw std::runtime_error("apps::gpu::tnn_on_pool: a tile task ended " + status);
      }
      const std::size_t w = done[k].tag >> 20, slot = done[k].tag & ((1u << 20) - 1);
      slot_tile[slot] = work[w];  // published to the heap task by its spawn
      popped.push_back(slot);
    }
    finished += got;
    if (!group) {
      offer_tiles(popped);
      continue;
    }
    const std::size_t per_task = (popped.size() + task_count - 1) / task_count;
    try {
      for (std::size_t first = 0; first < popped.size(); first += per_task) {
        const auto last = static_cast<std::ptrdiff_t>(std::min(popped.size(), first + per_task));
        group->spawn([&offer_tiles, held = std::vector<std::size_t>(
                                        popped.begin() + static_cast<std::ptrdiff_t>(first),
                                        popped.begin() + last)] { offer_tiles(held); });
      }
    } catch (...) {  // the executor shut down, say: the tiles on the GPU still end here
      drain(in_flight);
      throw;
    }
  }
  if (group) group->wait();
  if (heap_error) std::rethrow_exception(heap_error);
  return heaps.sorted();
}

}  // namespace apps::gpu
