// weft/weft.hpp - the whole public API of weft in one header.
//
// Compiles with a plain C++20 compiler; CUDA-only parts live behind .cuh headers that only CUDA
// translation units include.
#pragma once

#include "weft/cpu/executor.hpp"
#include "weft/cpu/future.hpp"
#include "weft/cpu/options.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/cpu/partition.hpp"
#include "weft/cpu/task_group.hpp"
#include "weft/cpu/team.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/error.hpp"
#include "weft/graph/bfc_allocator.hpp"
#include "weft/graph/cost_model.hpp"
#include "weft/graph/cost_models.hpp"
#include "weft/graph/factor_kernels.hpp"
#include "weft/graph/factor_ops.hpp"
#include "weft/graph/graph.hpp"
#include "weft/graph/mincut.hpp"
#include "weft/graph/model_store.hpp"
#include "weft/graph/policies.hpp"
#include "weft/graph/runtime.hpp"
#include "weft/graph/schedule.hpp"
