// StarPU versions of the task benchmarks: empty tasks submitted one by one, and a chain of
// tasks ordered by StarPU's data dependencies (STARPU_RW on one handle). StarPU is started
// before and shut down after each measured run, outside the timed region, so its idle workers
// never compete with the other contenders for the cores.
#include <starpu.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "../cpu/kernels.hpp"

namespace weft::bench::cpu {

namespace {
CountSlot* g_slots = nullptr;
void empty_kernel(void** /*buffers*/, void* /*arg*/) {
  ++g_slots[static_cast<std::size_t>(starpu_worker_get_id())].v;
}

void increment_kernel(void** buffers, void* /*arg*/) {
  auto* v = reinterpret_cast<std::int64_t*>(STARPU_VARIABLE_GET_PTR(buffers[0]));
  ++*v;
}

starpu_codelet make_empty_codelet() {
  starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.cpu_funcs[0] = empty_kernel;
  cl.nbuffers = 0;
  cl.name = "weft_bench_empty";
  return cl;
}

starpu_codelet make_increment_codelet() {
  starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.cpu_funcs[0] = increment_kernel;
  cl.nbuffers = 1;
  cl.modes[0] = STARPU_RW;
  cl.name = "weft_bench_chain";
  return cl;
}

starpu_codelet g_empty_cl = make_empty_codelet();
starpu_codelet g_increment_cl = make_increment_codelet();
bool g_running = false;
}  // namespace

bool starpu_available() { return true; }

void starpu_start(int ncpus) {
  if (g_running) return;
  setenv("STARPU_SILENT", "1", 0);
  setenv("STARPU_WORKERS_NOBIND", "1", 0);
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = ncpus;
  conf.ncuda = 0;
  conf.nopencl = 0;
  if (std::getenv("STARPU_SCHED") == nullptr) conf.sched_policy_name = "eager";
  if (starpu_init(&conf) != 0) throw std::runtime_error("starpu_init failed");
  g_running = true;
}

void starpu_stop() {
  if (!g_running) return;
  starpu_shutdown();
  g_running = false;
}

std::int64_t empty_tasks_starpu(std::int64_t n) {
  std::vector<CountSlot> slots(kMaxCountSlots);
  g_slots = slots.data();
  for (std::int64_t i = 0; i < n; ++i) {
    starpu_task* t = starpu_task_create();
    t->cl = &g_empty_cl;
    if (starpu_task_submit(t) != 0) throw std::runtime_error("starpu_task_submit failed");
  }
  starpu_task_wait_for_all();
  g_slots = nullptr;
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

std::int64_t task_chain_starpu(std::int64_t n) {
  std::int64_t value = 0;
  starpu_data_handle_t h;
  starpu_variable_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&value),
                                sizeof(value));
  for (std::int64_t i = 0; i < n; ++i) {
    if (starpu_task_insert(&g_increment_cl, STARPU_RW, h, 0) != 0) {
      throw std::runtime_error("starpu_task_insert failed");
    }
  }
  starpu_task_wait_for_all();
  starpu_data_unregister(h);
  return value;
}

}  // namespace weft::bench::cpu
