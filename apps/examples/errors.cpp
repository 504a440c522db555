// docs/errors.md's opening example, built and run as a test so that it stays true.
#include <weft/weft.hpp>

#include <exception>
#include <stdexcept>
#include <vector>

int main() {
  int caught = 0;

  // An argument outside what a call accepts: the message names it and its value.
  try {
    weft::cpu::ExecutorOptions options;
    options.private_bound = 0;
    weft::cpu::Executor bad(options);
  } catch (const weft::InvalidArgument& e) {
    ++caught;  // "... private_bound ... 0 ..."
  }

  weft::cpu::Executor ex;
  // A task's own exception comes back as thrown, not wrapped.
  auto f = ex.submit([]() -> int { throw std::out_of_range("index 7"); });
  try {
    (void)f.get();
  } catch (const std::out_of_range&) {
    ++caught;
  }
  // A call the object's state forbids.
  try {
    (void)f.get();
  } catch (const weft::InvalidState&) {
    ++caught;
  }

  // A graph node that throws: the run throws weft::Error naming the node, with the node's
  // exception nested in it; the graph can run again.
  std::vector<float> v(16, 1.0f);
  weft::graph::Graph g;
  const weft::graph::Data d = g.add_data("v", v.data(), v.size() * sizeof(float));
  g.add_node(
      {"fails", [](const weft::graph::CpuCall&) { throw std::domain_error("bad input"); }, {}, {}},
      {weft::graph::read_write(d)});
  weft::graph::Runtime rt(ex);
  try {
    (void)rt.run(g, weft::graph::Policy::a_free);
  } catch (const weft::Error& e) {  // "... node fails ..."
    try {
      std::rethrow_if_nested(e);
    } catch (const std::domain_error&) {
      ++caught;
    }
  }

  // Work after shutdown is refused. Every exception of weft's is a weft::Error.
  ex.shutdown();
  try {
    (void)ex.submit([] { return 0; });
  } catch (const weft::Error& e) {
    caught += dynamic_cast<const weft::ShutDown*>(&e) != nullptr;
  }
  return caught == 5 ? 0 : 1;
}
