#include "weft/graph/graph.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "weft/error.hpp"
#include "weft/graph/detail/coherence.hpp"
#include "weft/graph/mapping/cost_models.hpp"

namespace {

using weft::graph::Access;
using weft::graph::Data;
using weft::graph::Graph;
using weft::graph::Kernel;
using weft::graph::NodeId;
using weft::graph::read;
using weft::graph::read_write;
using weft::graph::write;

Kernel cpu_kernel(std::string name) {
  return {std::move(name), [](const weft::graph::CpuCall&) {}, {}, {}};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const weft::InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(Graph, DependenciesFollowReadsAndWritesInProgramOrder) {
  Graph g;
  auto a = g.add_data("a", 64);
  auto b = g.add_data("b", 64);
  auto c = g.add_data("c", 64);
  const NodeId w1 = g.add_node(cpu_kernel("w1"), {write(a)});
  const NodeId r1 = g.add_node(cpu_kernel("r1"), {read(a), write(b)});     // RAW on a
  const NodeId r2 = g.add_node(cpu_kernel("r2"), {read(a), write(c)});     // RAW on a
  const NodeId w2 = g.add_node(cpu_kernel("w2"), {write(a)});              // WAW + WAR on a
  const NodeId u = g.add_node(cpu_kernel("u"), {read(b), read_write(c)});  // RAW b, c
  EXPECT_TRUE(g.producers(w1).empty());
  EXPECT_EQ(g.producers(r1), std::vector<std::size_t>{0});
  EXPECT_EQ(g.producers(r2), std::vector<std::size_t>{0});
  EXPECT_EQ(g.producers(w2), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(g.producers(u), (std::vector<std::size_t>{1, 2}));
  // Readers of one version do not depend on each other.
  EXPECT_EQ(std::count(g.producers(r2).begin(), g.producers(r2).end(), 1u), 0);
}

TEST(Graph, ExplicitEdgesAddDependenciesAndRefuseCycles) {
  Graph g;
  const NodeId x = g.add_node(cpu_kernel("x"), {});
  const NodeId y = g.add_node(cpu_kernel("y"), {});
  const NodeId z = g.add_node(cpu_kernel("z"), {});
  g.add_edge(x, y);
  g.add_edge(y, z);
  EXPECT_EQ(g.producers(z), std::vector<std::size_t>{1});
  const std::string why = message_of([&] { g.add_edge(z, x); });
  EXPECT_NE(why.find("closes a cycle"), std::string::npos) << why;
  EXPECT_NE(message_of([&] { g.add_edge(x, x); }).find("to itself"), std::string::npos);
  EXPECT_NE(message_of([&] { (void)g.node_at(7); }).find("node 7 does not exist"),
            std::string::npos);
  g.add_edge(x, z);  // not a cycle: allowed
  EXPECT_EQ(g.producers(z), (std::vector<std::size_t>{0, 1}));
}

TEST(Graph, RefusesDanglingHandlesDuplicatesAndKernelsWithoutImplementations) {
  Graph g, other;
  auto a = g.add_data("a", 16);
  auto foreign = other.add_data("f", 16);
  EXPECT_NE(
      message_of([&] { g.add_node(cpu_kernel("k"), {read(Data{})}); }).find("default-constructed"),
      std::string::npos);
  EXPECT_NE(message_of([&] { g.add_node(cpu_kernel("k"), {read(foreign)}); }).find("another graph"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              g.add_node(cpu_kernel("k"), {read(a), write(a)});
            }).find("with read_write to update it"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              g.add_node(Kernel{"empty", {}, {}, {}}, {});
            }).find("no implementation"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              g.add_node(Kernel{"", [](const weft::graph::CpuCall&) {}, {}, {}}, {});
            }).find("no name"),
            std::string::npos);
  EXPECT_EQ(g.num_nodes(), 0u);  // nothing refused was added
  EXPECT_THROW(g.add_data("null", nullptr, 4), weft::InvalidArgument);
  EXPECT_THROW(g.add_data("zero", 0), weft::InvalidArgument);
}

TEST(Graph, RefusesANodeIdOfAnotherGraph) {
  Graph g, other;
  const NodeId x = g.add_node(cpu_kernel("x"), {});
  const NodeId y = g.add_node(cpu_kernel("y"), {});
  other.add_node(cpu_kernel("p"), {});
  other.add_node(cpu_kernel("q"), {});
  // `other` has nodes at x's and y's indices: a plain index would name them.
  EXPECT_NE(message_of([&] { other.add_edge(x, y); }).find("a node id of another graph"),
            std::string::npos);
  EXPECT_NE(message_of([&] { (void)other.label(x); }).find("a node id of another graph"),
            std::string::npos);
  EXPECT_NE(message_of([&] { g.add_edge(x, NodeId{}); }).find("a default-constructed node id"),
            std::string::npos);
  EXPECT_TRUE(g.producers(y).empty());  // nothing refused was added
  EXPECT_TRUE(other.producers(other.node_at(1)).empty());
  EXPECT_EQ(g.node_at(1), y);
  EXPECT_NE(other.node_at(1), y);
}

