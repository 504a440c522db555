// weft/gpu/detail/block_runtime.hpp - what runs the blocks that serve the slots: resident
// kernels on GPUs, or host threads (the CPU path). The pool's scheduler sees only this.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/device_program.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu::detail {

class GraphTable;

class BlockRuntime {
 public:
  virtual ~BlockRuntime() = default;
  /// Where the blocks' rings are (host addresses: pinned and mapped for the GPU backend).
  /// Valid until destruction.
  [[nodiscard]] virtual RingLayout rings() const noexcept = 0;
  /// Resident blocks (each with rings().depth slots).
  [[nodiscard]] virtual std::size_t num_blocks() const noexcept = 0;
  /// Before start(): the blocks (global indices) that stay in warm idle however long they
  /// wait, so that a task loaded into one starts within a poll period (the device backend;
  /// host blocks poll their slot with a short sleep anyway).
  virtual void set_standby(const std::vector<std::size_t>& blocks) { (void)blocks; }
  /// Starts the blocks (launches the resident kernels / starts the threads), with every slot
  /// IDLE and the mailbox at use 0; returns once block_units() is known. After join() (every
  /// slot EXIT, the blocks returned: a paused pool) it may be called again.
  virtual void start() = 0;
  /// After every slot was set to EXIT: waits for the blocks to return.
  virtual void join() = 0;
  /// Per block, after start(): the unit it shares with other blocks (its SM on the device
  /// backend; every host block is a unit of its own). A scheduler lane spreads a batch over
  /// its units before it puts two tasks on one (docs/gpu.md "Placement").
  [[nodiscard]] virtual std::vector<std::uint32_t> block_units() const {
    std::vector<std::uint32_t> units(num_blocks());
    for (std::size_t b = 0; b < units.size(); ++b) units[b] = static_cast<std::uint32_t>(b);
    return units;
  }
  /// Blocks per unit where they are alike (the lanes' ranges are whole multiples of it, so
  /// that a lane owns whole units).
  [[nodiscard]] virtual std::size_t blocks_per_unit() const noexcept { return 1; }
  /// Empty while the blocks are healthy; else what failed (a kernel that trapped or faulted).
  virtual std::string failure() = 0;
  /// After a lane loaded a batch of slots (READY or EXIT): the device backend rings the
  /// doorbell that wakes blocks in deep idle.
  virtual void after_loads() noexcept {}
  /// Instead of join() when some block may never return (a task past the watchdog deadline):
  /// let go of the blocks without waiting; the caller then leaks this object, whose memory the
  /// abandoned blocks may still touch.
  virtual void abandon() noexcept {}
  /// The lone-task mailbox (detail/mailbox_record.hpp; host address of kMailboxBytes, zeroed), or
  /// null when the pool has none. It is served by a block of its own, not counted by
  /// num_blocks() and serving no ring, which returns when it reads an EXIT request.
  [[nodiscard]] virtual std::uint64_t* mailbox() const noexcept { return nullptr; }
  /// The table of task graphs whose dependencies the blocks resolve themselves
  /// (Pool::push_graph), or null when the backend has none. The blocks take its ready tasks
  /// before they look at their ring, and count a graph root's successors down after running
  /// it from a slot. Valid until destruction.
  [[nodiscard]] virtual GraphTable* graph_table() noexcept { return nullptr; }
  /// Why graph_table() is null (for the refusal of a graph).
  [[nodiscard]] virtual std::string why_no_graphs() const {
    return "PoolOptions::graph_capacity is 0";
  }
  /// Reads of host memory the blocks made so far (device backend; 0 on the host backend).
  [[nodiscard]] virtual std::uint64_t host_polls() { return 0; }
  /// Whether the blocks are real GPU blocks reading host memory (the device backend).
  [[nodiscard]] virtual bool host_polls_counted() const noexcept { return false; }
  /// A description for `weft info` and benchmarks ("host: 4 blocks", "H100: 132 SMs x 8").
  [[nodiscard]] virtual std::string describe() const = 0;
};

using HostDispatch = TaskStatus (*)(std::uint32_t type, void* payload, std::uint32_t size,
                                    const BlockContext& block);

/// The CPU path: `blocks` host threads, each with a ring of `depth` slots, running task bodies
/// with a block of one thread. Same slot protocol and memory orders as the GPU. With
/// `mailbox`, one more thread serves the lone-task mailbox. `blocks_per_unit` consecutive
/// blocks form a unit, as the blocks of an SM do on the device backend (tests of the lanes'
/// placement; 1: every block its own). With `graph_capacity`, the blocks also run task graphs
/// of up to that many tasks from a graph table (0: none).
std::unique_ptr<BlockRuntime> make_host_blocks(std::size_t blocks, std::size_t depth,
                                               std::size_t payload_capacity,
                                               std::size_t shared_bytes, HostDispatch dispatch,
                                               bool mailbox, std::size_t blocks_per_unit = 1,
                                               std::size_t graph_capacity = 0);

/// The GPU path: one resident kernel per device in `devices` (empty: every visible GPU), with
/// blocks_per_sm blocks per SM (0: as many as occupancy allows) of `threads` threads, each
/// serving a ring of `depth` slots in pinned host-mapped memory; a block idle for `warm_idle`
/// stops polling its ring and
/// waits in deep idle; `watchdog`: the pool may give up on tasks (blocks finish by CAS);
/// `mailbox`: the last block of the last GPU serves the lone-task mailbox instead of a ring
/// (so num_blocks() is one less than the blocks launched); `graph_capacity`: a pool of one GPU
/// runs task graphs of up to that many tasks (0: none). Throws
/// weft::InvalidArgument for a program that does not match, weft::CudaError when a CUDA call fails
/// (no GPU, no driver), and, in a build without CUDA, weft::InvalidArgument saying so.
std::unique_ptr<BlockRuntime> make_device_blocks(const DeviceProgram& program,
                                                 const std::vector<int>& devices, int blocks_per_sm,
                                                 int threads, std::size_t depth,
                                                 std::size_t payload_capacity,
                                                 std::chrono::nanoseconds warm_idle, bool watchdog,
                                                 bool mailbox, std::size_t graph_capacity = 0);

}  // namespace weft::gpu::detail
