// The graph runtime on the emulated device (CI's GPU path): every mapping gives the same
// results, data cross between host and device only where a node needs them, repeated runs reuse
// device memory, independent nodes overlap, failures are reported once and stop the run.
#include "weft/graph/runtime.hpp"
#include "weft/graph/trace.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"

namespace {

using weft::graph::CpuCall;
using weft::graph::Data;
using weft::graph::Device;
using weft::graph::DeviceKind;
using weft::graph::Graph;
using weft::graph::Kernel;
using weft::graph::Policy;
using weft::graph::read;
using weft::graph::read_write;
using weft::graph::Runtime;
using weft::graph::RuntimeOptions;
using weft::graph::write;

constexpr auto kCpu = Device::cpu;
constexpr auto kGpu = Device::gpu;

// A GPU implementation that must never be called: on the emulated device the CPU one runs.
void not_on_emulated(const weft::graph::GpuCall&) {
  throw std::logic_error("the emulated device ran a GPU implementation");
}

// out[i] = a * in[i] + b
Kernel affine(float a, float b) {
  return {"affine",
          [a, b](const CpuCall& c) {
            const float* in = c.get<float>(0);
            float* out = c.get<float>(1);
            for (std::size_t i = 0; i < c.count<float>(0); ++i) out[i] = a * in[i] + b;
          },
          not_on_emulated,
          {}};
}
// out = x + y
Kernel add() {
  return {"add",
          [](const CpuCall& c) {
            for (std::size_t i = 0; i < c.count<float>(0); ++i) {
              c.get<float>(2)[i] = c.get<float>(0)[i] + c.get<float>(1)[i];
            }
          },
          not_on_emulated,
          {}};
}
// out[i] = mean of in (a fence: CPU only, like the factor application's AVG)
Kernel avg() {
  return {"avg",
          [](const CpuCall& c) {
            const std::size_t n = c.count<float>(0);
            const double s = std::accumulate(c.get<float>(0), c.get<float>(0) + n, 0.0);
            for (std::size_t i = 0; i < c.count<float>(1); ++i) c.get<float>(1)[i] = float(s / n);
          },
          {},
          {}};
}

// "<prefix><i>", appended: GCC 12 warns falsely (-Wrestrict, PR 105651) on "o" + to_string(i).
std::string numbered(const char* prefix, std::size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

RuntimeOptions emulated(int compute_streams = 3, int cpu_nodes_at_once = 1) {
  RuntimeOptions o;
  o.device = DeviceKind::emulated;
  o.compute_streams = compute_streams;
  o.cpu_nodes_at_once = cpu_nodes_at_once;
  o.memory.first_region = 1 << 20;
  return o;
}

// in -> a1 -> a2 -+-> add -> avg(fence) -> a4 -> out
//          \-> a3 -+
struct Diamond {
  static constexpr std::size_t kN = 1000;
  std::vector<float> in = std::vector<float>(kN), out = std::vector<float>(kN);
  Graph g;
  Data d_in, t1, t2, t3, t4, t5, d_out;
  Diamond() {
    for (std::size_t i = 0; i < kN; ++i) in[i] = float(i % 17) * 0.5f;
    d_in = g.add_data("in", in.data(), kN * sizeof(float));
    d_out = g.add_data("out", out.data(), kN * sizeof(float));
    t1 = g.add_data("t1", kN * sizeof(float));
    t2 = g.add_data("t2", kN * sizeof(float));
    t3 = g.add_data("t3", kN * sizeof(float));
    t4 = g.add_data("t4", kN * sizeof(float));
    t5 = g.add_data("t5", kN * sizeof(float));
    g.add_node(affine(2, 1), {read(d_in), write(t1)}, "a1");
    g.add_node(affine(1, -3), {read(t1), write(t2)}, "a2");
    g.add_node(affine(0.5f, 0), {read(t1), write(t3)}, "a3");
    g.add_node(add(), {read(t2), read(t3), write(t4)}, "add");
    g.add_node(avg(), {read(t4), write(t5)}, "avg");
    g.add_node(affine(3, 2), {read(t5), write(d_out)}, "a4");
  }
  [[nodiscard]] std::vector<float> expected() const {
    double s = 0;
    for (float x : in) {
      const float t1v = 2 * x + 1;
      s += (t1v - 3) + 0.5f * t1v;
    }
    return std::vector<float>(kN, 3 * float(s / kN) + 2);
  }
};

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-3f * std::abs(want[i]) + 1e-3f) << "at " << i;
  }
}

TEST(Runtime, EveryMappingGivesTheSameResult) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Device> m(6);
    for (std::size_t i = 0; i < 6; ++i) m[i] = rng() % 2 ? kGpu : kCpu;
    m[4] = kCpu;  // the fence
    std::fill(d.out.begin(), d.out.end(), -1.0f);
    const auto report = rt.run(d.g, m);
    expect_near_all(d.out, d.expected());
    EXPECT_EQ(report.graph, d.g.id());
    EXPECT_EQ(report.nodes.size(), 6u);
    for (const auto& r : report.nodes) EXPECT_EQ(r.device, m[r.node]) << "node " << r.node;
  }
}

TEST(Runtime, DataCrossOnlyWhereANodeNeedsThem) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  const std::size_t b = Diamond::kN * sizeof(float);
  // All on the CPU: nothing moves.
  auto r = rt.run(d.g, Policy::a_free);
  EXPECT_EQ(r.bytes_to_device + r.bytes_to_host, 0u);
  // D-Map: `in` goes over once, t4 comes back for the fence, t5 goes over, `out` comes back.
  r = rt.run(d.g, Policy::d_map);
  EXPECT_EQ(r.mapping, (std::vector<Device>{kGpu, kGpu, kGpu, kGpu, kCpu, kGpu}));
  EXPECT_EQ(r.bytes_to_device, 2 * b);
  EXPECT_EQ(r.bytes_to_host, 2 * b);
  EXPECT_EQ(r.transfers.size(), 4u);
  expect_near_all(d.out, d.expected());
  // a1 on the GPU feeds a2 on the CPU and a3 on the GPU: t1 comes back once; add on the CPU
  // needs t3 back too.
  r = rt.run(d.g, std::vector<Device>{kGpu, kCpu, kGpu, kCpu, kCpu, kCpu});
  EXPECT_EQ(r.bytes_to_device, b);    // in
  EXPECT_EQ(r.bytes_to_host, 2 * b);  // t1, t3
  expect_near_all(d.out, d.expected());
}

