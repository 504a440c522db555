// The emulated device (CI's GPU path): device memory is host memory from aligned_alloc, each
// stream is a thread that runs its operations in order, events are completion flags with the
// time they completed. A node's "GPU implementation" is its CPU implementation run on the
// emulated device's memory, so results can be checked, and every copy, cross-stream wait and
// host callback of the CUDA path is exercised.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "device_backend.hpp"
#include "weft/error.hpp"

namespace weft::graph::detail {

namespace {

using Clock = std::chrono::steady_clock;

class EmulatedDevice final : public DeviceBackend {
 public:
  explicit EmulatedDevice(int streams) {
    if (streams < 1) throw InvalidArgument("weft::graph: the emulated device needs >= 1 stream");
    for (int i = 0; i < streams; ++i) streams_.push_back(std::make_unique<Stream>());
    for (auto& s : streams_) s->thread = std::thread([this, st = s.get()] { serve(*st); });
  }
  ~EmulatedDevice() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& s : streams_) s->thread.join();
  }

  [[nodiscard]] std::string name() const override { return "emulated device"; }
  [[nodiscard]] bool emulated() const noexcept override { return true; }
  [[nodiscard]] int ordinal() const noexcept override { return 0; }
  [[nodiscard]] BackingAllocator backing() override {
    return {[](std::size_t n) { return std::aligned_alloc(256, (n + 255) / 256 * 256); },
            [](void* p) { std::free(p); }, "emulated device"};
  }
  [[nodiscard]] int streams() const noexcept override { return static_cast<int>(streams_.size()); }

  void copy_to_device(int s, void* device, const void* host, std::size_t bytes) override {
    enqueue(s, [=](Stream&) { std::memcpy(device, host, bytes); });
  }
  void copy_to_host(int s, void* host, const void* device, std::size_t bytes) override {
    enqueue(s, [=](Stream&) { std::memcpy(host, device, bytes); });
  }
  void launch(int s, const Kernel& kernel, std::vector<void*> pointers,
              std::vector<std::size_t> bytes, cpu::Executor* executor) override {
    enqueue(s, [&kernel, pointers = std::move(pointers), bytes = std::move(bytes),
                executor](Stream& st) {
      if (st.error) return;  // a failed stream runs nothing more (as a CUDA error is sticky)
      CpuCall call;
      call.pointers = pointers;
      call.bytes = bytes;
      call.executor = executor;
      try {
        kernel.cpu(call);
      } catch (...) {
        st.error = std::current_exception();
      }
    });
  }
  Event record(int s) override {
    check_stream(s);
    Event e;
    {
      std::lock_guard lock(mutex_);
      e = events_.size();
      events_.emplace_back();
      // An idle stream has reached this point now, as a GPU's idle stream does within
      // microseconds. Timing it by the stream thread instead added that thread's wake-up, up to
      // milliseconds on a loaded machine: the run's reference event (Dispatcher::run) came out
      // late and every GPU node's time early, before its CPU producer had ended.
      const Stream& st = *streams_[static_cast<std::size_t>(s)];
      if (st.ops.empty() && !st.busy) {
        events_[e].done = true;
        events_[e].when = Clock::now();
        events_[e].error = st.error;  // idle: its thread's last write came before busy = false
        return e;                     // nothing waits on an event before record() has returned it
      }
    }
    enqueue(s, [this, e](Stream& st) {
      {
        std::lock_guard lock(mutex_);
        events_[e].done = true;
        events_[e].when = Clock::now();
        events_[e].error = st.error;
      }
      changed_.notify_all();
    });
    return e;
  }
  void wait(int s, Event e) override {
    enqueue(s, [this, e](Stream& st) {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return events_[e].done; });
      // The recording stream's error reaches the work behind the wait, as a sticky CUDA error
      // reaches every stream: a consumer of a failed producer does not run.
      if (!st.error) st.error = events_[e].error;
    });
  }
  void on_host(int s, std::function<void(std::exception_ptr)> callback) override {
    enqueue(s, [cb = std::move(callback)](Stream& st) { cb(st.error); });
  }
  [[nodiscard]] double elapsed_ms(Event from, Event to) override {
    std::lock_guard lock(mutex_);
    return std::chrono::duration<double, std::milli>(events_.at(to).when - events_.at(from).when)
        .count();
  }
  void check() override {}  // a failing implementation reaches the callbacks as an exception
  void synchronize() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      for (auto& s : streams_) {
        if (!s->ops.empty() || s->busy) return false;
      }
      return true;
    });
  }
  void reset_events() override {
    synchronize();
    std::lock_guard lock(mutex_);
    events_.clear();
    for (auto& s : streams_) s->error = nullptr;
  }
  bool pin(void*, std::size_t) override { return false; }  // host memory already
  [[nodiscard]] std::function<void(void*)> unpinner() const override {
    return [](void*) {};
  }
  void copy_to_host_now(void* host, const void* device, std::size_t bytes) override {
    std::memcpy(host, device, bytes);
  }

 private:
  struct Stream {
    std::deque<std::function<void(Stream&)>> ops;
    bool busy = false;
    // Written by the stream's thread (read by record() under the lock once the stream is
    // idle), and reset after synchronize.
    std::exception_ptr error;
    std::thread thread;
  };
  struct EventState {
    bool done = false;
    Clock::time_point when{};
    std::exception_ptr error;  // the recording stream's error when it reached the event
  };

  void check_stream(int s) const {
    if (s < 0 || s >= streams())
      throw InvalidArgument("weft::graph: no stream " + std::to_string(s));
  }
  void enqueue(int s, std::function<void(Stream&)> op) {
    check_stream(s);
    {
      std::lock_guard lock(mutex_);
      streams_[static_cast<std::size_t>(s)]->ops.push_back(std::move(op));
    }
    changed_.notify_all();
  }

  void serve(Stream& st) {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !st.ops.empty(); });
      if (st.ops.empty()) return;  // stopping, nothing left
      auto op = std::move(st.ops.front());
      st.ops.pop_front();
      st.busy = true;
      lock.unlock();
      op(st);
      lock.lock();
      st.busy = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::deque<EventState> events_;  // a deque: records append while waits read
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_emulated_device(int streams) {
  return std::make_unique<EmulatedDevice>(streams);
}

}  // namespace weft::graph::detail
