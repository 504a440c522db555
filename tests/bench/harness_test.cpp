// The benchmark harness's files: a suite read back from the JSON it wrote gives the same table,
// and a file that is not a suite's JSON is refused naming what is wrong.
#include "harness/harness.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace weft::bench {
namespace {

Suite a_suite() {
  SuiteOptions o;
  o.samples = 3;
  o.warmups = 0;
  o.settle_ms = 0;
  o.quiet = true;
  Suite s("demo-suite", o);
  double t = 1.0;
  s.compare("saxpy_1m", "ms", Better::lower,
            {{"weft",
              [&t] {
                return Outcome{t += 0.5, true};
              }},
             {"peer_a",
              [] {
                return Outcome{4.0, true};
              }},
             {"peer_b", [] {
                return Outcome{1.0, false};
              }}});
  s.add_metric(Metric{"zeta_rate", "GB/s", Better::higher, {3.0, 1.0, 2.0}});
  s.add_metric(Metric{"alpha_ns", "ns", Better::lower, {7.0}});
  s.set_gpu("Some GPU", 2);
  return s;
}

TEST(Harness, ASuiteReadBackFromItsJsonWritesTheSameTable) {
  const Suite s = a_suite();
  const std::string command = "weft bench demo --json x.json";
  const Suite back = Suite::from_json(s.to_json(command));
  EXPECT_EQ(back.name(), "demo-suite");
  EXPECT_EQ(back.recorded_command(), command);
  EXPECT_EQ(back.to_markdown(command), s.to_markdown(command));  // metrics in their order too
  ASSERT_EQ(back.comparisons().size(), 2u);
  EXPECT_EQ(back.comparisons()[1].peer, "peer_b");
  EXPECT_FALSE(back.comparisons()[1].verified);
  EXPECT_EQ(back.comparisons()[0].weft_samples, s.comparisons()[0].weft_samples);
  EXPECT_EQ(back.to_speedup_svg(), s.to_speedup_svg());
}

TEST(Harness, AFileThatIsNotASuitesJsonIsRefusedNamingWhatIsWrong) {
  try {
    (void)Suite::from_json("{}");
    FAIL() << "an empty object was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("samples_per_contender"), std::string::npos) << e.what();
  }
  std::string json = a_suite().to_json("c");
  json.replace(json.find("\"lower\""), 7, "\"sideways\"");
  try {
    (void)Suite::from_json(json);
    FAIL() << "a bad \"better\" was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sideways"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)Suite::from_json("not json"), std::runtime_error);
}

// to_json writes a value that was not finite as null; it reads back as NaN, not as an error.
TEST(Harness, ANonFiniteSampleReadsBackAsNaN) {
  Suite s("nan-suite", SuiteOptions{});
  s.add_metric(Metric{"m", "s", Better::lower, {std::numeric_limits<double>::infinity()}});
  const Suite back = Suite::from_json(s.to_json("c"));
  ASSERT_EQ(back.metrics().size(), 1u);
  ASSERT_EQ(back.metrics()[0].samples.size(), 1u);
  EXPECT_TRUE(std::isnan(back.metrics()[0].samples[0]));
}

TEST(Harness, ASuiteWithoutComparisonsHasNoChart) {
  Suite s("metrics-only", SuiteOptions{});
  s.add_metric(Metric{"m", "s", Better::lower, {1.0}});
  EXPECT_TRUE(s.to_speedup_svg().empty());
  EXPECT_FALSE(a_suite().to_speedup_svg().empty());
}

}  // namespace
}  // namespace weft::bench
