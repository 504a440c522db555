// weft/error.hpp - the one error hierarchy of weft.
//
// Every error weft raises derives from weft::Error (itself a std::runtime_error), so callers
// can catch everything weft throws in one place, or a precise subclass where they care.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace weft {

/// Base of every exception weft throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument was outside what the callee accepts (zero workers, grain 0, a null callable...).
/// The message names the argument and the value.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// The object was used in a state that forbids the call (waiting on a group from inside one of
/// its own tasks, getting a future twice...).
class InvalidState : public Error {
 public:
  using Error::Error;
};

/// The executor (or pool) has shut down: the call came after shutdown began, or the task was
/// cancelled by a shutdown before it started.
class ShutDown : public Error {
 public:
  using Error::Error;
};

/// The task (or group) was cancelled before it ran.
class Cancelled : public Error {
 public:
  using Error::Error;
};

/// A wait exceeded its deadline.
class Timeout : public Error {
 public:
  using Error::Error;
};

/// An allocator could not find the memory asked for (device memory exhausted, or a configured
/// limit reached). The message names the request and what the allocator held.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// A message between task streams could not be delivered: no such rank, a tag out of range,
/// sizes that differ, or the other side ended without sending or receiving it.
class MessageError : public Error {
 public:
  using Error::Error;
};

/// A CUDA runtime or driver call failed. The message names the call, the CUDA error and the
/// source location of the call.
class CudaError : public Error {
 public:
  CudaError(std::string call, int code, std::string what)
      : Error(std::move(what)), call_(std::move(call)), code_(code) {}
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  std::string call_;
  int code_;
};

}  // namespace weft