// A CPU node is told which of the data it writes a GPU node reads next (CpuCall::
// copied_to_device, the hint to write them past the caches): not data a CPU node reads next,
// not data a GPU node overwrites without reading it, nothing past its arguments.
TEST(Runtime, ACpuNodeKnowsWhichOutputsAGpuNodeReadsNext) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  constexpr std::size_t kN = 64;
  std::vector<float> in(kN, 1.0f);
  Graph g;
  const Data d_in = g.add_data("in", in.data(), kN * sizeof(float));
  std::vector<Data> t, o;
  for (int i = 0; i < 3; ++i) t.push_back(g.add_data(numbered("t", i), kN * sizeof(float)));
  for (int i = 0; i < 2; ++i) o.push_back(g.add_data(numbered("o", i), kN * sizeof(float)));
  std::vector<bool> seen;
  bool out_of_range = true;
  const Kernel producer{"producer",
                        [&](const CpuCall& c) {  // a fence: the mappings keep it on the CPU
                          seen.clear();
                          for (std::size_t i = 0; i < 4; ++i) {
                            seen.push_back(c.copied_to_device(i));
                            std::fill(c.get<float>(i), c.get<float>(i) + kN, 2.0f);
                          }
                          out_of_range = c.copied_to_device(4);
                        },
                        {},
                        {}};
  g.add_node(producer, {read_write(d_in), write(t[0]), write(t[1]), write(t[2])}, "producer");
  g.add_node(affine(1, 0), {read(t[0]), write(o[0])}, "reads t0");
  g.add_node(affine(1, 0), {read(t[1]), write(o[1])}, "reads t1");
  g.add_node(affine(1, 0), {read(d_in), write(t[2])}, "overwrites t2");
  const std::vector<std::pair<std::vector<Device>, std::vector<bool>>> cases = {
      // `in` (read_write) is read next by "overwrites t2": flagged when that runs on the GPU.
      {{kCpu, kGpu, kCpu, kGpu}, {true, true, false, false}},
      {{kCpu, kCpu, kGpu, kCpu}, {false, false, true, false}},
      {{kCpu, kCpu, kCpu, kCpu}, {false, false, false, false}},
      {{kCpu, kGpu, kGpu, kGpu}, {true, true, true, false}}};
  for (const auto& [mapping, want] : cases) {
    (void)rt.run(g, mapping);
    EXPECT_EQ(seen, want) << "mapping " << ::testing::PrintToString(mapping);
    EXPECT_FALSE(out_of_range);
  }
}

TEST(Runtime, ReadersOnSeveralStreamsShareOneCopyIn) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated(4, 0));
  std::vector<float> in(256, 2.0f);
  Graph g;
  auto x = g.add_data("x", in.data(), in.size() * 4);
  std::vector<Data> outs;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(g.add_data(numbered("o", i), in.size() * 4));
    g.add_node(affine(float(i), 0), {read(x), write(outs.back())});
  }
  const auto r = rt.run(g, Policy::d_map);
  EXPECT_EQ(r.bytes_to_device, in.size() * 4);
  std::set<int> lanes;
  for (const auto& n : r.nodes) lanes.insert(n.lane);
  EXPECT_EQ(lanes.size(), 4u);  // four independent nodes, four streams
  for (int i = 0; i < 4; ++i) {
    const float* o = static_cast<const float*>(g.fetch(outs[i]));
    ASSERT_EQ(o[0], 2.0f * float(i));
    ASSERT_EQ(o[255], 2.0f * float(i));
  }
}

// The mapping problem charges a graph input read by several GPU-capable nodes once (as the
// run above copies it once), and an input read by one node in that node's GPU cost.
TEST(Runtime, TheProblemChargesAnInputReadByManyOnce) {
  using weft::graph::LinearCostModel;
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated());
  std::vector<float> shared(256, 1.0f), own(256, 1.0f);
  Graph g;
  auto x = g.add_data("x", shared.data(), shared.size() * 4);
  auto y = g.add_data("y", own.data(), own.size() * 4);
  auto t0 = g.add_data("t0", 1024), t1 = g.add_data("t1", 1024), t2 = g.add_data("t2", 1024);
  g.add_node(affine(1, 0), {read(x), write(t0)});
  g.add_node(affine(2, 0), {read(x), write(t1)});
  g.add_node(add(), {read(t0), read(y), write(t2)});
  rt.models().set("cpu", "affine", LinearCostModel(1.0, 0));
  rt.models().set("gpu", "affine", LinearCostModel(0.5, 0));
  rt.models().set("cpu", "add", LinearCostModel(1.0, 0));
  rt.models().set("gpu", "add", LinearCostModel(0.5, 0));
  rt.models().set("gpu", weft::graph::kTransferToDevice, LinearCostModel(0, 1e-3));  // 1.024
  rt.models().set("gpu", weft::graph::kTransferToHost, LinearCostModel(0, 0));
  const auto p = rt.problem(g);
  ASSERT_EQ(p.inputs.size(), 1u);  // x: read by two nodes; y: by one (in that node's cost)
  EXPECT_EQ(p.inputs[0].readers, (std::vector<std::size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(p.inputs[0].to_gpu, 1.024);
  EXPECT_DOUBLE_EQ(p.nodes[0].gpu, 0.5);
  EXPECT_DOUBLE_EQ(p.nodes[2].gpu, 0.5 + 1.024);  // y's copy
  const std::vector<Device> all_gpu(3, kGpu);
  EXPECT_DOUBLE_EQ(weft::graph::mapping_cost(p, all_gpu), 3 * 0.5 + 2 * 1.024);
  // The run copies x once and y once (t0-t2 are the graph's own: nothing comes back).
  EXPECT_EQ(rt.planned_transfer_bytes(g, all_gpu), 2 * 1024u);
}

TEST(Runtime, RepeatedRunsTakeNewInputsAndReuseDeviceMemory) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  (void)rt.run(d.g, Policy::d_map);
  const auto after_first = rt.memory_stats();
  EXPECT_GT(after_first.bytes_in_use, 0u);
  for (int run = 0; run < 20; ++run) {
    for (std::size_t i = 0; i < Diamond::kN; ++i) d.in[i] = float((i * 7 + run) % 23);
    (void)rt.run(d.g, run % 2 ? Policy::d_map : Policy::a_free);
    expect_near_all(d.out, d.expected());
  }
  EXPECT_EQ(rt.memory_stats().backing_allocations, after_first.backing_allocations);
  EXPECT_EQ(rt.memory_stats().allocations, after_first.allocations);
  rt.release(d.g);
  EXPECT_EQ(rt.memory_stats().bytes_in_use, 0u);
}

