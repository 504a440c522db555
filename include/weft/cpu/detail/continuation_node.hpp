// weft/cpu/detail/continuation_node.hpp - the shared node behind weft::cpu::Continuation.
// Included at the end of task_group.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

namespace weft::cpu {

namespace detail {
void report_unobserved_error(const char* where, std::exception_ptr e) noexcept;
}

struct Continuation::Node {
  Executor* executor;
  Node* parent = nullptr;  // arrives at the parent once this continuation has run
  // 1 for the unreleased handle + 1 per unfinished child. Reaching zero queues `then_task`.
  std::atomic<std::int64_t> pending{1};
  std::atomic<bool> has_error{false};
  std::atomic<bool> cancelled{false};
  std::exception_ptr error;
  detail::Task* then_task = nullptr;  // built at create(), queued exactly once

  void record_error(std::exception_ptr e) noexcept {
    bool expected = false;
    // acq_rel: one winner writes `error`; the continuation reads it after the final
    // arrive's acquire.
    if (has_error.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      error = std::move(e);
    }
    cancelled.store(true, std::memory_order_relaxed);
  }

  void arrive() {
    // acq_rel: release this child's effects to the continuation; acquire the others'.
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) executor->enqueue(then_task);
  }
};

namespace detail {

template <class F>
struct ContinuationChild {
  Continuation::Node* node;
  F fn;
  void operator()() {
    // relaxed: advisory, as for groups.
    if (!node->cancelled.load(std::memory_order_relaxed)) {
      try {
        fn();
      } catch (...) {
        node->record_error(std::current_exception());
      }
    }
    node->arrive();
  }
  void on_cancel() noexcept { node->arrive(); }
};

template <class F>
struct ContinuationBody {
  Continuation::Node* node;
  F fn;
  void operator()() {
    struct Free {
      Continuation::Node* n;
      ~Free() {
        Continuation::Node* parent = n->parent;
        delete n;
        if (parent != nullptr) parent->arrive();
      }
    } free_node{node};
    // acquire: pairs with the writer's acq_rel CAS (already ordered by the final arrive).
    std::exception_ptr e = node->has_error.load(std::memory_order_acquire) ? node->error : nullptr;
    if constexpr (std::is_invocable_v<F&, std::exception_ptr>) {
      fn(std::move(e));
    } else {
      if (e) report_unobserved_error("weft::cpu::Continuation child", e);
      fn();
    }
  }
  void on_cancel() noexcept {
    Continuation::Node* parent = node->parent;
    delete node;
    if (parent != nullptr) parent->arrive();
  }
};

}  // namespace detail

template <class F>
Continuation Continuation::create(Executor& ex, F&& then) {
  return make(ex, nullptr, std::forward<F>(then));
}

template <class F>
Continuation Continuation::create_child(Ref parent, F&& then) {
  return make(*parent.node_->executor, parent.node_, std::forward<F>(then));
}

inline Continuation::Ref Continuation::ref() const {
  if (node_ == nullptr) {
    throw InvalidState("weft::cpu::Continuation::ref: the handle was released");
  }
  return Ref(node_);
}

inline void Continuation::spawn_into(Node* node, detail::Task* t) {
  // relaxed: the caller holds a count (the handle, or a running child), so pending cannot
  // reach zero meanwhile.
  node->pending.fetch_add(1, std::memory_order_relaxed);
  node->executor->enqueue(t);
}

template <class F>
void Continuation::Ref::spawn(F&& f) const {
  if (detail::is_null_callable(f)) {
    throw InvalidArgument("weft::cpu::Continuation::Ref::spawn: the callable is empty (null)");
  }
  spawn_into(node_, detail::make_task(
                        detail::ContinuationChild<std::decay_t<F>>{node_, std::forward<F>(f)},
                        nullptr, detail::tl_context.depth + 1));
}

template <class F>
Continuation Continuation::make(Executor& ex, Node* parent, F&& then) {
  if (detail::is_null_callable(then)) {
    throw InvalidArgument("weft::cpu::Continuation::create: the continuation is empty (null)");
  }
  auto* node = new Node{};
  node->executor = &ex;
  node->parent = parent;
  try {
    node->then_task =
        detail::make_task(detail::ContinuationBody<std::decay_t<F>>{node, std::forward<F>(then)},
                          nullptr, detail::tl_context.depth + 1);
  } catch (...) {
    delete node;
    throw;
  }
  // relaxed: the parent is kept alive by the running child that creates us.
  if (parent != nullptr) parent->pending.fetch_add(1, std::memory_order_relaxed);
  return Continuation(node);
}

template <class F>
void Continuation::spawn(F&& f) {
  if (node_ == nullptr) {
    throw InvalidState("weft::cpu::Continuation::spawn: the handle was released");
  }
  if (detail::is_null_callable(f)) {
    throw InvalidArgument("weft::cpu::Continuation::spawn: the callable is empty (null)");
  }
  Ref(node_).spawn(std::forward<F>(f));
}

inline void Continuation::release() {
  if (node_ == nullptr) {
    throw InvalidState("weft::cpu::Continuation::release: already released");
  }
  std::exchange(node_, nullptr)->arrive();
}

}  // namespace weft::cpu
