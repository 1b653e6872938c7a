// `tfpin bench`: images/sec of a model-zoo CNN on the engine, with tf_cnn_benchmarks' flag names
// and output shape.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/models.hpp"

namespace tfpin::cli {

// What `tfpin bench` and `tfpin tune` both take, with the same names, defaults and help.
struct WorkloadOptions {
  std::string model = "resnet50";
  std::string data_format = "NHWC";
  bool forward_only = false;
};
void add_workload_options(CLI::App& sub, WorkloadOptions& workload);

struct BenchCommand {
  // Kept as text: tfpin's own parsers give the messages (flag, value, valid choices). The initial
  // values are the defaults `--help` shows.
  WorkloadOptions workload;
  std::string batch_size = "32";
  std::string num_batches = "100";
  std::string num_warmup_batches = "10";
  std::string num_intra_threads;
  std::string num_inter_threads;
  // Given, even empty ("--num_intra_threads ''" is refused, not taken as the default).
  CLI::Option* num_intra_option = nullptr;
  CLI::Option* num_inter_option = nullptr;
  std::string trace_file;
  // Throughput streams (OpenVINO's term): independent inference requests at once, one per lane.
  std::string num_streams = "1";
  // Data parallel across the ranks of an MPI job (tf_cnn_benchmarks' flag; see ranks.hpp).
  std::string variable_update = "replicated";
  std::string fusion_threshold_mb = "64";
  std::string stall_timeout = "120";
  bool json = false;
  bool no_fusion = false;
  bool no_winograd = false;
  bool no_elastic_threads = false;
  bool no_matrix_vector = false;
  bool no_in_place_concat = false;
  bool any_layouts = false;
  bool verbose = false;
  int operator()() const;
};

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
// "0-3 | 4-7": each lane's CPUs, as bench and tune print them.
std::string lanes_text(const std::vector<std::vector<unsigned>>& lanes);

// Registers the `bench` subcommand; dispatch with `if (*app) return bench();`.
CLI::App* add_bench_command(CLI::App& app, BenchCommand& bench);

}  // namespace tfpin::cli