TEST(Runtime, IntermediatesLeftOnTheDeviceComeBackOnFetch) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  (void)rt.run(d.g, Policy::d_map);
  const float* t3 = static_cast<const float*>(d.g.fetch(d.t3));
  EXPECT_FLOAT_EQ(t3[5], 0.5f * (2 * d.in[5] + 1));
}

// Two nodes that can only finish if they run at the same time (each waits for the other).
Kernel rendezvous(std::atomic<int>& arrived, std::atomic<bool>& met) {
  return {"rendezvous",
          [&](const CpuCall&) {
            arrived.fetch_add(1);
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (arrived.load() < 2 && std::chrono::steady_clock::now() < until) {
              std::this_thread::yield();
            }
            if (arrived.load() >= 2) met = true;
          },
          not_on_emulated,
          {}};
}

TEST(Runtime, IndependentNodesOverlapWhereTheOptionsAllow) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime wide(ex, emulated(2, 2));
  for (auto mapping : {std::vector<Device>{kCpu, kCpu}, std::vector<Device>{kCpu, kGpu},
                       std::vector<Device>{kGpu, kGpu}}) {
    std::atomic<int> arrived{0};
    std::atomic<bool> met{false};
    Graph g;
    g.add_node(rendezvous(arrived, met), {});
    g.add_node(rendezvous(arrived, met), {});
    (void)wide.run(g, mapping);
    EXPECT_TRUE(met.load()) << "nodes " << int(mapping[0]) << int(mapping[1]) << " ran apart";
  }
}

// By default a device runs one node at a time (each node has all of it, as the models assume);
// the CPU and the GPU still overlap.
TEST(Runtime, ByDefaultEachDeviceRunsOneNodeAtATime) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(1, 1));
  std::atomic<int> running{0}, most{0};
  // In the mixed run a node waits (bounded) until a node of the other device runs beside it,
  // once: the devices' nodes then overlap whatever the machine's scheduling delays.
  std::atomic<bool> meet{false};
  Kernel k{"busy",
           [&](const CpuCall&) {
             const int now = running.fetch_add(1) + 1;
             int seen = most.load();
             while (now > seen && !most.compare_exchange_weak(seen, now)) {
             }
             const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
             while (meet.load() && running.load() < 2 && std::chrono::steady_clock::now() < until) {
               std::this_thread::yield();
             }
             const int beside = running.load();
             if (beside >= 2) meet = false;
             seen = most.load();
             while (beside > seen && !most.compare_exchange_weak(seen, beside)) {
             }
             std::this_thread::sleep_for(std::chrono::milliseconds(2));
             running.fetch_sub(1);
           },
           not_on_emulated,
           {}};
  Graph g;
  for (int i = 0; i < 6; ++i) g.add_node(k, {});
  (void)rt.run(g, std::vector<Device>(6, kCpu));
  EXPECT_EQ(most.load(), 1);
  (void)rt.run(g, std::vector<Device>(6, kGpu));
  EXPECT_EQ(most.load(), 1);
  most = 0;
  meet = true;
  (void)rt.run(g, std::vector<Device>{kCpu, kGpu, kCpu, kGpu, kCpu, kGpu});
  EXPECT_EQ(most.load(), 2);  // one on each device at once
}

TEST(Runtime, AFailingNodeStopsTheRunNamesItAndTheGraphRunsAgain) {
  for (Device where : {kCpu, kGpu}) {
    weft::cpu::Executor ex;
    Runtime rt(ex, emulated());
    Diamond d;
    bool fail = true;
    std::atomic<int> consumer_runs{0};
    Kernel flaky{"flaky",
                 [&](const CpuCall& c) {
                   if (fail) throw std::runtime_error("sensor offline");
                   std::copy_n(c.get<float>(0), c.count<float>(0), c.get<float>(1));
                 },
                 not_on_emulated,
                 {}};
    Kernel count{"count", [&](const CpuCall&) { consumer_runs.fetch_add(1); }, {}, {}};
    auto y = d.g.add_data("y", Diamond::kN * 4);
    d.g.add_node(flaky, {read(d.d_out), write(y)}, "flaky-node");
    d.g.add_node(count, {read(y)}, "after");
    std::vector<Device> m{kGpu, kCpu, kGpu, kCpu, kCpu, kCpu, where, kCpu};
    try {
      (void)rt.run(d.g, m);
      FAIL() << "no error";
    } catch (const weft::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("flaky-node"), std::string::npos) << what;
      EXPECT_NE(what.find("sensor offline"), std::string::npos) << what;
      try {
        std::rethrow_if_nested(e);
        ADD_FAILURE() << "the original exception is not nested";
      } catch (const std::runtime_error& original) {
        EXPECT_STREQ(original.what(), "sensor offline");
      }
    }
    EXPECT_EQ(consumer_runs.load(), 0);
    fail = false;
    (void)rt.run(d.g, m);
    EXPECT_EQ(consumer_runs.load(), 1);
    expect_near_all(d.out, d.expected());
  }
}

