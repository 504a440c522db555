// weft/weft.hpp - weft's user API in one header: the CPU executor and its algorithms, the
// errors, the GPU thread pool (its task types are compiled for a GPU by weft/gpu/device.cuh in
// a CUDA translation unit), and the graph layer (graphs, their runtime, the mappers and cost
// models, the device memory allocator). Nothing here is an application's kernel or an
// internal (detail/) header.
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
#include "weft/gpu/pool.hpp"
#include "weft/gpu/record.hpp"
#include "weft/gpu/scheduler_observer.hpp"
#include "weft/gpu/task.hpp"
#include "weft/graph/device/bfc_allocator.hpp"
#include "weft/graph/graph.hpp"
#include "weft/graph/mapping/calibration.hpp"
#include "weft/graph/mapping/cost_model.hpp"
#include "weft/graph/mapping/cost_models.hpp"
#include "weft/graph/mapping/mincut.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/graph/mapping/policies.hpp"
#include "weft/graph/mapping/problem.hpp"
#include "weft/graph/mapping/schedule.hpp"
#include "weft/graph/runtime.hpp"
#include "weft/graph/stream_copy.hpp"
#include "weft/graph/trace.hpp"
#include "weft/split/splitter.hpp"
#include "weft/split/store.hpp"
#include "weft/split/tables.hpp"
#include "weft/stream/world.hpp"
