// weft/cpu/detail/cpu_relax.hpp - the spin-wait hint every back-off loop uses.
#pragma once

namespace weft::cpu::detail {

/// Tells the core we are spinning (x86 PAUSE, Arm YIELD): saves power and lets the sibling
/// hyperthread run.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace weft::cpu::detail
