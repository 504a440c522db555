// weft/stream/request.hpp - a non-blocking send or receive to wait on.
//
//   weft::stream::Request r = ts.irecv(weft::stream::host(in.data(), n), 0, 5);
//   ... work that does not touch `in` ...
//   r.wait();   // `in` holds the message; throws weft::MessageError if it never can
//
// A request belongs to the task stream that made it and is waited on from that stream's
// thread. Waiting on it (or on any other request of the stream) also moves the stream's other
// requests along, so that a stream blocked in one receive never stalls a send it started
// before. A request that is dropped without being waited on is still completed or failed when
// its task stream ends, and the World reports it.
#pragma once

#include <cstddef>
#include <memory>

#include "weft/stream/buffer.hpp"

namespace weft::stream {

namespace detail {
struct Operation;
}

class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::Operation> op) noexcept : op_(std::move(op)) {}

  /// Blocks until the transfer is complete: a send's buffer may be reused, a receive's buffer
  /// holds the message (a device buffer included: the copy into it has finished). Throws
  /// weft::MessageError when the transfer failed; a second wait returns at once (or throws
  /// the same error again). Waiting on an empty request is a no-op.
  void wait();
  /// True once the transfer is complete (throws as wait() does if it failed); never blocks.
  [[nodiscard]] bool test();
  /// The path the transfer took (Path::None until it completes).
  [[nodiscard]] Path path() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept;
  [[nodiscard]] bool empty() const noexcept { return op_ == nullptr; }

 private:
  std::shared_ptr<detail::Operation> op_;
};

}  // namespace weft::stream
