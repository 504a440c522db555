// Quantitative-finance factor pipelines: five applications composed of windowed and
// cross-sectional operators over market series, with AVG as a CPU-only fence, each as a
// weft::graph::Graph and as a straightforward sequential CPU reference. Each has a shape that a
// CPU/GPU mapper must get right (Application::shape), which is what the graph layer's tests and
// `weft bench graph` use them for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "factor_kernels.hpp"
#include "factor_ops.hpp"
#include "weft/graph/graph.hpp"

namespace factors {

using kernels::Shape;

/// Five series of one shape, stock-major: what the applications read.
struct Market {
  Shape shape;
  std::vector<float> price, open, close, volume, returns;
  [[nodiscard]] std::size_t floats() const noexcept { return 5 * shape.count(); }
};

/// Seeded random walks: log-normal prices around 100 per stock, open/close around the price,
/// volumes log-normal, returns from the closes (the first day's 0). Never zeros.
Market generate_market(Shape shape, std::uint64_t seed);

/// A CSV with header `stock,day,price,open,close,volume,returns` (0-based integer stock and day,
/// every (stock, day) once, in any order). Throws weft::InvalidArgument naming the file and the
/// line for a missing column, a bad number, an index out of range, a duplicate or a gap.
Market load_market_csv(const std::string& path);
/// Writes `m` in that format (tests, and for users a template to fill).
void save_market_csv(const Market& m, const std::string& path);

/// The shape of `total_floats` floats over the five series: S = D (rounded), at least 16 x 16.
Shape shape_for_total(std::size_t total_floats);

/// An application built over a market's buffers (the market must outlive it).
struct BuiltApp {
  std::unique_ptr<weft::graph::Graph> graph;
  std::vector<float> output;  // the result's host buffer, registered with the graph
};

struct Application {
  std::string name;     // "factor1" ... "factor5"
  std::string formula;  // what it computes, for people
  std::string shape;    // what makes it interesting for mapping
  BuiltApp (*build)(Market& market);
  Series (*reference)(const Market& market);
};

/// The five applications.
const std::vector<Application>& applications();
/// The application called `name`. Throws weft::InvalidArgument listing the names.
const Application& application(std::string_view name);

/// How far `got` is from the reference: elements whose NaN-ness differs or whose difference
/// exceeds 1e-3 of the reference's largest magnitude count as mismatched. Near-ties in ranks
/// may legitimately swap between implementations (CPU running sums vs GPU window sums), so a
/// run is accepted with at most 1e-4 of its elements mismatched.
struct Comparison {
  std::size_t mismatched = 0;
  double mismatch_fraction = 0;
  double max_abs_error = 0;  // over elements both sides have a value
  [[nodiscard]] bool ok() const noexcept { return mismatch_fraction <= 1e-4; }
};
Comparison compare(const std::vector<float>& got, const Series& want);

}  // namespace factors
