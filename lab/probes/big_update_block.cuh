// The trace probe's 128 x 128 update block (cholesky_trace_probe.cu's :big sizes): the
// applications' UpdateBlockWide (apps/gpu/cholesky_pool.hpp), which grew out of the body this
// file held for decisions 040 and 043. At c281288 (decision 040's results) that body read and
// wrote C an element at a time; at 6fdef5c (decision 043's) it was UpdateBlockWide's body
// without the check of the copies' alignment.
#pragma once

#include "cholesky_pool.hpp"

namespace lab {

using UpdateBlockBig = apps::gpu::UpdateBlockWide;

}  // namespace lab
