// apps/gpu/first_null.hpp - the name of an entry point's first null array, for its
// std::invalid_argument (docs/apps.md: every entry point checks its input before it pushes a
// task).
#pragma once

#include <initializer_list>
#include <utility>

namespace apps::gpu {

/// The name of the first null pointer of `named`, or null when none is.
inline const char* first_null(std::initializer_list<std::pair<const char*, const void*>> named) {
  for (const auto& [name, pointer] : named) {
    if (pointer == nullptr) return name;
  }
  return nullptr;
}

}  // namespace apps::gpu
