// weft/gpu/device.cuh - the resident task-multiplexed kernel (seed 000 §3.2.4). Include it in
// exactly the CUDA translation unit(s) that make a DeviceProgram:
//
//   // tasks.cu
//   #include <weft/gpu/device.cuh>
//   weft::gpu::DeviceProgram my_program() { return weft::gpu::device_program<MyTasks, 64>(); }
//
// Each block serves one slot in pinned host-mapped memory until it reads EXIT. Thread 0 polls
// the slot's state word with system-scope acquire loads, backing off with __nanosleep while the
// slot is idle (an idle pool stays quiet on PCIe); the block copies the payload into shared
// memory, runs the task with all its threads, copies the results back, and thread 0 publishes
// FINISHED with a system-scope release store.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/device_program.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

namespace detail {

// Longest idle back-off of a polling block. 4 us keeps a slot's polling traffic well under a
// percent of PCIe bandwidth even with a thousand blocks; the latency it adds to a task that
// arrives on an idle pool is at most this.
inline constexpr unsigned kMaxPollBackoffNs = 4096;

template <class Types, std::size_t Capacity>
__global__ void resident_kernel(unsigned char* slots, std::size_t stride, int first_slot) {
  extern __shared__ __align__(16) unsigned char shared[];
  unsigned char* payload = shared;  // Capacity bytes: the task's payload
  unsigned char* task_shared = shared + ((Capacity + 15) / 16) * 16;  // the type's own space
  __shared__ std::uint32_t s_state, s_type, s_size;

  const int slot_index = first_slot + static_cast<int>(blockIdx.x);
  unsigned char* slot = slots + static_cast<std::size_t>(slot_index) * stride;
  auto* head = reinterpret_cast<SlotHeader*>(slot);
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> state(head->state);

  for (;;) {
    if (threadIdx.x == 0) {
      unsigned backoff = 32;
      std::uint32_t s;
      for (;;) {
        // acquire, system scope: pairs with the scheduler's release store of READY (or EXIT);
        // the type, size and payload it wrote before are visible after it.
        s = state.load(cuda::memory_order_acquire);
        if (s == static_cast<std::uint32_t>(SlotState::ready) ||
            s == static_cast<std::uint32_t>(SlotState::exit)) {
          break;
        }
        __nanosleep(backoff);
        backoff = backoff < kMaxPollBackoffNs ? backoff * 2 : kMaxPollBackoffNs;
      }
      s_state = s;
      s_type = head->type;
      s_size = head->payload_size;
    }
    __syncthreads();
    if (s_state == static_cast<std::uint32_t>(SlotState::exit)) return;

    const std::uint32_t size = s_size <= Capacity ? s_size : 0;
    const unsigned char* in = slot + kSlotHeaderBytes;
    for (std::uint32_t i = threadIdx.x; i < size; i += blockDim.x) payload[i] = in[i];
    __syncthreads();

    const BlockContext ctx(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), slot_index,
                           task_shared);
    const TaskStatus status = s_size <= Capacity ? Types::dispatch(s_type, payload, s_size, ctx)
                                                 : TaskStatus::bad_payload_size;
    __syncthreads();

    unsigned char* out = slot + kSlotHeaderBytes;
    for (std::uint32_t i = threadIdx.x; i < size; i += blockDim.x) out[i] = payload[i];
    // Every thread makes its result bytes (and the task's global-memory writes) visible
    // system-wide before thread 0's FINISHED can be seen.
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      head->status = static_cast<std::uint32_t>(status);
      // release, system scope: pairs with the scheduler's acquire load of FINISHED.
      state.store(static_cast<std::uint32_t>(SlotState::finished), cuda::memory_order_release);
    }
    __syncthreads();  // s_state/s_type are rewritten by thread 0 in the next round
  }
}

template <class Types, std::size_t Capacity>
int launch_resident(void* slots, std::size_t stride, int first_slot, int blocks, int threads,
                    std::size_t shared_bytes, void* stream) {
  auto kernel = &resident_kernel<Types, Capacity>;
  if (shared_bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared_bytes));
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  kernel<<<blocks, threads, shared_bytes, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned char*>(slots), stride, first_slot);
  return static_cast<int>(cudaGetLastError());
}

template <class Types, std::size_t Capacity>
int resident_occupancy(int threads, std::size_t shared_bytes, int* blocks) {
  return static_cast<int>(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, &resident_kernel<Types, Capacity>, threads, shared_bytes));
}

}  // namespace detail

/// The DeviceProgram of a task-type list and payload capacity (must match the pool's).
template <class Types, std::size_t Capacity>
DeviceProgram device_program() {
  static_assert(Types::kMaxPayload <= Capacity,
                "weft::gpu::device_program: a task type's Payload exceeds the capacity");
  DeviceProgram p;
  p.launch = &detail::launch_resident<Types, Capacity>;
  p.max_blocks_per_sm = &detail::resident_occupancy<Types, Capacity>;
  p.payload_capacity = Capacity;
  p.shared_bytes = ((Capacity + 15) / 16) * 16 + Types::kSharedBytes;
  return p;
}

}  // namespace weft::gpu
