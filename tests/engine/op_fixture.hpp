// The fixture of the operator tests (test_ops.cpp, test_ops_onnx.cpp): a graph built from random
// inputs and constants, run on the engine with one lane and with two, compared with the naive
// reference. Parameters: the images' layout and whether the compiler fuses.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::testing {

inline std::size_t element_count(const std::vector<std::int64_t>& d) {
  std::size_t n = 1;
  for (auto x : d) n *= static_cast<std::size_t>(x);
  return n;
}

class OpFixture : public ::testing::TestWithParam<std::tuple<Layout, bool>> {
 protected:
  using Dims = std::vector<std::int64_t>;

  Layout layout() const { return std::get<0>(GetParam()); }
  bool fusion() const { return std::get<1>(GetParam()); }

  // Values in [-range, range], in the parameter's layout for images.
  TensorId input(const std::string& name, const Dims& dims, float range = 1.0f) {
    const bool image = dims.size() == 4;
    TensorId id = g.input(name, dims, image ? layout() : Layout::nc);
    std::vector<float> data = random_vector(element_count(dims), ++seed, -range, range);
    inputs[name] = image && layout() == Layout::nhwc ? reference::nchw_to_nhwc(data, dims) : data;
    return id;
  }
  TensorId constant(const std::string& name, const Dims& dims, float scale = 0.3f) {
    return g.constant(name, dims, random_vector(element_count(dims), ++seed, -scale, scale));
  }

  // Runs the graph on the engine (one lane, then two) and compares with the reference.
  void check(double rtol = 1e-4, double atol = 1e-4) {
    const auto want = reference::evaluate(g, inputs);
    for (unsigned lanes : {1u, 2u}) {
      CompileOptions o;
      o.fusion = fusion();
      o.lanes = lanes;
      auto got = run_engine(g, inputs, o, 2);
      ASSERT_TRUE(got.status.ok()) << got.status.to_string();
      for (const auto& [name, values] : want) {
        EXPECT_TRUE(close(got.outputs.at(name), values, rtol, atol))
            << "output '" << name << "' with " << lanes << " lane(s)";
      }
      last = got.report;
      last_description = got.description;
    }
  }

  Graph g;
  std::map<std::string, std::vector<float>> inputs;
  std::uint64_t seed = 0;
  CompileReport last;
  std::string last_description;  // Runtime::describe() of the last run (two lanes)
};

}  // namespace tfpin::engine::testing
