#include "dispatcher.hpp"

#include <algorithm>

#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"

namespace weft::graph::detail {

namespace {

constexpr std::size_t kHost = Coherence::kHost;
constexpr std::size_t kDevice0 = 1;

// A weft::Error saying `what`, with the exception being handled nested in it.
std::exception_ptr error_nesting_current(const std::string& what) {
  try {
    std::throw_with_nested(Error(what));
  } catch (...) {
    return std::current_exception();
  }
}

// `original` nested in a weft::Error saying `context` and what the original said.
std::exception_ptr nested_in_error(std::exception_ptr original, const std::string& context) {
  try {
    std::rethrow_exception(original);
  } catch (const std::exception& x) {
    return error_nesting_current(context + ": " + x.what());
  } catch (...) {
    return error_nesting_current(context + ": an exception not derived from std::exception");
  }
}

}  // namespace

Dispatcher::Dispatcher(GraphImpl& graph, const std::vector<Device>& mapping, DeviceBackend* device,
                       DeviceMemory* memory, cpu::Executor& executor, int compute_streams,
                       int cpu_nodes_at_once)
    : g_(graph),
      mapping_(mapping),
      device_(device),
      memory_(memory),
      executor_(executor),
      nodes_(graph.nodes.size()),
      data_(graph.data.size()),
      futures_(graph.nodes.size()),
      compute_streams_(compute_streams),
      copy_in_(compute_streams),
      copy_out_(compute_streams + 1),
      early_out_(compute_streams + 2),
      cpu_limit_(cpu_nodes_at_once == 0 ? SIZE_MAX : static_cast<std::size_t>(cpu_nodes_at_once)) {}

double Dispatcher::since_start() const {
  return std::chrono::duration<double>(Clock::now() - t0_).count();
}

void Dispatcher::fail(std::exception_ptr e) {
  if (error_) return;
  error_original_ = nullptr;  // no node's report replaces this error (fail_by)
  error_ = std::move(e);
}

void Dispatcher::fail_by(std::size_t node, const std::exception_ptr& original,
                         const std::string& context) {
  const bool first = !error_;
  // The same exception object: it reached the earlier report through a stream that waited on
  // this node, or through a copy. (An emulated stream hands its error object on to the streams
  // that wait on it. On CUDA the callbacks report no error; a failed stream is found by
  // check() and recorded by fail(), which no node's report replaces.)
  const bool upstream = error_ && original == error_original_ && node != kNoNode &&
                        (error_node_ == kNoNode || g_.reaches(node, error_node_));
  if (!first && !upstream) return;
  error_ = nested_in_error(original, context);
  error_original_ = original;
  error_node_ = node;
}

void Dispatcher::start_inputs() {
  // A new run's inputs are what their host buffers hold now.
  for (DataEntry& d : g_.data) {
    if (d.read_before_written) d.copies.reset_to(kHost);
  }
}

void Dispatcher::prefetch_inputs() {
  // A graph input that no node writes and a GPU node reads holds its final value from the
  // start: its copy in need not wait until the reader's other producers (CPU nodes) are done,
  // and issued now it overlaps them instead of following them on the critical path
  // (docs/decisions/024-unwritten-graph-inputs-are-prefetched.md). Taken in the order of their
  // first GPU reader, after the nodes ready at the start have enqueued their own copies.
  bool any = false;
  for (std::size_t node = 0; node < g_.nodes.size(); ++node) {
    if (mapping_[node] != Device::gpu) continue;
    for (const Arg& a : g_.nodes[node].args) {
      const std::size_t i = a.data.index();
      DataEntry& d = g_.data[i];
      if (a.access == Access::write || d.written || !d.copies.valid(kHost) ||
          d.copies.valid(kDevice0)) {
        continue;
      }
      if (d.device == nullptr) d.device = memory_->allocator->allocate(d.bytes);
      (void)d.copies.read_at(kDevice0, "data '" + d.name + "'");  // host -> shared with device
      copy_in(i);
      any = true;
    }
  }
  // The run waits for these copies as for a kernel: a reader that never starts (a producer
  // failed) must not leave one reading a host buffer after run() returns. One callback after
  // the last (the stream is in order) rather than one per copy, which would put the host
  // function's turnaround between them.
  if (any) {
    ++in_flight_device_;
    device_->on_host(copy_in_, [inbox = inbox_](std::exception_ptr e) {
      inbox->post({Message::Kind::prefetch_landed, 0, std::move(e)});
    });
  }
}

void Dispatcher::copy_in(std::size_t data) {
  DataEntry& d = g_.data[data];
  DataState& ds = data_[data];
  PendingTransfer t{data, true, copy_in_, device_->record(copy_in_), 0};
  device_->copy_to_device(copy_in_, d.device, d.host, d.bytes);
  t.end = device_->record(copy_in_);
  transfers_.push_back(t);
  bytes_to_device_ += d.bytes;
  ds.device_ready = t.end;
  ds.device_ready_stream = copy_in_;
}

void Dispatcher::satisfy(std::size_t consumer) {
  if (--nodes_[consumer].unsatisfied == 0) ready_.push_back(consumer);
}

int Dispatcher::stream_for(std::size_t node) {
  for (std::size_t p : g_.nodes[node].producers) {
    if (mapping_[p] == Device::gpu) return nodes_[p].stream;  // stay on the chain's stream
  }
  const int s = next_stream_;
  next_stream_ = (next_stream_ + 1) % compute_streams_;
  return s;
}

void Dispatcher::copy_back(std::size_t data, int stream) {
  DataEntry& d = g_.data[data];
  DataState& ds = data_[data];
  if (ds.device_ready && ds.device_ready_stream != stream) device_->wait(stream, *ds.device_ready);
  PendingTransfer t{data, false, stream, device_->record(stream), 0};
  device_->copy_to_host(stream, d.host, d.device, d.bytes);
  t.end = device_->record(stream);
  transfers_.push_back(t);
  bytes_to_host_ += d.bytes;
  ds.host_copy_in_flight = true;
  ++in_flight_device_;
  device_->on_host(stream, [inbox = inbox_, data](std::exception_ptr e) {
    inbox->post({Message::Kind::copy_landed, data, std::move(e)});
  });
}

void Dispatcher::start_cpu(std::size_t node) {
  const NodeEntry& n = g_.nodes[node];
  for (const Arg& a : n.args) {
    const std::size_t i = a.data.index();
    DataEntry& d = g_.data[i];
    DataState& ds = data_[i];
    if (a.access != Access::write) {
      const std::size_t source = d.copies.read_at(kHost, "data '" + d.name + "'");
      if (source == kDevice0) copy_back(i, copy_out_);
      if (ds.host_copy_in_flight) {
        ds.host_waiters.push_back(node);
        ++nodes_[node].copies_awaited;
      }
    }
    if (a.access != Access::read) d.copies.write_at(kHost);
  }
  if (nodes_[node].copies_awaited == 0) submit_cpu(node);
}

bool Dispatcher::copied_back_at_launch(std::size_t node, std::size_t data) const {
  const DataEntry& d = g_.data[data];
  // The user's buffer gets its final value from this node: finish_outputs would copy it back
  // once every node has finished.
  if (!d.owned && d.last_writer == static_cast<std::ptrdiff_t>(node)) return true;
  return read_next_on(Device::cpu, node, data);  // start_cpu would copy it back
}

bool Dispatcher::read_next_on(Device device, std::size_t node, std::size_t data) const {
  for (std::size_t c : g_.consumers[node]) {
    if (mapping_[c] != device) continue;
    for (const auto& [producer, read] : g_.nodes[c].flows) {
      if (producer == node && read == data) return true;
    }
  }
  return false;
}

void Dispatcher::submit_cpu(std::size_t node) {
  if (in_flight_cpu_ >= cpu_limit_) {
    cpu_queue_.push_back(node);  // its turn comes when a running CPU node finishes
    return;
  }
  std::vector<void*> pointers;
  std::vector<std::size_t> bytes;
  std::vector<unsigned char> to_device;
  for (const Arg& a : g_.nodes[node].args) {
    pointers.push_back(g_.data[a.data.index()].host);
    bytes.push_back(g_.data[a.data.index()].bytes);
    to_device.push_back(
        a.access != Access::read && read_next_on(Device::gpu, node, a.data.index()) ? 1 : 0);
  }
  nodes_[node].issued = since_start();
  futures_[node] = executor_.submit([this, inbox = inbox_, node, pointers = std::move(pointers),
                                     bytes = std::move(bytes), to_device = std::move(to_device)] {
    Message m{Message::Kind::node_finished, node, nullptr};
    m.lane = executor_.this_worker_index();
    m.start = since_start();
    try {
      CpuCall call;
      call.pointers = pointers;
      call.bytes = bytes;
      call.to_device = to_device;
      call.executor = &executor_;
      g_.nodes[node].kernel.cpu(call);
    } catch (...) {
      m.error = std::current_exception();
    }
    m.end = since_start();
    inbox->post(std::move(m));  // the last use of `this`
  });
  ++in_flight_cpu_;
}

void Dispatcher::start_gpu(std::size_t node) {
  const NodeEntry& n = g_.nodes[node];
  NodeState& ns = nodes_[node];
  const int s = stream_for(node);
  ns.stream = s;
  for (std::size_t p : n.producers) {
    if (mapping_[p] == Device::gpu && nodes_[p].stream != s) device_->wait(s, nodes_[p].end);
  }
  std::vector<void*> pointers;
  std::vector<std::size_t> bytes;
  for (const Arg& a : n.args) {
    const std::size_t i = a.data.index();
    DataEntry& d = g_.data[i];
    DataState& ds = data_[i];
    if (d.device == nullptr) d.device = memory_->allocator->allocate(d.bytes);
    if (a.access != Access::write) {
      const std::size_t source = d.copies.read_at(kDevice0, "data '" + d.name + "'");
      if (source == kHost) {
        // The host copy is final (its CPU producers have finished), and no kernel still reads
        // the device copy it replaces (the host writer that invalidated it waited for them).
        copy_in(i);
      }
      if (ds.device_ready && ds.device_ready_stream != s) {
        device_->wait(s, *ds.device_ready);  // a copy in, or a kernel on another stream
      }
    }
    if (a.access != Access::read) d.copies.write_at(kDevice0);
    pointers.push_back(d.device);
    bytes.push_back(d.bytes);
  }
  ns.start = device_->record(s);
  // Timed: a launch function that synchronizes holds this thread, and with it every other
  // node's dispatch and completion (NodeRecord::launch_seconds says so).
  const double launch_begin = since_start();
  ns.issued = launch_begin;
  device_->launch(s, n.kernel, std::move(pointers), std::move(bytes), &executor_);
  ns.launch_seconds = since_start() - launch_begin;
  ns.end = device_->record(s);
  for (const Arg& a : n.args) {
    if (a.access == Access::read) continue;
    data_[a.data.index()].device_ready = ns.end;
    data_[a.data.index()].device_ready_stream = s;
  }
  ++in_flight_device_;
  device_->on_host(s, [inbox = inbox_, node](std::exception_ptr e) {
    inbox->post({Message::Kind::node_finished, node, std::move(e)});
  });
  // What comes back to the host from this node is enqueued now, ordered after the kernel by its
  // end event, instead of when the dispatcher hears that the kernel ended: hearing it takes a
  // host callback, the inbox and this thread's wake-up, on the critical path of every crossing
  // from GPU to CPU (docs/decisions/025-copies-back-are-issued-with-their-kernel.md).
  // Each compute stream has a copy-back stream of its own, so a copy waiting for a long kernel
  // on one stream does not hold another stream's copy behind it.
  // Nothing overwrites either copy before the copy lands: the next writer of the datum comes
  // after its CPU readers (which wait for the copy) or, for a final value, there is none.
  for (const Arg& a : n.args) {
    if (a.access == Access::read) continue;
    const std::size_t i = a.data.index();
    if (!copied_back_at_launch(node, i)) continue;
    const std::size_t source = g_.data[i].copies.read_at(kHost, "data '" + g_.data[i].name + "'");
    if (source == kDevice0) copy_back(i, early_out_ + s);
  }
  // GPU consumers may be enqueued behind it at once: the stream order and events keep them
  // after it.
  for (std::size_t c : g_.consumers[node]) {
    if (mapping_[c] == Device::gpu) satisfy(c);
  }
}

void Dispatcher::handle(const Message& m) {
  if (m.kind == Message::Kind::prefetch_landed) {
    --in_flight_device_;
    if (m.error)
      fail_by(kNoNode, m.error, "weft::graph: the copy of the graph's inputs to the GPU failed");
    return;
  }
  if (m.kind == Message::Kind::copy_landed) {
    --in_flight_device_;
    if (m.error) {
      fail_by(kNoNode, m.error,
              "weft::graph: the copy of data '" + g_.data[m.index].name + "' to the host failed");
    }
    DataState& ds = data_[m.index];
    ds.host_copy_in_flight = false;
    for (std::size_t waiter : ds.host_waiters) {
      if (--nodes_[waiter].copies_awaited == 0 && !error_) cpu_due_.push_back(waiter);
    }
    ds.host_waiters.clear();
    return;
  }
  const std::size_t node = m.index;
  const bool on_gpu = mapping_[node] == Device::gpu;
  --(on_gpu ? in_flight_device_ : in_flight_cpu_);
  futures_[node] = {};
  if (!on_gpu && !cpu_queue_.empty() && !m.error && !error_) {
    const std::size_t next = cpu_queue_.front();
    cpu_queue_.pop_front();
    cpu_due_.push_back(next);  // submitted after the device work made ready meanwhile
  }
  if (m.error) {
    fail_by(node, m.error,
            "weft::graph: " + g_.describe(node) + " failed on the " + (on_gpu ? "GPU" : "CPU"));
  }
  nodes_[node].finished = true;
  ++finished_;
  if (!on_gpu) {
    NodeRecord r;
    r.node = node;
    r.device = Device::cpu;
    r.lane = m.lane;
    r.start = m.start;
    r.end = m.end;
    r.issued = nodes_[node].issued;
    records_.push_back(r);
  }
  for (std::size_t c : g_.consumers[node]) {
    if (!on_gpu || mapping_[c] == Device::cpu) satisfy(c);
  }
}

void Dispatcher::wait_for_messages(std::vector<Message>& out) {
  {
    // A message ends the wait at once; the 10 ms only bound how late a failure that sends no
    // message (below) is noticed, so the value is safe on any machine.
    std::unique_lock lock(inbox_->mutex);
    inbox_->cv.wait_for(lock, std::chrono::milliseconds(10),
                        [&] { return !inbox_->messages.empty(); });
    out.swap(inbox_->messages);
  }
  if (!out.empty()) return;
  // Nothing came for a while: a failed device never runs the callbacks this run waits for,
  // and a CPU task cancelled by an executor shutdown never reports.
  if (device_ != nullptr && !device_failed_ && in_flight_device_ > 0) {
    try {
      device_->check();
    } catch (...) {
      device_failed_ = true;
      fail(std::current_exception());
    }
  }
  for (std::size_t node = 0; node < futures_.size(); ++node) {
    if (!futures_[node].valid() || !futures_[node].ready()) continue;
    std::lock_guard lock(inbox_->mutex);
    const auto& pending = inbox_->messages;
    const bool reported = std::any_of(pending.begin(), pending.end(), [&](const Message& m) {
      return m.kind == Message::Kind::node_finished && m.index == node;
    });
    if (reported) continue;
    try {
      futures_[node].get();  // throws ShutDown: the task was cancelled
      continue;              // (it ran and its message was handled meanwhile)
    } catch (...) {
      out.push_back({Message::Kind::node_finished, node, std::current_exception()});
    }
  }
}

void Dispatcher::finish_outputs() {
  // The rule that a run ends with every user buffer's final value on the host. Its GPU last
  // writer copies it back as it is enqueued (copied_back_at_launch), so in a run where every
  // node ran this finds nothing left to copy; it stays as the rule's check.
  for (std::size_t i = 0; i < g_.data.size(); ++i) {
    DataEntry& d = g_.data[i];
    if (d.owned || !d.written || d.copies.valid(kHost)) continue;
    (void)d.copies.read_at(kHost, "data '" + d.name + "'");
    copy_back(i, copy_out_);
  }
}

void Dispatcher::collect_times(RunReport& report) {
  if (device_ != nullptr && ref_ && !device_failed_) {
    auto at = [&](Event e) { return ref_host_ + device_->elapsed_ms(*ref_, e) / 1000.0; };
    for (std::size_t node = 0; node < nodes_.size(); ++node) {
      if (mapping_[node] != Device::gpu || !nodes_[node].finished) continue;
      NodeRecord r;
      r.node = node;
      r.device = Device::gpu;
      r.lane = nodes_[node].stream;
      r.start = at(nodes_[node].start);
      r.end = at(nodes_[node].end);
      r.launch_seconds = nodes_[node].launch_seconds;
      r.issued = nodes_[node].issued;
      records_.push_back(r);
    }
    for (const PendingTransfer& t : transfers_) {
      report.transfers.push_back(
          {t.data, t.to_device, g_.data[t.data].bytes, t.stream, at(t.start), at(t.end)});
    }
  }
  for (NodeRecord& r : records_) {
    r.size = g_.nodes[r.node].bytes;
    r.copy_overlap = share_beside_transfers(r.start, r.end, report.transfers);
  }
  std::sort(records_.begin(), records_.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return a.end < b.end; });
  report.nodes = std::move(records_);
  report.bytes_to_device = bytes_to_device_;
  report.bytes_to_host = bytes_to_host_;
}

