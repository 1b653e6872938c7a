// Helpers shared by the engine tests: running a graph on the engine, random data, comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "reference.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::testing {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = lo + (hi - lo) * static_cast<float>(s >> 40) / 16777216.0f;
  }
  return v;
}

struct EngineRun {
  Status status;
  std::map<std::string, std::vector<float>> outputs;
  CompileReport report;
  std::string description;  // Runtime::describe(): the steps, their kernels and layouts
};

inline EngineRun run_engine(const Graph& graph,
                            const std::map<std::string, std::vector<float>>& inputs,
                            const CompileOptions& options = {}, int runs = 1) {
  EngineRun r;
  std::unique_ptr<Runtime> rt;
  r.status = Runtime::create(graph, options, &rt);
  if (!r.status.ok()) return r;
  r.report = rt->report();
  r.description = rt->describe();
  std::vector<ExternalInput> in;
  for (const TensorInfo& t : rt->inputs()) in.push_back({t.name, inputs.at(t.name).data()});
  std::vector<ExternalOutput> out;
  for (const TensorInfo& t : rt->outputs()) {
    r.outputs[t.name].assign(t.elements(), std::nanf(""));
  }
  for (const TensorInfo& t : rt->outputs()) out.push_back({t.name, r.outputs[t.name].data()});
  r.status = rt->setup(in, out);
  for (int i = 0; r.status.ok() && i < runs; ++i) r.status = rt->run();
  return r;
}

// The lines of Runtime::describe(), split at blanks: index, step name, operator, kernel, then two
// words per argument (layout, "dims@buffer+offset").
inline std::vector<std::vector<std::string>> described_steps(const std::string& description) {
  std::vector<std::vector<std::string>> steps;
  std::istringstream lines(description);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> step;
    for (std::string w; words >> w;) step.push_back(w);
    if (step.size() >= 4) steps.push_back(std::move(step));
  }
  return steps;
}

// Channels per block of the layout the step named `step` writes (its last argument), when a
// batch-1 slice of whole blocks of its channels is contiguous: 16 for nChw16c ("aBcd16b"), 8 for
// nChw8c, 1 for nchw; 0 for any other layout (nhwc, ...) or no such step. Which blocked layout a
// convolution gets follows the ISA (and oneDNN's version), so tests read it rather than assume it.
inline std::int64_t channel_block_written_by(const std::string& description,
                                             const std::string& step) {
  for (const auto& words : described_steps(description)) {
    if (words[1] != step || words.size() < 6) continue;
    const std::string& layout = words[words.size() - 2];
    if (layout == "abcd") return 1;
    if (layout == "aBcd16b") return 16;
    if (layout == "aBcd8b") return 8;
    return 0;
  }
  return 0;
}

// |got - want| <= atol * max|want| + rtol * |want| everywhere; reports the worst element.
inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, double rtol = 1e-4,
                                        double atol = 1e-4) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double scale = 0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
  std::size_t bad = 0;
  std::size_t worst = 0;
  double worst_excess = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    const double tol = atol * scale + rtol * std::abs(want[i]);
    if (!(diff <= tol)) {
      ++bad;
      const double excess = std::isnan(diff) ? 1e300 : diff - tol;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ; worst at " << worst << ": got "
         << got[worst] << ", want " << want[worst] << " (scale " << scale << ")";
}

}  // namespace tfpin::engine::testing