// The nested exception's message of a run that failed in a node (the node's own error).
std::string nested_message(const std::function<void()>& run) {
  try {
    run();
  } catch (const weft::Error& e) {
    try {
      std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
      return inner.what();
    }
    return std::string("not nested: ") + e.what();
  }
  return "no error";
}

// From inside a node: changing the graph, running it on another runtime, and running anything
// on this runtime are refused, where they ran a node twice at once, lost the added node, or
// hung; afterwards the graph and the runtime run as before.
TEST(Runtime, WhatARunningGraphOrRuntimeCannotTakeIsRefused) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated());
  Runtime other(ex, emulated());
  Graph g;
  Graph second;
  second.add_node(Kernel{"noop", [](const CpuCall&) {}, {}, {}}, {});
  std::function<void()> inside;
  g.add_node(Kernel{"inside", [&](const CpuCall&) { inside(); }, {}, {}}, {}, "inside");
  const std::vector<Device> cpu_only{kCpu};
  auto run_g = [&] { (void)rt.run(g, cpu_only); };
  inside = [&] { g.add_node(Kernel{"late", [](const CpuCall&) {}, {}, {}}, {}); };
  EXPECT_NE(nested_message(run_g).find("add_node: the graph is running"), std::string::npos);
  inside = [&] { (void)g.add_data("late", 8); };
  EXPECT_NE(nested_message(run_g).find("add_data: the graph is running"), std::string::npos);
  inside = [&] { (void)other.run(g, cpu_only); };
  EXPECT_NE(nested_message(run_g).find("the graph is already running"), std::string::npos);
  inside = [&] { (void)rt.run(second, cpu_only); };
  EXPECT_NE(nested_message(run_g).find("a run is already in progress on this runtime"),
            std::string::npos);
  inside = [&] { rt.release(second); };
  EXPECT_NE(nested_message(run_g).find("release: a run is in progress"), std::string::npos);
  inside = [] {};
  EXPECT_EQ(g.num_nodes(), 1u);  // nothing was added
  EXPECT_NO_THROW(run_g());
  EXPECT_NO_THROW((void)other.run(g, cpu_only));
}

// Options, policies and kernel arguments out of range are refused, naming them.
TEST(Runtime, OutOfRangeOptionsPoliciesAndArgumentsAreRefused) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 1});
  RuntimeOptions many = emulated();
  many.compute_streams = weft::graph::kMaxComputeStreams + 1;
  EXPECT_THROW(Runtime(ex, many), weft::InvalidArgument);
  Runtime rt(ex, emulated());
  Graph g;
  auto x = g.add_data("x", 16);
  std::string argument_error;
  g.add_node(Kernel{"one-argument",
                    [&](const CpuCall& c) {
                      try {
                        (void)c.get<float>(1);
                      } catch (const weft::InvalidArgument& e) {
                        argument_error = e.what();
                      }
                    },
                    {},
                    {}},
             {write(x)});
  (void)rt.run(g, std::vector<Device>{kCpu});
  EXPECT_NE(argument_error.find("argument 1 of 1"), std::string::npos) << argument_error;
  try {
    (void)rt.map(g, static_cast<weft::graph::Policy>(42));
    FAIL() << "no error";
  } catch (const weft::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 42"), std::string::npos) << e.what();
  }
}

// On the device, a producer that fails on one stream stops its consumer on another: the
// error travels with the event the consumer's stream waits on, as a sticky CUDA error does.
TEST(Runtime, AGpuConsumerOfAFailedProducerOnAnotherStreamDoesNotRun) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated(2, 1));
  Graph g;
  std::vector<float> x(4), out(4);
  const auto dx = g.add_data("x", x.data(), 16);
  const auto a = g.add_data("a", 16);
  const auto b = g.add_data("b", 16);
  const auto dout = g.add_data("out", out.data(), 16);
  std::atomic<int> consumer_runs{0};
  const Kernel slow{
      "slow",
      [](const CpuCall&) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); },
      not_on_emulated,
      {}};
  const Kernel failing{"failing",
                       [](const CpuCall&) { throw std::runtime_error("producer failed"); },
                       not_on_emulated,
                       {}};
  const Kernel consumer{
      "consumer", [&](const CpuCall&) { consumer_runs.fetch_add(1); }, not_on_emulated, {}};
  g.add_node(slow, {read(dx), write(a)}, "P1");
  g.add_node(failing, {read(dx), write(b)}, "P2");
  g.add_node(consumer, {read(a), read(b), write(dout)}, "C");
  for (int round = 0; round < 5; ++round) {
    try {
      (void)rt.run(g, std::vector<Device>{kGpu, kGpu, kGpu});
      ADD_FAILURE() << "no error, round " << round;
    } catch (const weft::Error& e) {
      // C's stream waited on P2's and carries its error; the run names P2 whichever reports first.
      EXPECT_NE(std::string(e.what()).find("'P2'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(consumer_runs.load(), 0) << "round " << round;
  }
}

// A failing GPU node whose output is copied back at its launch: the copy's stream waits on the
// node's and reports the same error, often before the node's own report. Whichever comes
// first, the run's error names the node and nests its exception. (Before the copy's report
// gave way, about one run in eight failed this way.)
TEST(Runtime, AFailingGpuNodeIsNamedThoughItsCopyBackReportsFirst) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  Kernel failing{"failing",
                 [](const CpuCall&) { throw std::runtime_error("sensor offline"); },
                 not_on_emulated,
                 {}};
  Kernel count{"count", [](const CpuCall&) {}, {}, {}};
  auto y = d.g.add_data("y", Diamond::kN * 4);
  d.g.add_node(failing, {read(d.d_out), write(y)}, "failing-node");
  d.g.add_node(count, {read(y)}, "after");
  const std::vector<Device> m{kGpu, kCpu, kGpu, kCpu, kCpu, kCpu, kGpu, kCpu};
  for (int round = 0; round < 40; ++round) {
    EXPECT_EQ(nested_message([&] { (void)rt.run(d.g, m); }), "sensor offline") << "round " << round;
    try {
      (void)rt.run(d.g, m);
      ADD_FAILURE() << "no error, round " << round;
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find("failing-node"), std::string::npos) << e.what();
    }
  }
}

