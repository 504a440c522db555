#include "pipelines.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

#include "weft/error.hpp"

namespace factors {

namespace gk = kernels;
using weft::graph::Data;
using weft::graph::Graph;
using weft::graph::read;
using weft::graph::write;

Market generate_market(Shape shape, std::uint64_t seed) {
  if (shape.count() == 0) throw weft::InvalidArgument("factors::generate_market: empty shape");
  Market m;
  m.shape = shape;
  for (auto* v : {&m.price, &m.open, &m.close, &m.volume, &m.returns}) v->resize(shape.count());
  // One generator per stock, seeded by (seed, stock): the same market whatever the threads.
  auto stocks = [&](std::size_t s0, std::size_t s1) {
    for (std::size_t s = s0; s < s1; ++s) {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + s);
      std::normal_distribution<float> step(0.0f, 0.02f), spread(0.0f, 0.005f), logvol(12.0f, 0.5f);
      float log_price = std::log(100.0f) + 0.5f * step(rng) * 10.0f;
      for (std::size_t d = 0; d < shape.days; ++d) {
        const std::size_t i = s * shape.days + d;
        log_price += step(rng);
        m.price[i] = std::exp(log_price);
        m.open[i] = m.price[i] * (1.0f + spread(rng));
        m.close[i] = m.price[i] * (1.0f + spread(rng));
        m.volume[i] = std::exp(logvol(rng));
        m.returns[i] = d == 0 ? 0.0f : m.close[i] / m.close[i - 1] - 1.0f;
      }
    }
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, shape.stocks);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back(stocks, shape.stocks * t / threads, shape.stocks * (t + 1) / threads);
  }
  for (auto& t : pool) t.join();
  return m;
}

namespace {

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

template <class T>
T parse(std::string_view field, const std::string& where, const char* column) {
  while (!field.empty() && (field.front() == ' ' || field.front() == '\r')) field.remove_prefix(1);
  while (!field.empty() && (field.back() == ' ' || field.back() == '\r')) field.remove_suffix(1);
  T value{};
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc{} || end != field.data() + field.size()) {
    throw weft::InvalidArgument(where + ": column '" + column + "' is not a number: '" +
                                std::string(field) + "'");
  }
  return value;
}

}  // namespace

Market load_market_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw weft::InvalidArgument("factors::load_market_csv: cannot open '" + path + "'");
  std::string line;
  static const char* kColumns[] = {"stock", "day", "price", "open", "close", "volume", "returns"};
  if (!std::getline(in, line)) throw weft::InvalidArgument(path + ": empty file");
  const auto header = split_csv(line);
  for (std::size_t c = 0; c < 7; ++c) {
    if (header.size() != 7 ||
        header[c].substr(0, std::string_view(kColumns[c]).size()) != kColumns[c]) {
      throw weft::InvalidArgument(path + ":1: the header must be " +
                                  "stock,day,price,open,close,volume,returns");
    }
  }
  struct Row {
    std::size_t stock, day;
    float v[5];
  };
  std::vector<Row> rows;
  std::size_t stocks = 0, days = 0, number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const std::string where = path + ":" + std::to_string(number);
    const auto f = split_csv(line);
    if (f.size() != 7) {
      throw weft::InvalidArgument(where + ": " + std::to_string(f.size()) + " columns, expected 7");
    }
    Row r{parse<std::size_t>(f[0], where, "stock"), parse<std::size_t>(f[1], where, "day"), {}};
    for (int k = 0; k < 5; ++k) r.v[k] = parse<float>(f[2 + k], where, kColumns[2 + k]);
    stocks = std::max(stocks, r.stock + 1);
    days = std::max(days, r.day + 1);
    rows.push_back(r);
  }
  if (rows.size() != stocks * days) {
    throw weft::InvalidArgument(path + ": " + std::to_string(rows.size()) + " rows for " +
                                std::to_string(stocks) + " stocks x " + std::to_string(days) +
                                " days (every stock needs every day once)");
  }
  Market m;
  m.shape = {stocks, days};
  for (auto* v : {&m.price, &m.open, &m.close, &m.volume, &m.returns}) v->resize(stocks * days);
  std::vector<bool> seen(stocks * days, false);
  for (const Row& r : rows) {
    const std::size_t i = r.stock * days + r.day;
    if (seen[i]) {
      throw weft::InvalidArgument(path + ": stock " + std::to_string(r.stock) + " day " +
                                  std::to_string(r.day) + " appears twice");
    }
    seen[i] = true;
    m.price[i] = r.v[0];
    m.open[i] = r.v[1];
    m.close[i] = r.v[2];
    m.volume[i] = r.v[3];
    m.returns[i] = r.v[4];
  }
  return m;
}

