// The device backend: resident kernels on one or more GPUs serving slots in pinned,
// host-mapped memory (docs/architecture.md: a ring of slots per resident block).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/graph_table.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/cuda_check.cuh"
#include "weft/gpu/detail/mailbox_record.hpp"
#include "weft/gpu/detail/slot.hpp"

namespace weft::gpu::detail {

namespace {

// Restores the calling thread's current device: the pool's set-up visits every GPU, and the
// caller's cudaMalloc after constructing a pool must still go where it went before.
class KeepCurrentDevice {
 public:
  KeepCurrentDevice() {
    if (cudaGetDevice(&device_) != cudaSuccess) device_ = -1;
  }
  ~KeepCurrentDevice() {
    if (device_ >= 0) cudaSetDevice(device_);
  }
  KeepCurrentDevice(const KeepCurrentDevice&) = delete;
  KeepCurrentDevice& operator=(const KeepCurrentDevice&) = delete;

 private:
  int device_ = -1;
};

struct DeviceLaunch {
  int device = 0;
  int first_block = 0;
  int blocks = 0;  // launched
  int rings = 0;   // of them serving rings: all but the mailbox server (on the last GPU)
  cudaStream_t stream = nullptr;        // the resident kernel's
  cudaStream_t aux = nullptr;           // reads of the poll counters while the kernel runs
  void* idle = nullptr;                 // DeviceIdle (device memory)
  unsigned long long* polls = nullptr;  // one counter per block (device memory)
  unsigned char* standby = nullptr;     // one flag per ring (device memory)
  int* placement = nullptr;             // ResidentArgs::placement (device memory)
  std::string name;
  int sms = 0;
};

// A GPU's graph table (docs/decisions/017-gpu-device-dependencies.md): the records and the
// completion ring in pinned mapped memory; a copy of the records (read by the blocks), the
// counts, poison and urgent flags, successors and the two ready queues in device memory
// (DeviceGraphArgs). The host writes a graph's records, counts and successors with copies it
// waits for before the first lane loads the roots' slots (whose READY, a release, the blocks
// acquire); the blocks read them with atomics or loads past L1 only (no stale L1 line of the
// last graph), and the queues and the counters are the blocks' alone.
class DeviceGraphTable final : public GraphTable {
 public:
  // Successors a graph may have per task, on average (the device memory is sized for it).
  static constexpr std::size_t kEdgesPerTask = 8;
  // The records go to the GPU in pieces of this many bytes (load_graph).
  static constexpr std::size_t kRecordPiece = std::size_t{1} << 21;