TEST(Runtime, RefusesMappingsItCannotRunBeforeRunningAnything) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  std::vector<Device> fence_on_gpu(6, kGpu);
  try {
    (void)rt.run(d.g, fence_on_gpu);
    FAIL();
  } catch (const weft::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'avg'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fence"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)rt.run(d.g, std::vector<Device>(5, kCpu)), weft::InvalidArgument);
  RuntimeOptions none;
  none.device = DeviceKind::none;
  Runtime cpu_only(ex, none);
  EXPECT_FALSE(cpu_only.has_device());
  EXPECT_THROW((void)cpu_only.run(d.g, std::vector<Device>{kGpu, kCpu, kCpu, kCpu, kCpu, kCpu}),
               weft::InvalidArgument);
  // Without a device every policy maps everything to the CPU.
  EXPECT_EQ(cpu_only.map(d.g, Policy::d_map), std::vector<Device>(6, kCpu));
  // PPTM needs models: a clear error before anything runs.
  try {
    (void)rt.run(d.g, Policy::pptm);
    FAIL();
  } catch (const weft::InvalidState& e) {
    EXPECT_NE(std::string(e.what()).find("no cost model"), std::string::npos) << e.what();
  }
}

TEST(Runtime, RunsTeachTheModelsOnceTwoSizesWereSeen) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond small;
  (void)rt.run(small.g, Policy::d_map);
  EXPECT_EQ(rt.models().find("gpu", "affine"), nullptr);  // one size so far
  EXPECT_GT(rt.models().pending("gpu", "affine"), 0u);
  // A second size.
  std::vector<float> in(4 * Diamond::kN, 1.0f), out(4 * Diamond::kN);
  Graph g;
  auto x = g.add_data("x", in.data(), in.size() * 4);
  auto y = g.add_data("y", out.data(), out.size() * 4);
  g.add_node(affine(1, 1), {read(x), write(y)});
  (void)rt.run(g, Policy::d_map);
  (void)rt.run(g, Policy::a_free);
  (void)rt.run(small.g, Policy::a_free);
  for (const char* dev : {"cpu", "gpu"}) {
    EXPECT_NE(rt.models().find(dev, "affine"), nullptr) << dev;
  }
  EXPECT_NE(rt.models().find("gpu", weft::graph::kTransferToDevice), nullptr);
  EXPECT_NE(rt.models().find("gpu", weft::graph::kTransferToHost), nullptr);
  // Every node's record has the model's prediction once there is one.
  const auto r = rt.run(g, Policy::d_map);
  EXPECT_GT(r.nodes.at(0).predicted, 0.0);
  EXPECT_EQ(r.nodes.at(0).size, 2 * in.size() * 4);
}

// A GPU node's output that a CPU node reads from it (t4 for the fence `avg`), and a user's
// buffer whose last writer is a GPU node (`out`), are copied back as the node is enqueued, on
// the copy-back stream beside its compute stream (streams: 3 compute, copy in, copy out, then
// one copy-back stream per compute stream), after the kernel: never on the copy-out stream
// that the dispatcher uses once it has heard that the kernel ended.
TEST(Runtime, OutputsTheHostNeedsGoBackBesideTheirKernelsStream) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated(3));
  Diamond d;
  for (int trial = 0; trial < 5; ++trial) {
    const auto r = rt.run(d.g, Policy::d_map);
    expect_near_all(d.out, d.expected());
    std::vector<weft::graph::NodeRecord> by_node(6);
    for (const auto& n : r.nodes) by_node[n.node] = n;
    int back = 0;
    for (const auto& t : r.transfers) {
      if (t.to_device) continue;
      ++back;
      ASSERT_TRUE(t.data == d.t4.index() || t.data == d.d_out.index()) << t.data;
      const auto& producer = by_node[t.data == d.t4.index() ? 3 : 5];
      EXPECT_EQ(t.stream, 3 + 2 + producer.lane) << "data " << t.data;
      EXPECT_GE(t.start, producer.end - 2e-3) << "data " << t.data;  // event times are approximate
    }
    EXPECT_EQ(back, 2);
  }
}

TEST(Runtime, RecordsEachNodeOnceAndConsumersStartAfterTheirProducersEnd) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  const auto r = rt.run(d.g, std::vector<Device>{kGpu, kCpu, kGpu, kCpu, kCpu, kGpu});
  std::vector<int> seen(6, 0);
  std::vector<double> start(6), end(6);
  for (const auto& n : r.nodes) {
    ++seen[n.node];
    start[n.node] = n.start;
    end[n.node] = n.end;
    EXPECT_LE(n.start, n.end);
    EXPECT_GE(n.start, 0.0);
    EXPECT_LE(n.end, r.seconds + 1e-3);
  }
  EXPECT_EQ(seen, std::vector<int>(6, 1));
  for (std::size_t c = 0; c < 6; ++c) {
    for (std::size_t p : d.g.producers(d.g.node_at(c))) {
      EXPECT_LE(end[p], start[c] + 2e-3) << p << " -> " << c;  // event times are approximate
    }
  }
}

}  // namespace

