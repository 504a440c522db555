// weft/cpu/detail/cpu_relax.hpp - the spin-wait hint every back-off loop uses.
#pragma once

namespace weft::cpu::detail {

/// Tells the core we are spinning (x86 PAUSE, Arm YIELD): saves power and lets the sibling
/// hyperthread run.
inline void cpu_relax() noexcept {
#if defined(WEFT_PROBE_RELAX_WITHOUT_PAUSE) && (defined(__x86_64__) || defined(__i386__))
  // Probe builds only (scripts/probes/latency_trace.cu): the same wait without PAUSE, to see
  // whether a hypervisor that exits on pause loops takes a spinning thread's core.
  const unsigned long long until = __builtin_ia32_rdtsc() + 100;
  while (__builtin_ia32_rdtsc() < until) {
  }
#elif defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace weft::cpu::detail