// Two data over one byte each order their own readers and writers: a node reading one would not
// wait for a node writing the other. So no datum a node writes may overlap another; data that
// nodes only read may (two views of one input).
TEST(Graph, RefusesWritingDataThatOverlapsOtherData) {
  std::vector<float> buffer(96);
  float* p = buffer.data();
  constexpr std::size_t kBytes = 32 * sizeof(float);
  auto address = [](const void* q) {
    std::ostringstream s;
    s << q;
    return s.str();
  };
  Graph g;
  const Data a = g.add_data("a", p + 16, kBytes);  // [p + 16, p + 48)
  const Data b = g.add_data("b", p + 32, kBytes);  // [p + 32, p + 64): overlaps a
  const Data out = g.add_data("out", p + 64, kBytes);
  EXPECT_NO_THROW(g.add_node(cpu_kernel("reads both"), {read(a), read(b), write(out)}));
  const std::string why = message_of([&] { g.add_node(cpu_kernel("w"), {write(a)}); });
  EXPECT_NE(why.find("it writes data 'a' [" + address(p + 16) + ", " + address(p + 48) + ")"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("data 'b' [" + address(p + 32) + ", " + address(p + 64) + ")"),
            std::string::npos)
      << why;
  EXPECT_THROW(g.add_node(cpu_kernel("u"), {read_write(b)}), weft::InvalidArgument);
  EXPECT_EQ(g.num_nodes(), 1u);
  // Data a node writes take no other datum over their bytes afterwards either.
  EXPECT_THROW(g.add_data("again", p + 64, kBytes), weft::InvalidArgument);  // the same range
  EXPECT_THROW(g.add_data("inside", p + 70, 4), weft::InvalidArgument);
  EXPECT_THROW(g.add_data("around", p + 60, kBytes), weft::InvalidArgument);
  EXPECT_NO_THROW(g.add_data("view of a", p + 16, 4));           // read-only data may overlap
  EXPECT_NO_THROW(g.add_data("before", p, 16 * sizeof(float)));  // ends where a starts
  Graph other;  // another graph may register the same buffer
  EXPECT_NO_THROW(other.add_data("out", p + 64, kBytes));
}

TEST(Graph, RefusesKernelNamesTheCostModelsKeepForThemselves) {
  Graph g;
  const std::string beside = std::string("moving_mean") + weft::graph::kBesideCopies;
  for (const std::string& name :
       {std::string(weft::graph::kTransferToDevice), std::string(weft::graph::kTransferToHost),
        std::string("transfer:p2p"), beside}) {
    const std::string why = message_of([&] { g.add_node(cpu_kernel(name), {}); });
    EXPECT_NE(why.find("'" + name + "' is reserved"), std::string::npos) << why;
  }
  EXPECT_EQ(g.num_nodes(), 0u);
  // Names near them stay valid (a window in the name, as moving_correlation/20's).
  EXPECT_NO_THROW(g.add_node(cpu_kernel("moving_correlation/20"), {}));
  EXPECT_NO_THROW(g.add_node(cpu_kernel("transfer"), {}));
  EXPECT_NO_THROW(g.add_node(cpu_kernel("copies+x"), {}));
}

TEST(Graph, AKernelsSizeCheckRefusesMismatchedArgumentsNamingTheNode) {
  Graph g;
  auto small = g.add_data("small", 16);
  auto large = g.add_data("large", 32);
  Kernel same_size = cpu_kernel("same_size");
  same_size.check = [](std::span<const std::size_t> bytes) {
    if (bytes.size() != 2 || bytes[0] != bytes[1]) {
      throw weft::InvalidArgument("input and output must have the same size");
    }
  };
  const std::string why = message_of([&] {
    g.add_node(same_size, {read(small), write(large)}, "copy-out");
  });
  EXPECT_NE(why.find("copy-out"), std::string::npos) << why;
  EXPECT_NE(why.find("same size"), std::string::npos) << why;
  EXPECT_NO_THROW(g.add_node(same_size, {read(small), write(g.add_data("s2", 16))}));
}

TEST(Graph, OwnedDataStartsZeroedAndFetchReturnsTheHostCopy) {
  Graph g;
  auto d = g.add_data("d", 64);
  auto* p = static_cast<unsigned char*>(g.fetch(d));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(p[i], 0);
  std::vector<float> user(8, 1.0f);
  auto u = g.add_data("u", user.data(), user.size() * sizeof(float));
  EXPECT_EQ(g.fetch(u), user.data());
  EXPECT_EQ(g.name(u), "u");
  EXPECT_EQ(g.bytes(u), 32u);
}

// The MSI bookkeeping: every transition of coherence.hpp's table, and the illegal read.
TEST(Coherence, FollowsTheMsiTransitions) {
  using weft::graph::detail::Coherence;
  using weft::graph::detail::CopyState;
  Coherence c(3);                                                    // host, device 0, device 1
  EXPECT_THROW((void)c.read_at(1, "data 'x'"), weft::InvalidState);  // nothing valid
  c.reset_to(Coherence::kHost);
  EXPECT_EQ(c.state(0), CopyState::modified);
  EXPECT_EQ(c.read_at(1, "x"), Coherence::kHost);  // copy host -> device 0
  EXPECT_EQ(c.state(0), CopyState::shared);
  EXPECT_EQ(c.state(1), CopyState::shared);
  EXPECT_EQ(c.read_at(1, "x"), Coherence::kNone);  // valid already: no copy
  c.write_at(1);                                   // device 0 writes: the others invalid
  EXPECT_EQ(c.state(0), CopyState::invalid);
  EXPECT_EQ(c.state(1), CopyState::modified);
  EXPECT_EQ(c.state(2), CopyState::invalid);
  EXPECT_EQ(c.read_at(2, "x"), 1u);  // the modified copy is the source, not the stale host
  EXPECT_EQ(c.state(1), CopyState::shared);
  EXPECT_EQ(c.read_at(0, "x"), 1u);  // lowest valid when no one is modified and host invalid
  EXPECT_EQ(c.state(0), CopyState::shared);
}

}  // namespace
