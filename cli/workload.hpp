// The workload `tfpin bench` and `tfpin tune` both take: the model (zoo or ONNX file), the
// layout and the mode, with the same names, defaults, help and refusals.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli_fwd.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"
#include "threads.hpp"

namespace tfpin::cli {

// What `tfpin bench` and `tfpin tune` both take, with the same names, defaults and help.
struct WorkloadOptions {
  std::string model = "resnet50";
  std::string data_format = "NHWC";
  bool forward_only = false;
};
void add_workload_options(CLI::App& sub, WorkloadOptions& workload);

// Checks `tfpin bench` and `tfpin tune` share, so both refuse a value with the same words. Each
// throws tfpin::Error(invalid_request) naming the option, the value and what is valid.
// --model: a network of the zoo, or an ONNX file (a name ending in .onnx).
struct ModelChoice {
  std::optional<engine::Model> zoo;
  std::string onnx;  // the file, when not the zoo
};
ModelChoice model_option(const std::string& text);
// The graph bench runs: the zoo network, or the ONNX model imported for `batch` (a classifier's
// softmax appended for training). The ONNX input is the model's own (NCHW), whatever `layout`.
// Throws tfpin::Error(invalid_request) for a model the engine cannot run at this batch.
engine::Graph workload_graph(const ModelChoice& model, unsigned batch, engine::Layout layout,
                             bool training);
engine::Layout data_format_option(const std::string& text);
// The one conversion from the resolved thread plan to the engine: its lanes, threads per lane and
// each lane's CPUs; the caller sets the rest of the options.
engine::CompileOptions engine_options(const ThreadSettings& threads);
// "0-3 | 4-7": each lane's CPUs, as bench and tune print them.
std::string lanes_text(const std::vector<std::vector<unsigned>>& lanes);

}  // namespace tfpin::cli