void save_market_csv(const Market& m, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw weft::InvalidArgument("factors::save_market_csv: cannot write '" + path + "'");
  out << "stock,day,price,open,close,volume,returns\n";
  out.precision(9);
  for (std::size_t s = 0; s < m.shape.stocks; ++s) {
    for (std::size_t d = 0; d < m.shape.days; ++d) {
      const std::size_t i = s * m.shape.days + d;
      out << s << ',' << d << ',' << m.price[i] << ',' << m.open[i] << ',' << m.close[i] << ','
          << m.volume[i] << ',' << m.returns[i] << '\n';
    }
  }
}

Shape shape_for_total(std::size_t total_floats) {
  const auto side = static_cast<std::size_t>(std::sqrt(static_cast<double>(total_floats) / 5.0));
  return {std::max<std::size_t>(side, 16), std::max<std::size_t>(side, 16)};
}

namespace {

// Graph-building helpers: inputs over the market's buffers, intermediates owned by the graph.
struct Builder {
  Market& m;
  BuiltApp app;
  Graph& g;
  explicit Builder(Market& market) : m(market), app{std::make_unique<Graph>(), {}}, g(*app.graph) {}
  Data input(const char* name, std::vector<float>& v) {
    return g.add_data(name, v.data(), v.size() * sizeof(float));
  }
  Data temp(const char* name) { return g.add_data(name, m.shape.bytes()); }
  Data output() {
    app.output.assign(m.shape.count(), 0.0f);
    return g.add_data("output", app.output.data(), m.shape.bytes());
  }
  Data unary(weft::graph::Kernel k, Data x, const char* out, const char* label) {
    Data r = temp(out);
    g.add_node(std::move(k), {read(x), write(r)}, label);
    return r;
  }
  Data binary(weft::graph::Kernel k, Data x, Data y, const char* out, const char* label) {
    Data r = temp(out);
    g.add_node(std::move(k), {read(x), read(y), write(r)}, label);
    return r;
  }
  void into_output(weft::graph::Kernel k, std::vector<Data> in, const char* label) {
    std::vector<weft::graph::Arg> args;
    for (Data d : in) args.push_back(read(d));
    args.push_back(write(output()));
    g.add_node(std::move(k), std::move(args), label);
  }
};

Series series(const Market& m, const std::vector<float>& v) {
  Series s(m.shape.stocks, m.shape.days);
  s.values = v;
  return s;
}

std::size_t window(const Market& m, std::size_t w) { return std::min(w, m.shape.days); }

// factor1: a GPU chain that meets a fence whose consumer is cheap.
BuiltApp build1(Market& m) {
  Builder b(m);
  const Shape s = m.shape;
  Data c = b.binary(gk::moving_correlation(s, window(m, 10)), b.input("open", m.open),
                    b.input("volume", m.volume), "corr", "correlation(open, volume, 10)");
  Data r = b.unary(gk::rank(s), c, "rank", "rank");
  Data a = b.unary(gk::average(s), r, "avg", "AVG");
  b.into_output(gk::subtract(s), {r, a}, "rank - AVG");
  return std::move(b.app);
}
Series reference1(const Market& m) {
  const Series r = factors::rank(
      factors::moving_correlation(series(m, m.open), series(m, m.volume), window(m, 10)));
  return factors::subtract(r, factors::average(r));
}

// factor2: two cheap branches joined, no fence.
BuiltApp build2(Market& m) {
  Builder b(m);
  const Shape s = m.shape;
  Data dv = b.unary(gk::delta(s, 1), b.input("volume", m.volume), "dv", "delta(volume, 1)");
  Data dc = b.unary(gk::delta(s, 1), b.input("close", m.close), "dc", "delta(close, 1)");
  Data p = b.binary(gk::multiply(s), dv, dc, "product", "multiply");
  b.into_output(gk::scale(s), {p}, "scale");
  return std::move(b.app);
}
Series reference2(const Market& m) {
  return factors::scale(factors::multiply(factors::delta(series(m, m.volume), 1),
                                          factors::delta(series(m, m.close), 1)));
}

// factor3: heavy cross-sectional work (two ranks, a correlation): the GPU's ground.
BuiltApp build3(Market& m) {
  Builder b(m);
  const Shape s = m.shape;
  Data rc = b.unary(gk::rank(s), b.input("close", m.close), "rank_close", "rank(close)");
  Data rv = b.unary(gk::rank(s), b.input("volume", m.volume), "rank_volume", "rank(volume)");
  Data c = b.binary(gk::moving_correlation(s, window(m, 10)), rc, rv, "corr", "correlation 10");
  Data mm = b.unary(gk::moving_mean(s, window(m, 5)), c, "mean", "moving_mean 5");
  b.into_output(gk::scale(s), {mm}, "scale");
  return std::move(b.app);
}
Series reference3(const Market& m) {
  return factors::scale(factors::moving_mean(
      factors::moving_correlation(factors::rank(series(m, m.close)),
                                  factors::rank(series(m, m.volume)), window(m, 10)),
      window(m, 5)));
}

// factor4: fences on the critical path, a cheap node between them (a mapper must see that moving
// the cheap node to the GPU costs two copies).
BuiltApp build4(Market& m) {
  Builder b(m);
  const Shape s = m.shape;
  Data a = b.unary(gk::average(s), b.input("close", m.close), "avg_close", "AVG(close)");
  Data d = b.unary(gk::delta(s, 1), a, "delta", "delta 1");
  Data a2 = b.unary(gk::average(s), d, "avg_delta", "AVG(delta)");
  Data p = b.binary(gk::multiply(s), a2, b.input("returns", m.returns), "product", "multiply");
  b.into_output(gk::moving_mean(s, window(m, 5)), {p}, "moving_mean 5");
  return std::move(b.app);
}
Series reference4(const Market& m) {
  const Series a2 = factors::average(factors::delta(factors::average(series(m, m.close)), 1));
  return factors::moving_mean(factors::multiply(a2, series(m, m.returns)), window(m, 5));
}

// factor5: a fence fed by a subtree with little gain, joined with a subtree with much (a mapper
// must split the graph between the devices).
BuiltApp build5(Market& m) {
  Builder b(m);
  const Shape s = m.shape;
  Data dr =
      b.unary(gk::delta(s, 1), b.input("returns", m.returns), "delta_returns", "delta(returns, 1)");
  Data left = b.unary(gk::average(s), dr, "avg", "AVG");
  Data c = b.binary(gk::moving_correlation(s, window(m, 20)), b.input("close", m.close),
                    b.input("volume", m.volume), "corr", "correlation(close, volume, 20)");
  Data sd = b.unary(gk::moving_stddev(s, window(m, 20)), c, "stddev", "moving_stddev 20");
  Data right = b.unary(gk::rank(s), sd, "rank", "rank");
  Data p = b.binary(gk::multiply(s), left, right, "product", "multiply");
  b.into_output(gk::scale(s), {p}, "scale");
  return std::move(b.app);
}
Series reference5(const Market& m) {
  const Series left = factors::average(factors::delta(series(m, m.returns), 1));
  const Series right = factors::rank(factors::moving_stddev(
      factors::moving_correlation(series(m, m.close), series(m, m.volume), window(m, 20)),
      window(m, 20)));
  return factors::scale(factors::multiply(left, right));
}

}  // namespace