void Dispatcher::start_ready(bool& prefetched) {
  // Device work first: a CPU node takes every worker, and with the workers bound one to each
  // core the enqueues this thread does after submitting one wait for a core, while the GPU
  // idles (docs/decisions/023-device-work-is-issued-before-cpu-work.md). Nodes ready at once
  // are independent (a dependency would order them), so the order changes no datum's state.
  std::vector<std::size_t> cpu_ready;
  auto guarded = [this](auto&& start) {
    try {
      start();
    } catch (...) {
      fail(std::current_exception());
    }
  };
  while (!ready_.empty() && !error_) {
    const std::size_t node = ready_.front();
    ready_.pop_front();
    if (mapping_[node] == Device::gpu) {
      guarded([&] { start_gpu(node); });  // may make its GPU consumers ready: started here too
    } else {
      cpu_ready.push_back(node);
    }
  }
  if (!prefetched && !error_) {
    prefetched = true;
    guarded([&] { prefetch_inputs(); });
  }
  // Then the CPU nodes: first those whose turn or copies came with the messages just handled
  // (ready before the nodes below), then the newly ready ones.
  std::vector<std::size_t> due;
  due.swap(cpu_due_);
  for (std::size_t node : due) {
    if (!error_) guarded([&] { submit_cpu(node); });
  }
  for (std::size_t node : cpu_ready) {
    if (!error_) guarded([&] { start_cpu(node); });
  }
}