  DeviceGraphTable(int device, std::size_t capacity, std::size_t record_stride)
      : device_(device),
        capacity_(capacity),
        stride_(record_stride),
        slots_(std::bit_ceil(std::max<std::size_t>(capacity, 2))) {
    const KeepCurrentDevice keep;
    WEFT_CUDA_CHECK(cudaSetDevice(device));
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&records_), capacity * stride_,
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_records_), capacity * stride_));
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&completions_),
                                  2 * slots_ * sizeof(unsigned long long),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(completions_, 0, 2 * slots_ * sizeof(unsigned long long));
    auto words = [](std::size_t n) { return n * sizeof(std::uint32_t); };
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&inputs_), words(capacity)));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&poisoned_), words(capacity)));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&successor_start_), words(capacity + 1)));
    WEFT_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&successors_), words(capacity * kEdgesPerTask)));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&urgent_), words(capacity)));
    WEFT_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&cells_), 4 * slots_ * sizeof(unsigned long long)));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counters_),
                               kGraphCounterWords * sizeof(unsigned long long)));
    WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&cancelled_), sizeof(std::uint32_t)));
    // In both queues, cell i free for the ticket i (its sequence); every counter 0, not
    // cancelled.
    std::vector<unsigned long long> cells(4 * slots_, 0);
    for (std::size_t i = 0; i < slots_; ++i) cells[2 * i] = cells[2 * (slots_ + i)] = i;
    WEFT_CUDA_CHECK(
        cudaMemcpy(cells_, cells.data(), cells.size() * sizeof(cells[0]), cudaMemcpyHostToDevice));
    WEFT_CUDA_CHECK(cudaMemset(counters_, 0, kGraphCounterWords * sizeof(unsigned long long)));
    WEFT_CUDA_CHECK(cudaMemset(cancelled_, 0, sizeof(std::uint32_t)));
  }
  ~DeviceGraphTable() override {
    // Errors here cannot be reported from a destructor.
    cudaSetDevice(device_);
    for (void* p :
         {static_cast<void*>(device_records_), static_cast<void*>(inputs_),
          static_cast<void*>(poisoned_), static_cast<void*>(successor_start_),
          static_cast<void*>(successors_), static_cast<void*>(urgent_), static_cast<void*>(cells_),
          static_cast<void*>(counters_), static_cast<void*>(cancelled_)}) {
      if (p != nullptr) cudaFree(p);
    }
    if (records_ != nullptr) cudaFreeHost(records_);
    if (completions_ != nullptr) cudaFreeHost(completions_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  DeviceGraphTable(const DeviceGraphTable&) = delete;
  DeviceGraphTable& operator=(const DeviceGraphTable&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept override { return capacity_; }
  [[nodiscard]] std::size_t edge_capacity() const noexcept override {
    return capacity_ * kEdgesPerTask;
  }

  void load_graph(const std::shared_ptr<const GraphLayout>& shared,
                  const unsigned char* records) override {
    const GraphLayout& layout = *shared;
    const std::size_t tasks = layout.inputs.size();
    if (tasks > capacity_ || layout.successors.size() > edge_capacity()) {
      throw std::logic_error("weft::gpu graph table: a graph larger than the table was loaded");
    }
    const KeepCurrentDevice keep;
    WEFT_CUDA_CHECK(cudaSetDevice(device_));
    // The records into pinned memory a piece at a time, each piece's copy to the GPU issued as
    // soon as it is there: the transfer of one piece overlaps the host's copy of the next.
    const std::size_t bytes = tasks * stride_;
    for (std::size_t at = 0; at < bytes; at += kRecordPiece) {
      const std::size_t piece = std::min(kRecordPiece, bytes - at);
      std::memcpy(records_ + at, records + at, piece);
      WEFT_CUDA_CHECK(cudaMemcpyAsync(device_records_ + at, records_ + at, piece,
                                      cudaMemcpyHostToDevice, stream_));
    }
    auto copy = [&](std::uint32_t* to, const std::vector<std::uint32_t>& from) {
      if (from.empty()) return;
      WEFT_CUDA_CHECK(cudaMemcpyAsync(to, from.data(), from.size() * sizeof(std::uint32_t),
                                      cudaMemcpyHostToDevice, stream_));
    };
    // The counts and poison flags are the blocks' to change: written for every graph. The
    // successors and urgent flags they only read: a layout still in the table (the same
    // GraphShape pushed again) keeps them.
    copy(inputs_, layout.inputs);
    // Copies only, no memset: a memset may be a kernel, which could not start while the
    // resident kernel holds every SM (its stream would wait forever).
    zeros_.assign(tasks, 0);
    copy(poisoned_, zeros_);
    if (shared != loaded_) {
      loaded_.reset();  // not this layout's until every copy below is done
      copy(successor_start_, layout.successor_start);
      copy(successors_, layout.successors);
      levels_.assign(layout.urgent.begin(), layout.urgent.end());
      levels_.resize(tasks, 0);  // no flags: no task urgent
      copy(urgent_, levels_);
    }
    // Done before the lane loads the roots (their READY stores follow this wait).
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    loaded_ = shared;
  }

  std::optional<Completion> collect() override {
    unsigned long long* entry = completions_ + 2 * (collected_ & (slots_ - 1));
    // acquire: pairs with graph_publish's release store of the sequence (system scope); the
    // task's results in its record are visible after it.
    if (std::atomic_ref<unsigned long long>(entry[0]).load(std::memory_order_acquire) !=
        collected_ + 1) {
      return std::nullopt;
    }
    // relaxed: ordered by the acquire above.
    const unsigned long long word =
        std::atomic_ref<unsigned long long>(entry[1]).load(std::memory_order_relaxed);
    ++collected_;
    return Completion{static_cast<std::uint32_t>(word & 0xFFFFFFFFu),
                      static_cast<TaskStatus>(word >> 32)};
  }

  [[nodiscard]] const unsigned char* result(std::uint32_t t) const override {
    return records_ + static_cast<std::size_t>(t) * stride_;
  }

  void cancel_unrun() noexcept override {
    // Best effort (a block that misses it runs the task, a correct end too); errors cannot be
    // reported from shutdown.
    const KeepCurrentDevice keep;
    static const std::uint32_t one = 1;
    if (cudaSetDevice(device_) == cudaSuccess &&
        cudaMemcpyAsync(cancelled_, &one, sizeof one, cudaMemcpyHostToDevice, stream_) ==
            cudaSuccess) {
      (void)cudaStreamSynchronize(stream_);
    }
  }

  // The kernel's view (device addresses).
  [[nodiscard]] DeviceGraphArgs args() const {
    DeviceGraphArgs g;
    void* records = nullptr;
    void* completions = nullptr;
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(&records, records_, 0));
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(&completions, completions_, 0));
    g.records = static_cast<unsigned char*>(records);
    g.record_stride = stride_;
    g.device_records = device_records_;
    g.inputs = inputs_;
    g.poisoned = poisoned_;
    g.successor_start = successor_start_;
    g.successors = successors_;
    g.urgent = urgent_;
    g.cells = cells_;
    g.counters = counters_;
    g.completions = static_cast<unsigned long long*>(completions);
    g.slots = static_cast<std::uint32_t>(slots_);
    g.cancelled = cancelled_;
    return g;
  }

 private:
  int device_;
  std::size_t capacity_;
  std::size_t stride_;
  std::size_t slots_;
  cudaStream_t stream_ = nullptr;
  unsigned char* records_ = nullptr;  // mapped host memory
  unsigned char* device_records_ = nullptr;
  unsigned long long* completions_ = nullptr;  // mapped host memory
  std::uint32_t* inputs_ = nullptr;
  std::uint32_t* poisoned_ = nullptr;
  std::uint32_t* successor_start_ = nullptr;
  std::uint32_t* successors_ = nullptr;
  std::uint32_t* urgent_ = nullptr;
  unsigned long long* cells_ = nullptr;
  unsigned long long* counters_ = nullptr;
  std::uint32_t* cancelled_ = nullptr;
  unsigned long long collected_ = 0;   // the lane's alone
  std::vector<std::uint32_t> zeros_;   // the poison flags' reset
  std::vector<std::uint32_t> levels_;  // the urgent flags, as words
  // The layout whose successors and urgent flags the device memory holds (null: none, or a
  // load that failed part way). Held, so that its address names it until it is replaced.
  std::shared_ptr<const GraphLayout> loaded_;
};