const std::vector<Application>& applications() {
  static const std::vector<Application> apps = {
      {"factor1", "rank(correlation(open, volume, 10)) - AVG(that rank)",
       "a GPU chain into a fence whose consumer is cheap", build1, reference1},
      {"factor2", "scale(delta(volume, 1) * delta(close, 1))",
       "two cheap branches joined, no fence", build2, reference2},
      {"factor3", "scale(moving_mean(correlation(rank(close), rank(volume), 10), 5))",
       "heavy cross-sectional work", build3, reference3},
      {"factor4", "moving_mean(AVG(delta(AVG(close), 1)) * returns, 5)",
       "fences on the critical path", build4, reference4},
      {"factor5",
       "scale(AVG(delta(returns, 1)) * rank(stddev(correlation(close, volume, 20), 20)))",
       "a low-gain subtree into a fence, joined with a high-gain one", build5, reference5},
  };
  return apps;
}

const Application& application(std::string_view name) {
  std::string names;
  for (const Application& a : applications()) {
    if (a.name == name) return a;
    names += (names.empty() ? "" : ", ") + a.name;
  }
  throw weft::InvalidArgument("factors: no application '" + std::string(name) + "' (choose " +
                              names + ")");
}

Comparison compare(const std::vector<float>& got, const Series& want) {
  if (got.size() != want.values.size()) {
    throw weft::InvalidArgument("factors::compare: " + std::to_string(got.size()) +
                                " values against a reference of " +
                                std::to_string(want.values.size()));
  }
  double magnitude = 0;
  for (float w : want.values) {
    if (!std::isnan(w)) magnitude = std::max(magnitude, std::abs(static_cast<double>(w)));
  }
  const double tol = 1e-3 * std::max(magnitude, 1e-30);
  Comparison c;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want.values[i];
    if (std::isnan(g) != std::isnan(w)) {
      ++c.mismatched;
      continue;
    }
    if (std::isnan(w)) continue;
    const double e = std::abs(static_cast<double>(g) - w);
    c.max_abs_error = std::max(c.max_abs_error, e);
    if (e > tol) ++c.mismatched;
  }
  c.mismatch_fraction = got.empty() ? 0 : static_cast<double>(c.mismatched) / got.size();
  return c;
}

}  // namespace factors