namespace {

// Random graphs over a few buffers with random access patterns and mappings, kernels that sleep
// a random few microseconds (so streams, workers and copies interleave differently each run):
// the result must be what running the nodes one by one in program order gives.
TEST(RuntimeStress, RandomGraphsAndMappingsMatchProgramOrder) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 3});
  Runtime wide(ex, emulated(3, 0)), one_at_a_time(ex, emulated(1, 1));
  std::mt19937 rng(11);
  constexpr std::size_t kBuffers = 5, kLen = 64;
  for (int trial = 0; trial < 200; ++trial) {
    Runtime& rt = trial % 2 ? wide : one_at_a_time;
    std::vector<std::vector<float>> bufs(kBuffers, std::vector<float>(kLen));
    for (auto& b : bufs) {
      for (auto& x : b) x = float(rng() % 100) / 10.0f;
    }
    auto reference = bufs;
    Graph g;
    std::vector<Data> data;
    for (std::size_t i = 0; i < kBuffers; ++i) {
      data.push_back(g.add_data(numbered("b", i), bufs[i].data(), kLen * 4));
    }
    const int nodes = 4 + int(rng() % 10);
    std::vector<Device> mapping;
    for (int n = 0; n < nodes; ++n) {
      const std::size_t src = rng() % kBuffers;
      std::size_t dst = rng() % kBuffers;
      if (dst == src) dst = (dst + 1) % kBuffers;
      const float a = float(rng() % 3) - 1.0f, b = float(rng() % 5);
      const unsigned sleep_us = rng() % 3 == 0 ? rng() % 200 : 0;
      const bool fence = rng() % 5 == 0;
      const bool in_place = rng() % 3 == 0;
      auto body = [a, b, sleep_us, in_place](const CpuCall& c) {
        if (sleep_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        const float* in = c.get<float>(0);
        float* out = c.get<float>(1);
        for (std::size_t i = 0; i < kLen; ++i) out[i] = (in_place ? out[i] : 0.0f) + a * in[i] + b;
      };
      Kernel k{"step", body, fence ? weft::graph::GpuCallFn{} : not_on_emulated, {}};
      g.add_node(k, {read(data[src]), in_place ? read_write(data[dst]) : write(data[dst])});
      mapping.push_back(!fence && rng() % 2 ? kGpu : kCpu);
      CpuCall ref;  // program order, on the reference buffers
      std::vector<void*> ptrs{reference[src].data(), reference[dst].data()};
      std::vector<std::size_t> bytes{kLen * 4, kLen * 4};
      ref.pointers = ptrs;
      ref.bytes = bytes;
      body(ref);
    }
    (void)rt.run(g, mapping);
    for (std::size_t i = 0; i < kBuffers; ++i) {
      for (std::size_t j = 0; j < kLen; ++j) {
        ASSERT_FLOAT_EQ(bufs[i][j], reference[i][j]) << "trial " << trial << " buffer " << i;
      }
    }
  }
}

}  // namespace

namespace {

TEST(Runtime, PlannedTransferBytesAreWhatRunsMove) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<Device> m(6);
    for (auto& x : m) x = rng() % 2 ? kGpu : kCpu;
    m[4] = kCpu;
    const auto r = rt.run(d.g, m);
    EXPECT_EQ(rt.planned_transfer_bytes(d.g, m), r.bytes_to_device + r.bytes_to_host);
  }
}

TEST(Runtime, TracesHoldEveryNodeAndCopy) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  Diamond d;
  const auto r = rt.run(d.g, Policy::d_map);
  const std::string trace = weft::graph::chrome_trace(d.g, r);
  const auto events = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto p = trace.find(needle); p != std::string::npos; p = trace.find(needle, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(events("\"ph\":\"X\""), r.nodes.size() + r.transfers.size());
  EXPECT_EQ(events("\"cat\":\"copy\""), 4u);
  EXPECT_NE(trace.find("\"name\":\"a1\""), std::string::npos);
  EXPECT_NE(trace.find("h2d in"), std::string::npos);
  EXPECT_NE(trace.find("GPU stream"), std::string::npos);
  const std::string svg = weft::graph::svg_timeline(d.g, r);
  std::size_t rects = 0;
  for (auto p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++rects;
  EXPECT_EQ(rects, r.nodes.size() + r.transfers.size());
}

}  // namespace