// How long the pool waits for its blocks to become resident (other kernels may hold the SMs).
constexpr std::chrono::seconds kPlacementTimeout{60};
constexpr std::uint32_t kNotPlaced = ~std::uint32_t{0};

class DeviceBlocks final : public BlockRuntime {
 public:
  DeviceBlocks(const DeviceProgram& program, std::vector<int> devices, int blocks_per_sm,
               int threads, std::size_t depth, std::size_t capacity,
               std::chrono::nanoseconds warm_idle, bool watchdog, bool mailbox,
               std::size_t graph_capacity)
      : program_(program),
        threads_(threads),
        depth_(depth),
        warm_idle_ns_(static_cast<unsigned long long>(warm_idle.count())),
        watchdog_(watchdog) {
    if (!program.valid() || program.max_blocks_per_sm == nullptr) {
      throw InvalidArgument(
          "weft::gpu::Pool: Backend::device needs PoolOptions::program (from "
          "weft::gpu::device_program<Types, Capacity>() in a CUDA translation unit)");
    }
    if (program.payload_capacity != capacity) {
      throw InvalidArgument(
          "weft::gpu::Pool: the DeviceProgram was made for a payload capacity of " +
          std::to_string(program.payload_capacity) + " bytes, the pool has " +
          std::to_string(capacity));
    }
    // The task threads; every block has two more warps (loader and publisher) on top.
    if (threads < 32 || threads > 1024 - 64 || threads % 32 != 0) {
      throw InvalidArgument(
          "weft::gpu::PoolOptions::threads_per_block must be a multiple of 32 "
          "in [32, 960] (each block has two more warps, its loader and publisher; got " +
          std::to_string(threads) + ")");
    }
    if (blocks_per_sm < 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::blocks_per_sm must be >= 0 (got " +
                            std::to_string(blocks_per_sm) + ")");
    }
    const KeepCurrentDevice keep;
    int count = 0;
    WEFT_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (devices.empty()) {
      for (int d = 0; d < count; ++d) devices.push_back(d);
    }
    if (devices.empty()) throw InvalidArgument("weft::gpu::Pool: no GPU is visible");
    // Task graphs run on a pool of one GPU (a root must land on a block of the table's GPU,
    // and the lanes place tasks anywhere in the pool); only such a pool launches the kernel
    // with the graph code and its extra payload slot.
    runs_graphs_ = graph_capacity > 0 && devices.size() == 1;
    shared_bytes_ = program.shared_bytes(depth, runs_graphs_);
    int total = 0;
    for (int d : devices) {
      if (d < 0 || d >= count) {
        throw InvalidArgument("weft::gpu::Pool: device " + std::to_string(d) + " does not exist (" +
                              std::to_string(count) + " visible)");
      }
      WEFT_CUDA_CHECK(cudaSetDevice(d));
      cudaDeviceProp prop{};
      WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
      int fit = 0;
      WEFT_CUDA_CHECK(static_cast<cudaError_t>(
          program.max_blocks_per_sm(threads, shared_bytes_, runs_graphs_, &fit)));
      if (fit < 1) {
        throw InvalidArgument(
            "weft::gpu::Pool: the resident kernel does not fit on " + std::string(prop.name) +
            " with " + std::to_string(threads) + " threads and " + std::to_string(shared_bytes_) +
            " bytes of dynamic shared memory per block (ring of " + std::to_string(depth) +
            " slots; the task types ask for " + std::to_string(program.task_shared_bytes) +
            "); this GPU allows a block at most " + std::to_string(prop.sharedMemPerBlockOptin) +
            " bytes of shared memory, the kernel's own included");
      }
      // Every resident block must be co-resident: more than fit per SM would never start.
      const int per_sm = blocks_per_sm == 0 ? fit : blocks_per_sm;
      if (per_sm > fit) {
        throw InvalidArgument("weft::gpu::PoolOptions::blocks_per_sm " +
                              std::to_string(blocks_per_sm) + " exceeds what fits on " + prop.name +
                              " (" + std::to_string(fit) + ")");
      }
      DeviceLaunch l;
      l.device = d;
      l.first_block = total;
      l.blocks = per_sm * prop.multiProcessorCount;
      l.rings = l.blocks;
      l.name = prop.name;
      l.sms = prop.multiProcessorCount;
      total += l.blocks;
      per_sm_ = per_sm;  // the lanes' grain: the last GPU's (GPUs of other models may differ)
      launches_.push_back(l);
    }
    // The mailbox's server is one of the blocks that fit (all must be co-resident): on the last
    // GPU, the last block in the placement's (SM, block index) order (place_block), so ring
    // indices stay contiguous, its SM is the one with a ring fewer, and the server's index is
    // num_blocks().
    if (mailbox) {
      if (total < 2) {
        throw InvalidArgument(
            "weft::gpu::Pool: the mailbox needs a block of its own besides the ring blocks, and "
            "only 1 block fits (set PoolOptions::mailbox = false)");
      }
      --launches_.back().rings;
      --total;
    }
    blocks_ = total;
    enable_peer_access();
    // The rings, then the doorbell on a line of its own, then the mailbox, then the rings' SMs.
    const std::size_t rings_bytes = ring_stride(capacity, depth) * static_cast<std::size_t>(total);
    const std::size_t mailbox_bytes = mailbox ? kMailboxBytes : 0;
    host_bytes_ = rings_bytes + 128 + mailbox_bytes;
    const std::size_t bytes = host_bytes_ + sizeof(std::uint32_t) * static_cast<std::size_t>(total);
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes,
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    layout_ = RingLayout(host_, capacity, depth);
    doorbell_ = reinterpret_cast<std::uint32_t*>(host_ + rings_bytes);
    if (mailbox) mailbox_ = reinterpret_cast<std::uint64_t*>(host_ + rings_bytes + 128);
    ring_sms_ = reinterpret_cast<std::uint32_t*>(host_ + host_bytes_);
    for (auto& l : launches_) {
      WEFT_CUDA_CHECK(cudaSetDevice(l.device));
      WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
      WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&l.aux, cudaStreamNonBlocking));
      WEFT_CUDA_CHECK(cudaMalloc(&l.idle, program_.idle_bytes));
      WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&l.placement),
                                 sizeof(int) * (static_cast<std::size_t>(l.blocks) + 1)));
      WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&l.polls),
                                 sizeof(unsigned long long) * static_cast<std::size_t>(l.blocks)));
      WEFT_CUDA_CHECK(
          cudaMemset(l.polls, 0, sizeof(unsigned long long) * static_cast<std::size_t>(l.blocks)));
      WEFT_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&l.standby), static_cast<std::size_t>(l.blocks)));
      WEFT_CUDA_CHECK(cudaMemset(l.standby, 0, static_cast<std::size_t>(l.blocks)));
    }
    if (runs_graphs_) {
      graph_ = std::make_unique<DeviceGraphTable>(launches_[0].device, graph_capacity,
                                                  record_stride(capacity));
    } else if (graph_capacity > 0) {
      no_graphs_ = "a pool over several GPUs does not run them yet";
    }
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());  // the memsets are done before any launch
  }

  ~DeviceBlocks() override {
    // Errors here cannot be reported from a destructor.
    for (auto& l : launches_) {
      cudaSetDevice(l.device);
      if (l.stream != nullptr) cudaStreamDestroy(l.stream);
      if (l.aux != nullptr) cudaStreamDestroy(l.aux);
      if (l.idle != nullptr) cudaFree(l.idle);
      if (l.polls != nullptr) cudaFree(l.polls);
      if (l.standby != nullptr) cudaFree(l.standby);
      if (l.placement != nullptr) cudaFree(l.placement);
    }
    if (host_ != nullptr) cudaFreeHost(host_);
  }

  [[nodiscard]] RingLayout rings() const noexcept override { return layout_; }
  [[nodiscard]] std::size_t num_blocks() const noexcept override {
    return static_cast<std::size_t>(blocks_);
  }

  [[nodiscard]] std::uint64_t* mailbox() const noexcept override { return mailbox_; }
  [[nodiscard]] GraphTable* graph_table() noexcept override { return graph_.get(); }
  [[nodiscard]] std::string why_no_graphs() const override { return no_graphs_; }

  void set_standby(const std::vector<std::size_t>& blocks) override {
    standby_.assign(static_cast<std::size_t>(blocks_), 0);
    for (const std::size_t b : blocks) {
      if (b < standby_.size()) standby_[b] = 1;
    }
  }

  // Launches the resident kernels, each time with its memory as new (a pool that paused has
  // joined them first), and waits until every block has reported its SM.
  void start() override {
    const KeepCurrentDevice keep;
    std::memset(host_, 0, host_bytes_);  // every slot IDLE, doorbell 0, the mailbox at use 0
    std::memset(ring_sms_, 0xFF, sizeof(std::uint32_t) * static_cast<std::size_t>(blocks_));
    void* device_rings = nullptr;
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(&device_rings, host_, 0));
    auto* device_doorbell =
        reinterpret_cast<std::uint32_t*>(static_cast<unsigned char*>(device_rings) +
                                         (reinterpret_cast<unsigned char*>(doorbell_) - host_));
    auto* device_ring_sms =
        reinterpret_cast<std::uint32_t*>(static_cast<unsigned char*>(device_rings) + host_bytes_);
    for (auto& l : launches_) {
      WEFT_CUDA_CHECK(cudaSetDevice(l.device));
      // On the kernel's own stream, in order before its launch: a memset or copy on the
      // legacy stream would wait for whatever else runs on the GPU.
      if (!standby_.empty()) {
        WEFT_CUDA_CHECK(cudaMemcpyAsync(l.standby, standby_.data() + l.first_block,
                                        static_cast<std::size_t>(l.rings), cudaMemcpyHostToDevice,
                                        l.stream));
      }
      // All ones: the watcher role vacant (-1), and an epoch no doorbell value equals yet.
      WEFT_CUDA_CHECK(cudaMemsetAsync(l.idle, 0xFF, program_.idle_bytes, l.stream));
      WEFT_CUDA_CHECK(cudaMemsetAsync(
          l.placement, 0, sizeof(int) * (static_cast<std::size_t>(l.blocks) + 1), l.stream));
      WEFT_CUDA_CHECK(cudaMemsetAsync(
          l.polls, 0, sizeof(unsigned long long) * static_cast<std::size_t>(l.blocks), l.stream));
      ResidentArgs a;
      a.rings = device_rings;
      a.ring_stride = layout_.ring_bytes;
      a.slot_stride = layout_.slot_bytes;
      a.ring_depth = static_cast<unsigned>(depth_);
      a.first_block = l.first_block;
      a.doorbell = device_doorbell;
      a.idle = l.idle;
      a.polls = l.polls;
      a.warm_idle_ns = warm_idle_ns_;
      a.standby = l.standby;
      a.placement = l.placement;
      a.ring_sms = device_ring_sms + l.first_block;
      a.watchdog = watchdog_;
      if (graph_ != nullptr) a.graph = graph_->args();  // a pool of one GPU (see above)
      if (mailbox_ != nullptr && l.rings < l.blocks) {
        a.mailbox = reinterpret_cast<unsigned long long*>(
            static_cast<unsigned char*>(device_rings) +
            (reinterpret_cast<unsigned char*>(mailbox_) - host_));
        a.mailbox_block = l.rings;
      }
      const auto e =
          static_cast<cudaError_t>(program_.launch(a, l.blocks, threads_, shared_bytes_, l.stream));
      if (e != cudaSuccess) throw_cuda("resident kernel launch", e, __FILE__, __LINE__);
    }
    joined_.store(false, std::memory_order_relaxed);  // relaxed: statistics
    wait_for_placement();
  }

  // Every block reports its SM once all of its launch's blocks are resident: at once on an idle
  // GPU, later while other work occupies the SMs (a kernel launched before the pool, or one
  // still running at resume()). A launch that failed is reported as the error it is.
  void wait_for_placement() {
    const auto deadline = std::chrono::steady_clock::now() + kPlacementTimeout;
    for (std::size_t r = 0; r < static_cast<std::size_t>(blocks_);) {
      // acquire: pairs with the block's release store of its report (block_units reads it).
      if (std::atomic_ref<std::uint32_t>(ring_sms_[r]).load(std::memory_order_acquire) !=
          kNotPlaced) {
        ++r;
        continue;
      }
      if (const std::string why = failure(); !why.empty()) throw Error("weft::gpu::Pool: " + why);
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(
            "weft::gpu::Pool: the resident kernel's blocks did not all start within " +
            std::to_string(kPlacementTimeout.count()) +
            " s: other work occupies the GPU (the pool needs every block resident at once)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(10));
    }
  }

  [[nodiscard]] std::size_t blocks_per_unit() const noexcept override {
    return static_cast<std::size_t>(per_sm_);
  }
  // A block's unit is its SM: the GPU's place in the pool above, the SM's id below.
  [[nodiscard]] std::vector<std::uint32_t> block_units() const override {
    std::vector<std::uint32_t> units(static_cast<std::size_t>(blocks_));
    for (std::size_t g = 0; g < launches_.size(); ++g) {
      const DeviceLaunch& l = launches_[g];
      for (int r = 0; r < l.rings; ++r) {
        const auto at = static_cast<std::size_t>(l.first_block + r);
        // acquire: pairs with the block's release store of its report.
        units[at] = static_cast<std::uint32_t>(g << 16) |
                    std::atomic_ref<std::uint32_t>(ring_sms_[at]).load(std::memory_order_acquire);
      }
    }
    return units;
  }

  void after_loads() noexcept override {
    // release: pairs with the watcher's system-scope acquire load of the doorbell; the slot
    // stores this lane made before are visible to a block woken by the new value.
    std::atomic_ref<std::uint32_t>(*doorbell_).fetch_add(1, std::memory_order_release);
  }

  // Nothing to stop: a stuck kernel keeps running; the pool leaks this object (and so the
  // slot memory the kernel still reads).
  void abandon() noexcept override {}
  [[nodiscard]] bool host_polls_counted() const noexcept override { return true; }

  std::uint64_t host_polls() override {
    // relaxed: statistics (join() adds a launch's counters once it has ended).
    return polls_before_.load(std::memory_order_relaxed) +
           (joined_.load(std::memory_order_relaxed) ? 0 : polls_of_launch());
  }

  // Reads of host memory by the blocks of the current launch (their counters).
  std::uint64_t polls_of_launch() {
    const KeepCurrentDevice keep;  // a statistic must not move the caller to another GPU
    std::uint64_t total = 0;
    std::vector<unsigned long long> counts;
    for (auto& l : launches_) {
      counts.assign(static_cast<std::size_t>(l.blocks), 0);
      cudaSetDevice(l.device);
      if (cudaMemcpyAsync(counts.data(), l.polls, counts.size() * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost, l.aux) != cudaSuccess ||
          cudaStreamSynchronize(l.aux) != cudaSuccess) {
        continue;  // a dead kernel's counters are not worth an exception from a statistic
      }
      for (unsigned long long c : counts) total += c;
    }
    return total;
  }

  void join() override {
    const KeepCurrentDevice keep;  // pause() returns to a caller who uses its own GPU next
    if (joined_.load(std::memory_order_relaxed)) return;  // relaxed: only the pool's owner
    for (auto& l : launches_) {
      cudaSetDevice(l.device);
      const cudaError_t e = cudaStreamSynchronize(l.stream);
      if (e != cudaSuccess && first_error_.empty()) {
        first_error_ = describe_error(l, e);
      }
    }
    // The launch's counters, once: a relaunch's start at zero, and a paused pool's join at
    // destruction adds nothing again. relaxed: statistics.
    polls_before_.fetch_add(polls_of_launch(), std::memory_order_relaxed);
    joined_.store(true, std::memory_order_relaxed);
  }

  std::string failure() override {
    const KeepCurrentDevice keep;
    if (!first_error_.empty()) return first_error_;
    for (auto& l : launches_) {
      cudaSetDevice(l.device);
      const cudaError_t e = cudaStreamQuery(l.stream);
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        first_error_ = describe_error(l, e);
        return first_error_;
      }
    }
    return {};
  }

  // A task may run on any GPU of the pool (free slots pull work), so memory one GPU allocated
  // must be reachable from the others: every pair gets peer access (NVLink or PCIe P2P).
  // Where a pair cannot, tasks must use memory every GPU can reach (managed or pinned host
  // memory); describe() says so.
  void enable_peer_access() {
    peer_note_.clear();
    for (const auto& a : launches_) {
      for (const auto& b : launches_) {
        if (a.device == b.device) continue;
        int can = 0;
        WEFT_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a.device, b.device));
        if (can == 0) {
          peer_note_ = "; no peer access between GPU " + std::to_string(a.device) + " and GPU " +
                       std::to_string(b.device) + ": tasks must use managed or pinned memory";
          continue;
        }
        // Peer access lasts as long as the contexts: a pair this process enabled is not asked
        // again (a second pool would get cudaErrorPeerAccessAlreadyEnabled, harmless, but an
        // API error compute-sanitizer reports). After a cudaDeviceReset the record is stale;
        // the pool then finds out when a task touches another GPU's memory.
        static std::mutex enabled_mutex;
        static std::set<std::pair<int, int>> enabled;
        const std::lock_guard lock(enabled_mutex);
        if (enabled.count({a.device, b.device}) != 0) continue;
        WEFT_CUDA_CHECK(cudaSetDevice(a.device));
        const cudaError_t e = cudaDeviceEnablePeerAccess(b.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();  // clear it: enabled before, by the user
        } else if (e != cudaSuccess) {
          throw_cuda("cudaDeviceEnablePeerAccess", e, __FILE__, __LINE__);
        }
        enabled.insert({a.device, b.device});
      }
    }
    if (peer_note_.empty() && launches_.size() > 1) peer_note_ = "; peer access between all";
  }

  [[nodiscard]] std::string describe() const override {
    std::string s;
    for (const auto& l : launches_) {
      if (!s.empty()) s += "; ";
      s += "GPU " + std::to_string(l.device) + " " + l.name + ": " + std::to_string(l.sms) +
           " SMs x " + std::to_string(l.blocks / l.sms) + " blocks of " + std::to_string(threads_) +
           " threads, " + std::to_string(depth_) + " slot(s) each";
    }
    if (mailbox_ != nullptr) s += "; the last block serves the mailbox";
    s += peer_note_;
    return s;
  }

 private:
  static std::string describe_error(const DeviceLaunch& l, cudaError_t e) {
    return "the resident kernel on GPU " + std::to_string(l.device) + " (" + l.name +
           ") failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }

  DeviceProgram program_;
  int threads_;
  std::size_t depth_;
  bool runs_graphs_ = false;  // graph_capacity > 0 and one GPU: the kernel with graph code
  std::size_t shared_bytes_ = 0;
  unsigned long long warm_idle_ns_;
  bool watchdog_;
  int blocks_ = 0;
  unsigned char* host_ = nullptr;
  RingLayout layout_;
  std::uint32_t* doorbell_ = nullptr;
  std::uint64_t* mailbox_ = nullptr;  // in host_, after the doorbell's line
  std::vector<DeviceLaunch> launches_;
  std::vector<unsigned char> standby_;  // per global block, from set_standby
  std::size_t host_bytes_ = 0;          // rings, doorbell and mailbox: zeroed at each launch
  std::uint32_t* ring_sms_ = nullptr;   // in host_, after them: per ring, its block's SM
  int per_sm_ = 1;
  std::atomic<std::uint64_t> polls_before_{0};  // reads of host memory by earlier launches
  std::atomic<bool> joined_{false};             // the current launch has been joined
  std::string first_error_;
  std::string peer_note_;
  std::unique_ptr<DeviceGraphTable> graph_;  // null: the pool runs no graphs
  std::string no_graphs_ = "PoolOptions::graph_capacity is 0";
};

}  // namespace

std::unique_ptr<BlockRuntime> make_device_blocks(const DeviceProgram& program,
                                                 const std::vector<int>& devices, int blocks_per_sm,
                                                 int threads, std::size_t depth,
                                                 std::size_t payload_capacity,
                                                 std::chrono::nanoseconds warm_idle, bool watchdog,
                                                 bool mailbox, std::size_t graph_capacity) {
  return std::make_unique<DeviceBlocks>(program, devices, blocks_per_sm, threads, depth,
                                        payload_capacity, warm_idle, watchdog, mailbox,
                                        graph_capacity);
}

}  // namespace weft::gpu::detail
