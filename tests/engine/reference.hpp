// A naive reference evaluator of engine graphs: plain loops in logical N, C, H, W order with double
// accumulation. Slow and obviously right; the op and model tests compare the engine against it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tfpin/engine/graph.hpp"

namespace tfpin::engine::reference {

// inputs/outputs by name, each in its own layout (the graph's input layouts; outputs in the layout
// the graph asks for, or the first image input's layout, or NC).
// batch_statistics: batch norm normalises with the batch's mean and (biased) variance, as in a
// training step, instead of its running statistics.
std::map<std::string, std::vector<float>> evaluate(
    const Graph& graph, const std::map<std::string, std::vector<float>>& inputs,
    bool batch_statistics = false);

// Logical NCHW <-> NHWC memory order.
std::vector<float> nchw_to_nhwc(const std::vector<float>& x, const std::vector<std::int64_t>& dims);
std::vector<float> nhwc_to_nchw(const std::vector<float>& x, const std::vector<std::int64_t>& dims);

}  // namespace tfpin::engine::reference