TEST(Runtime, ShareBesideTransfersIsTheUnionOfTheCopiesInsideTheNode) {
  using weft::graph::share_beside_transfers;
  using weft::graph::TransferRecord;
  std::vector<TransferRecord> t(3);
  t[0].start = 0, t[0].end = 1;
  t[1].start = 0.5, t[1].end = 2;  // overlaps the first: counted once
  t[2].start = 3, t[2].end = 4;
  EXPECT_NEAR(share_beside_transfers(0.5, 3.5, t), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(share_beside_transfers(0, 4, t), 3.0 / 4.0, 1e-12);
  EXPECT_NEAR(share_beside_transfers(1.2, 1.8, t), 1.0, 1e-12);
  EXPECT_EQ(share_beside_transfers(2, 3, t), 0.0);
  EXPECT_EQ(share_beside_transfers(1, 1, t), 0.0);  // an empty span
  EXPECT_EQ(share_beside_transfers(0, 1, {}), 0.0);
}

// A CPU node running while a copy is in flight: its record says for what share of its time,
// and the next run of the same mapping predicts its time from that share and the kernel's two
// models (alone, beside copies); the share it learns is what the runs had.
TEST(Runtime, CpuNodesBesideCopiesArePredictedFromTheirMappingsRuns) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(1, 1));
  rt.set_learning(false);
  const std::size_t n = std::size_t{16} << 20;  // 64 MB to copy in
  std::vector<float> big(n, 1.0f), out(n), small(1000, 2.0f), small_out(1000);
  Graph g;
  auto x = g.add_data("x", big.data(), n * sizeof(float));
  auto y = g.add_data("y", out.data(), n * sizeof(float));
  auto s = g.add_data("s", small.data(), small.size() * sizeof(float));
  auto t = g.add_data("t", small_out.data(), small_out.size() * sizeof(float));
  g.add_node(affine(1, 1), {read(x), write(y)}, "copied");
  Kernel slow{"slow",
              [](const CpuCall& c) {
                std::this_thread::sleep_for(std::chrono::milliseconds(150));
                for (std::size_t i = 0; i < c.count<float>(0); ++i) {
                  c.get<float>(1)[i] = c.get<float>(0)[i];
                }
              },
              not_on_emulated,
              {}};
  g.add_node(slow, {read(s), write(t)}, "beside");
  // Alone 0.1 s, beside copies 0.3 s, at any size.
  using weft::graph::CostSample;
  using weft::graph::LinearCostModel;
  const std::vector<CostSample> alone{{1, 0.1}, {2, 0.1}}, with_copies{{1, 0.3}, {2, 0.3}};
  rt.models().set("cpu", "slow", LinearCostModel::fit(alone));
  rt.models().set("cpu", std::string("slow") + weft::graph::kBesideCopies,
                  LinearCostModel::fit(with_copies));
  auto overlap_of_beside = [&](const weft::graph::RunReport& r) {
    for (const auto& rec : r.nodes) {
      if (rec.node != 1) continue;
      // The share, counted independently: 20000 points of the node's span.
      int covered = 0;
      for (int k = 0; k < 20000; ++k) {
        const double at = rec.start + (rec.end - rec.start) * (k + 0.5) / 20000;
        for (const auto& tr : r.transfers) {
          if (tr.start <= at && at < tr.end) {
            ++covered;
            break;
          }
        }
      }
      EXPECT_NEAR(rec.copy_overlap, covered / 20000.0, 1e-3);
      return std::pair{rec.copy_overlap, rec.predicted};
    }
    ADD_FAILURE() << "no record of the CPU node";
    return std::pair{0.0, 0.0};
  };
  const std::vector<Device> mixed{kGpu, kCpu};
  const auto [f1, p1] = overlap_of_beside(rt.run(g, mixed));
  EXPECT_GT(f1, 0.0) << "the 64 MB copy in ran while the CPU node slept 150 ms";
  EXPECT_NEAR(p1, 0.1, 1e-9);  // the mapping's first run: predicted alone
  const auto [f2, p2] = overlap_of_beside(rt.run(g, mixed));
  EXPECT_NEAR(p2, 0.1 + f1 * 0.2, 1e-9);
  const auto [f3, p3] = overlap_of_beside(rt.run(g, mixed));
  EXPECT_NEAR(p3, 0.1 + 0.5 * (f1 + f2) * 0.2, 1e-9);
  (void)f3;
  // Everything on the CPU copies nothing.
  const auto [f4, p4] = overlap_of_beside(rt.run(g, std::vector<Device>{kCpu, kCpu}));
  EXPECT_EQ(f4, 0.0);
  EXPECT_NEAR(p4, 0.1, 1e-9);
  // A new node: the runs remembered had another graph.
  g.add_node(affine(1, 0), {read(t), write(s)}, "after");
  const auto [f5, p5] = overlap_of_beside(rt.run(g, std::vector<Device>{kGpu, kCpu, kCpu}));
  EXPECT_NEAR(p5, 0.1, 1e-9);
  (void)f5;
}

// A graph input that no node writes is copied to the GPU at the start of a run, not when its
// GPU reader's CPU producer has finished: the copy overlaps the CPU work.
TEST(Runtime, InputsNoNodeWritesAreCopiedInAtTheStart) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(1, 1));
  const std::size_t n = std::size_t{1} << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f), out(n);
  Graph g;
  auto dx = g.add_data("x", x.data(), n * sizeof(float));
  auto dy = g.add_data("y", y.data(), n * sizeof(float));
  auto t = g.add_data("t", n * sizeof(float));
  auto dout = g.add_data("out", out.data(), n * sizeof(float));
  Kernel slow{"slow",
              [](const CpuCall& c) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                for (std::size_t i = 0; i < c.count<float>(0); ++i) {
                  c.get<float>(1)[i] = c.get<float>(0)[i] * 3;
                }
              },
              not_on_emulated,
              {}};
  g.add_node(slow, {read(dx), write(t)}, "cpu first");
  g.add_node(add(), {read(t), read(dy), write(dout)}, "gpu after");
  for (int run = 0; run < 2; ++run) {
    std::fill(out.begin(), out.end(), 0.0f);
    const auto r = rt.run(g, std::vector<Device>{kCpu, kGpu});
    double cpu_end = -1;
    for (const auto& rec : r.nodes) {
      if (rec.node == 0) cpu_end = rec.end;
    }
    int y_copies = 0, t_copies = 0;
    for (const auto& tr : r.transfers) {
      if (!tr.to_device) continue;
      if (tr.data == dy.index()) {
        ++y_copies;
        EXPECT_LT(tr.start, cpu_end) << "y waited for the CPU node (run " << run << ")";
      } else if (tr.data == t.index()) {
        ++t_copies;
        EXPECT_GE(tr.start, cpu_end);  // t is the CPU node's result: after it, necessarily
      }
    }
    EXPECT_EQ(y_copies, 1);  // once, not again when its reader starts
    EXPECT_EQ(t_copies, 1);
    EXPECT_EQ(r.bytes_to_device, 2 * n * sizeof(float));
    EXPECT_EQ(r.bytes_to_device + r.bytes_to_host,
              rt.planned_transfer_bytes(g, std::vector<Device>{kCpu, kGpu}));
    expect_near_all(out, std::vector<float>(n, 5.0f));
  }
}

