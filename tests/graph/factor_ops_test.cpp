// Factor operators against straightforward O(S * D * window) references.
#include "factor_ops.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "factor_kernels.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/error.hpp"
#include "weft/graph/stream_copy.hpp"

using factors::Series;

namespace {

Series random_walks(std::size_t stocks, std::size_t days, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> step(0.0f, 1.0f);
  Series x(stocks, days);
  for (std::size_t s = 0; s < stocks; ++s) {
    float v = 100.0f;
    for (std::size_t d = 0; d < days; ++d) x.at(s, d) = v += step(rng);
  }
  return x;
}

// Both NaN, or within `tol` (relative to max(1, |expected|)).
void expect_close(const Series& got, const Series& want, double tol, const char* what) {
  ASSERT_EQ(got.values.size(), want.values.size());
  for (std::size_t i = 0; i < got.values.size(); ++i) {
    const double g = got.values[i], w = want.values[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " at " << i << ": " << g << ", expected NaN";
    } else {
      EXPECT_NEAR(g, w, tol * std::max(1.0, std::abs(w))) << what << " at " << i;
    }
  }
}

double window_mean(const Series& x, std::size_t s, std::size_t d, std::size_t w) {
  double m = 0;
  for (std::size_t k = d + 1 - w; k <= d; ++k) m += x.at(s, k);
  return m / static_cast<double>(w);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST(FactorOps, MovingMeanAndStddevMatchTheDefinition) {
  Series x = random_walks(7, 300, 1);
  x.at(3, 100) = kNaN;  // a hole: the windows over it are NaN
  for (const std::size_t w : {1, 5, 20, 300}) {
    Series mean(x.stocks, x.days, kNaN), sd(x.stocks, x.days, kNaN);
    for (std::size_t s = 0; s < x.stocks; ++s) {
      for (std::size_t d = w - 1; d < x.days; ++d) {
        const double m = window_mean(x, s, d, w);
        double v = 0;
        for (std::size_t k = d + 1 - w; k <= d; ++k) v += (x.at(s, k) - m) * (x.at(s, k) - m);
        mean.at(s, d) = static_cast<float>(m);  // NaN when the window holds the hole
        sd.at(s, d) = static_cast<float>(std::sqrt(v / static_cast<double>(w)));
      }
    }
    expect_close(factors::moving_mean(x, w), mean, 1e-5, "moving_mean");
    expect_close(factors::moving_stddev(x, w), sd, 2e-3, "moving_stddev");
  }
}

TEST(FactorOps, MovingCorrelationMatchesTheDefinition) {
  const Series x = random_walks(5, 200, 2), y = random_walks(5, 200, 3);
  const std::size_t w = 30;
  Series want(x.stocks, x.days, kNaN);
  for (std::size_t s = 0; s < x.stocks; ++s) {
    for (std::size_t d = w - 1; d < x.days; ++d) {
      const double mx = window_mean(x, s, d, w), my = window_mean(y, s, d, w);
      double sxy = 0, sxx = 0, syy = 0;
      for (std::size_t k = d + 1 - w; k <= d; ++k) {
        sxy += (x.at(s, k) - mx) * (y.at(s, k) - my);
        sxx += (x.at(s, k) - mx) * (x.at(s, k) - mx);
        syy += (y.at(s, k) - my) * (y.at(s, k) - my);
      }
      want.at(s, d) = static_cast<float>(sxy / std::sqrt(sxx * syy));
    }
  }
  expect_close(factors::moving_correlation(x, y, w), want, 2e-3, "moving_correlation");
  // A series with itself: 1; a constant series: no correlation.
  const Series self = factors::moving_correlation(x, x, w);
  EXPECT_NEAR(self.at(0, 100), 1.0, 1e-4);
  const Series flat(5, 200, 3.0f);
  EXPECT_TRUE(std::isnan(factors::moving_correlation(x, flat, w).at(0, 100)));
}

TEST(FactorOps, DeltaRankAndScale) {
  Series x(4, 3);
  // day 0: 3 1 2 2 (a tie); day 1: NaN 5 -5 0; day 2: 7 only ... others NaN
  const float v[4][3] = {{3, kNaN, 7}, {1, 5, kNaN}, {2, -5, kNaN}, {2, 0, kNaN}};
  for (std::size_t s = 0; s < 4; ++s) {
    for (std::size_t d = 0; d < 3; ++d) x.at(s, d) = v[s][d];
  }
  const Series r = factors::rank(x);
  EXPECT_FLOAT_EQ(r.at(1, 0), 0.0f);
  EXPECT_FLOAT_EQ(r.at(2, 0), 0.5f);  // tied with stock 3: mean of ranks 1 and 2, over 3
  EXPECT_FLOAT_EQ(r.at(3, 0), 0.5f);
  EXPECT_FLOAT_EQ(r.at(0, 0), 1.0f);
  EXPECT_TRUE(std::isnan(r.at(0, 1)));
  EXPECT_FLOAT_EQ(r.at(2, 1), 0.0f);
  EXPECT_FLOAT_EQ(r.at(1, 1), 1.0f);
  EXPECT_FLOAT_EQ(r.at(0, 2), 0.5f);  // alone on its day
  const Series sc = factors::scale(x);
  EXPECT_FLOAT_EQ(sc.at(0, 0), 3.0f / 8.0f);
  EXPECT_FLOAT_EQ(sc.at(2, 1), -0.5f);
  EXPECT_FLOAT_EQ(sc.at(3, 1), 0.0f);
  const Series dl = factors::delta(x, 1);
  EXPECT_TRUE(std::isnan(dl.at(1, 0)));
  EXPECT_FLOAT_EQ(dl.at(1, 1), 4.0f);
  EXPECT_FLOAT_EQ(dl.at(2, 1), -7.0f);
}

TEST(FactorOps, BadArgumentsAreRejected) {
  const Series x = random_walks(2, 10, 4);
  EXPECT_THROW(factors::moving_mean(x, 0), weft::InvalidArgument);
  EXPECT_THROW(factors::moving_stddev(x, 11), weft::InvalidArgument);
  EXPECT_THROW(factors::moving_correlation(x, random_walks(3, 10, 5), 2), weft::InvalidArgument);
  EXPECT_THROW(factors::delta(x, 0), weft::InvalidArgument);
  EXPECT_THROW(factors::delta(x, 10), weft::InvalidArgument);
}

TEST(FactorOps, RankScaleAndAverageOverManyDaysMatchTheDefinition) {
  // More days than the CPU core's block of 16, integer values (ties) and holes.
  Series x = random_walks(50, 37, 7);
  for (auto& v : x.values) v = std::round(v / 4.0f);
  for (std::size_t i = 0; i < x.values.size(); i += 13) x.values[i] = kNaN;
  const Series r = factors::rank(x), sc = factors::scale(x), av = factors::average(x);
  Series want_r(x.stocks, x.days, kNaN), want_sc(x.stocks, x.days, kNaN),
      want_av(x.stocks, x.days, kNaN);
  for (std::size_t d = 0; d < x.days; ++d) {
    double n = 0, abs_sum = 0, sum = 0;
    for (std::size_t s = 0; s < x.stocks; ++s) {
      if (std::isnan(x.at(s, d))) continue;
      ++n;
      abs_sum += std::abs(x.at(s, d));
      sum += x.at(s, d);
    }
    for (std::size_t s = 0; s < x.stocks; ++s) {
      want_av.at(s, d) = static_cast<float>(sum / n);
      const float v = x.at(s, d);
      if (std::isnan(v)) continue;
      double less = 0, equal = 0;
      for (std::size_t t = 0; t < x.stocks; ++t) {
        less += x.at(t, d) < v;
        equal += x.at(t, d) == v;
      }
      want_r.at(s, d) = static_cast<float>((less + (equal - 1) / 2) / (n - 1));
      want_sc.at(s, d) = static_cast<float>(v / abs_sum);
    }
  }
  expect_close(r, want_r, 1e-6, "rank");
  expect_close(sc, want_sc, 1e-6, "scale");
  expect_close(av, want_av, 1e-5, "average");
}

TEST(FactorOps, ElementWiseOperatorsPropagateHoles) {
  Series x = random_walks(3, 10, 2), y = random_walks(3, 10, 3);
  y.at(1, 4) = kNaN;
  const Series m = factors::multiply(x, y), d = factors::subtract(x, y);
  EXPECT_FLOAT_EQ(m.at(2, 7), x.at(2, 7) * y.at(2, 7));
  EXPECT_FLOAT_EQ(d.at(0, 9), x.at(0, 9) - y.at(0, 9));
  EXPECT_TRUE(std::isnan(m.at(1, 4)));
  EXPECT_TRUE(std::isnan(d.at(1, 4)));
  EXPECT_THROW((void)factors::multiply(x, Series(3, 9)), weft::InvalidArgument);
}

// The graph's scale and average kernels sum by rows, in chunks of stocks, on the executor's
// workers: they match the references (which sum day by day), keep holes where those do, and
// give the same bits whatever the number of workers (the chunks are fixed, not per worker).
namespace {

void check_scale_and_average_kernels(const Series& x, std::size_t empty_day,
                                     weft::cpu::Executor& one, weft::cpu::Executor& three) {
  const factors::kernels::Shape shape{x.stocks, x.days};
  auto run = [&](const weft::graph::Kernel& k, weft::cpu::Executor* ex) {
    Series out(x.stocks, x.days, -1.0f);
    void* pointers[] = {const_cast<float*>(x.values.data()), out.values.data()};
    const std::size_t bytes[] = {shape.bytes(), shape.bytes()};
    weft::graph::CpuCall call;
    call.pointers = pointers;
    call.bytes = bytes;
    call.executor = ex;
    if (ex == nullptr) {
      k.cpu(call);
    } else {
      ex->run([&] { k.cpu(call); });
    }
    return out;
  };
  for (const bool is_scale : {true, false}) {
    const auto k = is_scale ? factors::kernels::scale(shape) : factors::kernels::average(shape);
    const Series want = is_scale ? factors::scale(x) : factors::average(x);
    const Series inline_run = run(k, nullptr), a = run(k, &one), b = run(k, &three);
    expect_close(a, want, 1e-6, is_scale ? "scale" : "average");
    EXPECT_TRUE(std::isnan(b.at(x.stocks - 1, empty_day)))
        << "a day without values has no average and no scale";
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      ASSERT_EQ(std::memcmp(&a.values[i], &b.values[i], sizeof(float)), 0) << i;
      ASSERT_EQ(std::memcmp(&a.values[i], &inline_run.values[i], sizeof(float)), 0) << i;
    }
  }
}

}  // namespace

TEST(FactorKernels, ScaleAndAverageByRowsMatchTheReferencesWhateverTheWorkers) {
  weft::cpu::Executor one(weft::cpu::ExecutorOptions{.workers = 1});
  weft::cpu::Executor three(weft::cpu::ExecutorOptions{.workers = 3});
  // Stocks not a multiple of the 32 chunks, fewer stocks than chunks, one stock, one day.
  for (const auto& [stocks, days] :
       {std::pair<std::size_t, std::size_t>{203, 61}, {7, 40}, {1, 9}, {50, 1}}) {
    SCOPED_TRACE(std::to_string(stocks) + " x " + std::to_string(days));
    Series x = random_walks(stocks, days, 11);
    for (std::size_t i = 0; i < x.values.size(); i += 17) x.values[i] = kNaN;
    const std::size_t empty_day = days > 5 ? 5 : 0;
    for (std::size_t s = 0; s < x.stocks; ++s) x.at(s, empty_day) = kNaN;  // no value that day
    check_scale_and_average_kernels(x, empty_day, one, three);
  }
}

// stream_copy copies exactly what memcpy does, at every alignment of source and destination and
// every length around its 4-, 16- and 64-byte steps, and writes nothing outside [dst, dst + n).
TEST(StreamCopy, CopiesLikeMemcpyAtEveryAlignmentAndLength) {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (std::size_t src_off = 0; src_off < 20; src_off += 3) {
    for (std::size_t dst_off = 0; dst_off < 20; ++dst_off) {
      for (std::size_t n : {0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 127, 130, 1000, 4096}) {
        std::fill(dst.begin(), dst.end(), 0xA5);
        weft::graph::stream_copy(dst.data() + 32 + dst_off, src.data() + src_off, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 32 + dst_off && i < 32 + dst_off + n;
          const unsigned char want = inside ? src[src_off + i - 32 - dst_off] : 0xA5;
          ASSERT_EQ(dst[i], want) << "src+" << src_off << " dst+" << dst_off << " n " << n
                                  << " byte " << i;
        }
      }
    }
  }
}

// Every factor kernel gives the same bits whether the runtime says its output goes to the GPU
// next (written through a buffer and streamed past the caches) or not (written in place), on
// the executor and inline; shapes whose rows are not a whole number of 16-byte pieces, and more
// elements than the element-wise kernels' 2048-float block.
TEST(FactorKernels, OutputsCopiedToTheDeviceNextAreTheSameBits) {
  weft::cpu::Executor three(weft::cpu::ExecutorOptions{.workers = 3});
  namespace k = factors::kernels;
  for (const auto& [stocks, days] : {std::pair<std::size_t, std::size_t>{53, 97}, {5, 3}}) {
    SCOPED_TRACE(std::to_string(stocks) + " x " + std::to_string(days));
    const k::Shape shape{stocks, days};
    Series x = random_walks(stocks, days, 21), y = random_walks(stocks, days, 22);
    for (std::size_t i = 0; i < x.values.size(); i += 29) x.values[i] = kNaN;
    const std::size_t w = std::min<std::size_t>(days, 5);
    const std::vector<std::pair<weft::graph::Kernel, std::size_t>> kernels = {
        {k::moving_mean(shape, w), 1},
        {k::moving_stddev(shape, w), 1},
        {k::moving_correlation(shape, w), 2},
        {k::delta(shape, 1), 1},
        {k::rank(shape), 1},
        {k::scale(shape), 1},
        {k::multiply(shape), 2},
        {k::subtract(shape), 2},
        {k::average(shape), 1}};
    for (const auto& [kernel, inputs] : kernels) {
      SCOPED_TRACE(kernel.name);
      auto run = [&, &kernel = kernel, inputs = inputs](bool to_device, weft::cpu::Executor* ex) {
        Series out(stocks, days, -1.0f);
        std::vector<void*> pointers = {x.values.data()};
        if (inputs == 2) pointers.push_back(y.values.data());
        pointers.push_back(out.values.data());
        const std::vector<std::size_t> bytes(pointers.size(), shape.bytes());
        std::vector<unsigned char> flags(pointers.size(), 0);
        flags.back() = to_device ? 1 : 0;
        weft::graph::CpuCall call;
        call.pointers = pointers;
        call.bytes = bytes;
        call.to_device = flags;
        call.executor = ex;
        EXPECT_EQ(call.copied_to_device(pointers.size() - 1), to_device);
        if (ex == nullptr) {
          kernel.cpu(call);
        } else {
          ex->run([&] { kernel.cpu(call); });
        }
        return out;
      };
      const Series plain = run(false, &three);
      for (const auto& streamed : {run(true, &three), run(true, nullptr)}) {
        ASSERT_EQ(std::memcmp(plain.values.data(), streamed.values.data(), shape.bytes()), 0);
      }
    }
  }
}

// The streaming threshold defaults to the machine's last-level cache (at least 4 MiB; 32 MiB
// when the cache is unknown), as the header promises.
TEST(FactorKernels, DefaultStreamThresholdIsTheLastLevelCache) {
  namespace k = factors::kernels;
  const std::size_t llc = weft::cpu::describe_cpu_topology().last_level_cache_bytes;
  const std::size_t expect = llc == 0 ? std::size_t{32} << 20 : std::max(llc, std::size_t{4} << 20);
  EXPECT_EQ(k::default_stream_min_bytes(), expect);
  EXPECT_EQ(k::stream_min_bytes(), expect);
}

// A call whose arguments span kernels::stream_min_bytes() or more streams its outputs whether
// or not a GPU node reads them next: with the threshold at one series' size every streamed
// kernel still matches its reference, and gives the bits it gives written in place (the
// threshold raised past any call).
TEST(FactorKernels, LargeOutputsStreamedMatchTheReferences) {
  weft::cpu::Executor three(weft::cpu::ExecutorOptions{.workers = 3});
  namespace k = factors::kernels;
  const std::size_t stocks = 1024, days = 1031;  // 4.03 MiB per series
  const k::Shape shape{stocks, days};
  ASSERT_GE(shape.bytes(), std::size_t{4} << 20);
  Series x = random_walks(stocks, days, 31), y = random_walks(stocks, days, 32);
  for (std::size_t i = 0; i < x.values.size(); i += 1013) x.values[i] = kNaN;
  ASSERT_EQ(k::stream_min_bytes(), k::default_stream_min_bytes());
  k::set_stream_min_bytes(shape.bytes());
  auto run = [&](const weft::graph::Kernel& kernel, std::vector<const Series*> in) {
    Series out(stocks, days, -1.0f);
    std::vector<void*> pointers;
    for (const Series* s : in) pointers.push_back(const_cast<float*>(s->values.data()));
    pointers.push_back(out.values.data());
    const std::vector<std::size_t> bytes(pointers.size(), shape.bytes());
    weft::graph::CpuCall call;  // no to_device flags: large outputs stream regardless
    call.pointers = pointers;
    call.bytes = bytes;
    call.executor = &three;
    three.run([&] { kernel.cpu(call); });
    return out;
  };
  expect_close(run(k::moving_mean(shape, 10), {&x}), factors::moving_mean(x, 10), 1e-5,
               "moving_mean");
  expect_close(run(k::moving_correlation(shape, 10), {&x, &y}),
               factors::moving_correlation(x, y, 10), 1e-4, "moving_correlation");
  expect_close(run(k::delta(shape, 2), {&x}), factors::delta(x, 2), 1e-6, "delta");
  expect_close(run(k::scale(shape), {&x}), factors::scale(x), 1e-5, "scale");
  expect_close(run(k::average(shape), {&x}), factors::average(x), 1e-5, "average");
  expect_close(run(k::multiply(shape), {&x, &y}), factors::multiply(x, y), 1e-6, "multiply");
  expect_close(run(k::subtract(shape), {&x, &y}), factors::subtract(x, y), 1e-6, "subtract");

  const Series streamed = run(k::moving_correlation(shape, 10), {&x, &y});
  const Series streamed_avg = run(k::average(shape), {&x});
  k::set_stream_min_bytes(SIZE_MAX);
  const Series in_place = run(k::moving_correlation(shape, 10), {&x, &y});
  const Series in_place_avg = run(k::average(shape), {&x});
  k::set_stream_min_bytes(k::default_stream_min_bytes());
  EXPECT_EQ(std::memcmp(streamed.values.data(), in_place.values.data(), shape.bytes()), 0);
  EXPECT_EQ(std::memcmp(streamed_avg.values.data(), in_place_avg.values.data(), shape.bytes()), 0);
}
