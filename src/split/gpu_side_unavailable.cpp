// The splitter's CUDA side where weft was built without CUDA: asking for it says so.
#include "weft/error.hpp"
#include "weft/split/splitter.hpp"

namespace weft::split {

std::unique_ptr<GpuSide> GpuSide::cuda(int ordinal) {
  throw InvalidState("weft::split::GpuSide::cuda(" + std::to_string(ordinal) +
                     "): weft was built without CUDA");
}

}  // namespace weft::split
