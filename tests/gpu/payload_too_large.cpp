// Must NOT compile: a task type whose Payload exceeds the pool's capacity (ctest checks the
// compiler's message).
#include "weft/gpu/pool.hpp"

struct Huge {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    unsigned char bytes[128];
  };
  static void run(Payload&, const weft::gpu::BlockContext&) {}
};

int main() {
  weft::gpu::Pool<weft::gpu::TaskTypes<Huge>, 64> pool;
  return 0;
}
