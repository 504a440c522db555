// docs/graph.md's opening example, built and run as a test so that it stays true. It runs on
// the emulated device (host memory and threads standing in for a GPU), so it runs anywhere.
#include <weft/weft.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace wg = weft::graph;

// The GPU side of `affine`. A CUDA program enqueues its kernel on call.stream here, from a .cu
// file, and never waits for it; on the emulated device the CPU side runs in its place.
void affine_on_gpu(const wg::GpuCall&) { throw std::logic_error("needs a CUDA device"); }

// y = a * x + b: a kernel with a CPU and a GPU implementation. Its name keys its cost models.
wg::Kernel affine(float a, float b) {
  return {"affine",
          [a, b](const wg::CpuCall& c) {
            const float* x = c.get<float>(0);
            float* y = c.get<float>(1);
            weft::cpu::parallel_for(*c.executor, 0, static_cast<std::int64_t>(c.count<float>(0)),
                                    [&](std::int64_t i) { y[i] = a * x[i] + b; });
          },
          affine_on_gpu,
          {}};
}

// out[0] = the mean of x: no GPU implementation, so it is a fence (it runs on the host).
wg::Kernel mean() {
  return {"mean",
          [](const wg::CpuCall& c) {
            const float* x = c.get<float>(0);
            double s = 0;
            for (std::size_t i = 0; i < c.count<float>(0); ++i) s += x[i];
            c.get<float>(1)[0] = static_cast<float>(s / static_cast<double>(c.count<float>(0)));
          },
          {},
          {}};
}

// in -> affine(2, 1) -> t -> affine(0.5, -0.5) -> u -> mean -> out
struct Pipeline {
  std::vector<float> in, out = std::vector<float>(1);
  wg::Graph g;
  explicit Pipeline(std::size_t n) : in(n) {
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 8);
    const wg::Data d_in = g.add_data("in", in.data(), n * sizeof(float));  // the caller's buffer
    const wg::Data d_out = g.add_data("out", out.data(), sizeof(float));
    const wg::Data t = g.add_data("t", n * sizeof(float));  // owned by the graph
    const wg::Data u = g.add_data("u", n * sizeof(float));
    g.add_node(affine(2.0f, 1.0f), {wg::read(d_in), wg::write(t)});
    g.add_node(affine(0.5f, -0.5f), {wg::read(t), wg::write(u)});
    g.add_node(mean(), {wg::read(u), wg::write(d_out)});  // dependencies follow from the data
  }
};

int main() {
  weft::cpu::Executor ex;
  wg::RuntimeOptions options;
  options.device = wg::DeviceKind::emulated;
  wg::Runtime rt(ex, options);

  // Calibrate the cost models: every node on the CPU (A-Free), then every node that has a GPU
  // implementation on the GPU (D-Map), at two sizes, fitted at once.
  Pipeline small(1 << 16), large(1 << 18);
  wg::Calibration calibration;
  rt.set_learning(false);
  for (Pipeline* p : {&small, &large}) {
    for (const wg::Policy policy : {wg::Policy::a_free, wg::Policy::d_map}) {
      (void)rt.run(p->g, policy);  // a warm-up run
      calibration.add(p->g, rt.run(p->g, policy));
    }
  }
  calibration.fit_into(rt.models());
  rt.set_learning(true);  // from now on every run refines the models

  // Map each node with PPTM from the models, and run; the graph can run again with new input.
  const wg::RunReport report = rt.run(large.g, wg::Policy::pptm);
  const bool mapped = report.mapping.size() == 3 && report.mapping[2] == wg::Device::cpu;
  return mapped && large.out[0] == 3.5f ? 0 : 1;
}