// Of the nodes ready at once, the GPU nodes are enqueued (and the inputs prefetched) before the
// CPU nodes are submitted, whatever their order in the graph: a submitted CPU node takes every
// worker, and the dispatcher's enqueues after it would wait for a core. Here the CPU nodes come
// first in the graph, at the start and again when the CPU head finishes.
TEST(Runtime, DeviceWorkIsEnqueuedBeforeCpuWorkIsSubmitted) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(2, 0));
  constexpr std::size_t kN = 1024;
  std::vector<float> x(kN, 1.0f), y(kN, 2.0f), o1(kN), o2(kN), o3(kN), o4(kN);
  Graph g;
  auto dx = g.add_data("x", x.data(), kN * 4);
  auto dy = g.add_data("y", y.data(), kN * 4);
  auto d1 = g.add_data("o1", o1.data(), kN * 4);
  auto d2 = g.add_data("o2", o2.data(), kN * 4);
  auto d3 = g.add_data("o3", o3.data(), kN * 4);
  auto d4 = g.add_data("o4", o4.data(), kN * 4);
  auto head = g.add_data("head", kN * 4);
  g.add_node(affine(2, 0), {read(dx), write(d1)}, "cpu at the start");      // 0
  g.add_node(affine(3, 0), {read(dy), write(d2)}, "gpu at the start");      // 1
  g.add_node(affine(1, 1), {read(dx), write(head)}, "cpu head");            // 2
  g.add_node(affine(4, 0), {read(head), write(d3)}, "cpu after the head");  // 3
  g.add_node(affine(5, 0), {read(head), write(d4)}, "gpu after the head");  // 4
  const std::vector<Device> m{kCpu, kGpu, kCpu, kCpu, kGpu};
  for (int run = 0; run < 3; ++run) {
    const auto r = rt.run(g, m);
    std::vector<double> issued(5, -1);
    for (const auto& n : r.nodes) issued[n.node] = n.issued;
    EXPECT_LT(issued[1], issued[0]) << "run " << run;
    EXPECT_LT(issued[1], issued[2]) << "run " << run;
    EXPECT_LT(issued[4], issued[3]) << "run " << run;
    EXPECT_GT(issued[3], 0.0);
    for (const auto& n : r.nodes) {
      // A CPU node is submitted before its task starts. (A GPU node's start is the event
      // recorded just before its launch call, so no such order holds for it.)
      if (n.device == kCpu) {
        EXPECT_LE(n.issued, n.start) << "node " << n.node;
      }
    }
    expect_near_all(o1, std::vector<float>(kN, 2.0f));
    expect_near_all(o2, std::vector<float>(kN, 6.0f));
    expect_near_all(o3, std::vector<float>(kN, 8.0f));
    expect_near_all(o4, std::vector<float>(kN, 10.0f));
  }
}

// The same when a CPU node ends: the GPU consumer it releases is enqueued before the CPU node
// whose turn it frees (one CPU node at a time: `second` waits for `first`).
TEST(Runtime, DeviceWorkIsEnqueuedBeforeTheNextCpuNodesTurn) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(1, 1));
  constexpr std::size_t kN = 1024;
  std::vector<float> x(kN, 1.0f), o1(kN), o2(kN);
  Graph g;
  auto dx = g.add_data("x", x.data(), kN * 4);
  auto t = g.add_data("t", kN * 4);
  auto d1 = g.add_data("o1", o1.data(), kN * 4);
  auto d2 = g.add_data("o2", o2.data(), kN * 4);
  g.add_node(affine(2, 0), {read(dx), write(t)}, "first");            // 0
  g.add_node(affine(3, 0), {read(dx), write(d1)}, "second");          // 1
  g.add_node(affine(1, 1), {read(t), write(d2)}, "gpu after first");  // 2
  for (int run = 0; run < 3; ++run) {
    const auto r = rt.run(g, std::vector<Device>{kCpu, kCpu, kGpu});
    std::vector<double> issued(3, -1), end(3, -1);
    for (const auto& n : r.nodes) {
      issued[n.node] = n.issued;
      end[n.node] = n.end;
    }
    EXPECT_GE(issued[1], end[0] - 1e-3) << "second ran beside first (run " << run << ")";
    EXPECT_LT(issued[2], issued[1]) << "run " << run;
    expect_near_all(o1, std::vector<float>(kN, 3.0f));
    expect_near_all(o2, std::vector<float>(kN, 3.0f));
  }
}

// A prefetched input whose reader never starts (its CPU producer fails): the run still waits
// for the copy before it throws, so the caller may write the input's buffer right after
// (ThreadSanitizer would see the emulated copy still reading it otherwise), and the graph runs
// again with the new values.
TEST(Runtime, AFailedRunWaitsForItsPrefetchedCopies) {
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = 2});
  Runtime rt(ex, emulated(1, 1));
  for (int round = 0; round < 3; ++round) {
    const std::size_t n = std::size_t{4} << 20;
    std::vector<float> big(n, 1.0f);
    std::vector<float> small(16, 1.0f), out(n);
    Graph g;
    auto dbig = g.add_data("big", big.data(), n * sizeof(float));
    auto ds = g.add_data("small", small.data(), small.size() * sizeof(float));
    auto t = g.add_data("t", n * sizeof(float));
    auto dout = g.add_data("out", out.data(), n * sizeof(float));
    std::atomic<bool> fail{true};
    Kernel producer{"producer",
                    [&fail](const CpuCall& c) {
                      if (fail.load()) throw std::runtime_error("producer failed");
                      for (std::size_t i = 0; i < c.count<float>(1); ++i) c.get<float>(1)[i] = 1;
                    },
                    not_on_emulated,
                    {}};
    g.add_node(producer, {read(ds), write(t)}, "producer");
    g.add_node(add(), {read(t), read(dbig), write(dout)}, "reader");
    EXPECT_THROW((void)rt.run(g, std::vector<Device>{kCpu, kGpu}), weft::Error);
    std::fill(big.begin(), big.end(), 2.0f);  // no copy of the failed run may still read it
    fail = false;
    const auto r = rt.run(g, std::vector<Device>{kCpu, kGpu});
    EXPECT_EQ(r.nodes.size(), 2u);
    expect_near_all(out, std::vector<float>(n, 3.0f));
  }
}
