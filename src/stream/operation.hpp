// One send or receive of a task stream (src/stream only), shared by its Request, its stream's
// list of pending operations, and the mailbox or MPI channel it waits in.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "stream/device.hpp"
#include "stream/stream_life.hpp"
#include "weft/stream/buffer.hpp"

namespace weft::stream::detail {

class StreamCore;
struct MpiState;

enum class OpKind : std::uint8_t { Send, Recv };

/// Pending -> Copying -> Done, or Pending -> Done, or -> Failed from Pending or Copying.
/// Pending ops are moved on by whoever matches them (any thread, under the mailbox's lock, or
/// the owner's progress for MPI); Copying -> Done only by the owner, once `copied` is done.
enum class OpStatus : std::uint8_t { Pending, Copying, Done, Failed };

struct Operation {
  OpKind kind = OpKind::Send;
  int self = 0;  // the owner's rank
  int peer = 0;  // destination of a send, source of a receive
  int tag = 0;
  Buffer buffer;
  StreamCore* owner = nullptr;
  /// The owner's life and the run that posted the op: `owner` is used only while that run is
  /// under way (a Request kept longer reports how its op ended instead).
  std::shared_ptr<StreamLife> life;
  std::uint64_t run = 0;

  /// Stored with release after `error`, `path` and `copied` are written; loaded with acquire
  /// by the owner's wait, which then reads them.
  std::atomic<OpStatus> status{OpStatus::Pending};
  std::exception_ptr error;
  Path path = Path::None;
  /// Recorded on the owner's queue when the op was posted: a send's bytes are ready (the
  /// kernels before it wrote them), a receive's buffer is free (the kernels before it have
  /// read it).
  EventPtr ready;
  /// The in-process copy's completion.
  EventPtr copied;
  /// A buffered (eager) host send: its bytes, copied aside when it was posted.
  std::vector<std::byte> eager;
  bool is_eager = false;
  /// Set by the owner when a wait or test has seen the op end (reported or not).
  bool observed = false;
  std::unique_ptr<MpiState> mpi;

  Operation();
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  [[nodiscard]] bool ended() const noexcept {
    const OpStatus s = status.load(std::memory_order_acquire);
    return s == OpStatus::Done || s == OpStatus::Failed;
  }
  [[nodiscard]] const void* source_bytes() const noexcept {
    return is_eager ? static_cast<const void*>(eager.data()) : buffer.data;
  }
};

using OpPtr = std::shared_ptr<Operation>;

}  // namespace weft::stream::detail