void Dispatcher::run(RunReport& report) {
  t0_ = Clock::now();
  if (device_ != nullptr) {
    ref_ = device_->record(0);
    ref_host_ = since_start();
  }
  start_inputs();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].unsatisfied = g_.nodes[i].producers.size();
    if (nodes_[i].unsatisfied == 0) ready_.push_back(i);
  }
  std::vector<Message> messages;
  bool outputs_started = false;
  bool prefetched = device_ == nullptr;
  for (;;) {
    start_ready(prefetched);
    if (!error_ && finished_ == nodes_.size() && !outputs_started) {
      outputs_started = true;
      try {
        finish_outputs();
      } catch (...) {
        fail(std::current_exception());
      }
    }
    const std::size_t awaited = in_flight_cpu_ + (device_failed_ ? 0 : in_flight_device_);
    if (awaited == 0) break;
    wait_for_messages(messages);
    for (const Message& m : messages) handle(m);
    messages.clear();
  }
  if (!error_ && finished_ != nodes_.size()) {
    fail(std::make_exception_ptr(InvalidState(
        "weft::graph: the run stopped with " + std::to_string(nodes_.size() - finished_) +
        " nodes never ready (a dependency the scoreboard cannot satisfy)")));
  }
  if (device_ != nullptr && !device_failed_) {
    try {
      device_->synchronize();
    } catch (...) {
      device_failed_ = true;
      fail(std::current_exception());
    }
  }
  report.seconds = since_start();
  collect_times(report);
  if (device_ != nullptr) device_->reset_events();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace weft::graph::detail
