// One run of a graph with a given mapping (src/graph only): a scoreboard, i.e. a node is issued
// once every node it depends on has reported done (or, on the GPU, has been enqueued). The
// dispatcher is the calling thread; it alone touches the graph's data
// states, the allocator and the device backend. CPU nodes run on the executor, GPU nodes are
// enqueued on the backend's streams; both report back through one mutex-protected inbox.
//
// When a node may start:
//   - a CPU node: every producer has finished (a GPU producer: its stream's host callback ran),
//     every copy back to the host it needs has landed, and fewer than cpu_nodes_at_once CPU
//     nodes are running (they queue in the order they became ready);
//   - a GPU node: every GPU producer has been enqueued (the node's stream waits for producers'
//     end events on other streams) and every CPU producer has finished.
// Kernels go on the compute streams; copies to the device on a stream of their own, copies back
// on another, each ordered after what it needs by events. A GPU node's output that a CPU node
// reads from it, or that is the final value of a user's buffer, is copied back as the node is
// enqueued, on a copy-back stream beside the node's compute stream (copied_back_at_launch).
// Where a datum's valid copy lives is the MSI bookkeeping of detail::Coherence; each datum also
// remembers the event after which its device copy is ready (the writer's end, or the copy in)
// and whether a copy back to the host is in flight (CPU readers wait for it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/device_backend.hpp"
#include "graph_impl.hpp"
#include "weft/cpu/future.hpp"
#include "weft/graph/runtime.hpp"

namespace weft::graph::detail {

class Dispatcher {
 public:
  Dispatcher(GraphImpl& graph, const std::vector<Device>& mapping, DeviceBackend* device,
             DeviceMemory* memory, cpu::Executor& executor, int compute_streams,
             int cpu_nodes_at_once);
  /// Runs the graph; fills `report`. Throws the first failure (a node's, nested in a
  /// weft::Error naming it, or the device's) after everything in flight has ended.
  void run(RunReport& report);

 private:
  using Clock = std::chrono::steady_clock;
  using Event = DeviceBackend::Event;

  struct NodeState {
    std::size_t unsatisfied = 0;  // producers not yet satisfying this node
    std::size_t copies_awaited = 0;
    int stream = -1;
    Event start{}, end{};
    double launch_seconds = 0;  // GPU: the dispatcher's time in the kernel's launch function
    double issued = 0;          // when it was submitted (CPU) or its launch called (GPU)
    bool finished = false;
  };
  struct DataState {
    std::optional<Event> device_ready;
    int device_ready_stream = -1;
    bool host_copy_in_flight = false;
    std::vector<std::size_t> host_waiters;  // CPU nodes waiting for that copy
  };
  struct Message {
    enum class Kind { node_finished, copy_landed, prefetch_landed } kind;
    std::size_t index;  // node or data
    std::exception_ptr error;
    double start = 0, end = 0;  // CPU nodes: seconds since the run began
    int lane = -1;
  };
  struct PendingTransfer {
    std::size_t data;
    bool to_device;
    int stream;
    Event start, end;
  };

  struct Inbox {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<Message> messages;
    // Notifies under the lock: once the dispatcher has seen the last message it may end the
    // run and destroy what the poster would still touch after unlocking.
    void post(Message m) {
      std::lock_guard lock(mutex);
      messages.push_back(std::move(m));
      cv.notify_one();
    }
  };

  void start_inputs();
  /// Starts every node in ready_, and the prefetch on the first call: the GPU nodes first, then
  /// the prefetch, then the CPU nodes (see run()).
  void start_ready(bool& prefetched);
  void satisfy(std::size_t consumer);
  void start_cpu(std::size_t node);
  void submit_cpu(std::size_t node);
  // Whether GPU node `node`'s output `data` is copied back to the host as the node is enqueued:
  // a CPU consumer reads it from `node`, or it is a user's buffer whose last writer is `node`.
  [[nodiscard]] bool copied_back_at_launch(std::size_t node, std::size_t data) const;
  // Whether a consumer of `node` mapped to `device` reads `data` from it (on the GPU: its output
  // is copied in next; on the CPU: it is copied back).
  [[nodiscard]] bool read_next_on(Device device, std::size_t node, std::size_t data) const;
  void start_gpu(std::size_t node);
  void copy_back(std::size_t data, int stream);
  void handle(const Message& m);
  void wait_for_messages(std::vector<Message>& out);
  /// Records the run's error; the first one stays (see fail_by).
  void fail(std::exception_ptr e);
  /// Records `original`, the error that `node` (kNoNode: a copy) reported, nested in a
  /// weft::Error saying `context`. A stream that waited on a failed one carries the same
  /// exception, so a copy or a consumer may report a producer's error before the producer
  /// does: that report gives way to the producer's, and the run names the node that failed.
  void fail_by(std::size_t node, const std::exception_ptr& original, const std::string& context);
  static constexpr std::size_t kNoNode = SIZE_MAX;
  void finish_outputs();
  void collect_times(RunReport& report);
  /// Copies to the device, at once, the graph inputs that no node writes and a GPU node reads.
  void prefetch_inputs();
  /// Enqueues datum `data`'s copy to the device on the copy-in stream.
  void copy_in(std::size_t data);
  [[nodiscard]] double since_start() const;
  [[nodiscard]] int stream_for(std::size_t node);

  GraphImpl& g_;
  const std::vector<Device>& mapping_;
  DeviceBackend* device_;
  DeviceMemory* memory_;
  cpu::Executor& executor_;
  std::vector<NodeState> nodes_;
  std::vector<DataState> data_;
  std::vector<PendingTransfer> transfers_;
  std::vector<NodeRecord> records_;
  std::deque<std::size_t> ready_;
  std::size_t finished_ = 0;
  std::size_t in_flight_cpu_ = 0;           // CPU tasks whose message is due
  std::size_t in_flight_device_ = 0;        // GPU nodes and copies whose message is due
  std::vector<cpu::Future<void>> futures_;  // per node, while its CPU task is in flight
  std::size_t bytes_to_device_ = 0, bytes_to_host_ = 0;
  int next_stream_ = 0;
  int compute_streams_;                // streams [0, compute_streams_) run kernels
  int copy_in_, copy_out_;             // the copy streams
  int early_out_;                      // + s: compute stream s's copies back at launch
  std::size_t cpu_limit_;              // CPU nodes at once (SIZE_MAX: no limit)
  std::deque<std::size_t> cpu_queue_;  // CPU nodes ready, waiting for a turn
  // CPU nodes whose turn came or whose copies landed in the messages just handled: submitted
  // by start_ready, after the device work those messages made ready.
  std::vector<std::size_t> cpu_due_;
  bool device_failed_ = false;
  std::exception_ptr error_;
  std::exception_ptr error_original_;  // what error_ wraps, as its reporter gave it (fail_by)
  std::size_t error_node_ = kNoNode;   // the node that reported error_ (kNoNode: none, a copy)
  Clock::time_point t0_;
  std::optional<Event> ref_;  // recorded on stream 0 when the run began
  double ref_host_ = 0;       // the host clock then

  // Shared with the device's callbacks: a failed device may still call one after the run.
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
};

}  // namespace weft::graph::detail
