// `tfpin bench`: images/sec of a model-zoo CNN on the engine, with tf_cnn_benchmarks' flag names
// and output shape.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "cli_fwd.hpp"
#include "tfpin/engine/runtime.hpp"
#include "workload.hpp"

namespace tfpin::cli {

// The engine switches of `tfpin bench`: each flag turns one CompileOptions member off. A new switch
// is one row here (and the engine's field); the flag, its help, the compile options, the JSON
// report and the MPI ranks' agreement all come from the row.
struct EngineSwitch {
  const char* flag;                      // "--no_winograd"
  bool engine::CompileOptions::*option;  // what the flag turns off
  const char* help;
  const char* json_key;  // `--json` reports the member under this key; null: not reported
};
inline constexpr std::array<EngineSwitch, 9> engine_switches = {{
    {"--no_fusion", &engine::CompileOptions::fusion,
     "compile without batch-norm folding and post-op fusion (for comparison)", "fusion"},
    {"--no_winograd", &engine::CompileOptions::winograd,
     "direct convolutions only (default: Winograd where oneDNN finds it faster)", "winograd"},
    {"--no_elastic_threads", &engine::CompileOptions::elastic_threads,
     "every step on its lane's threads (default: steps nothing can run beside use every lane's "
     "cores, small ones one thread)",
     "elastic_threads"},
    {"--no_matrix_vector", &engine::CompileOptions::matrix_vector,
     "batch-1 inner products by oneDNN (default: tfpin's matrix-vector kernel on AVX-512 or AVX2)",
     "matrix_vector"},
    {"--no_in_place_concat", &engine::CompileOptions::in_place_concat,
     "batch-1 concats copy their inputs (default: the inputs are written straight into their "
     "slices of the output)",
     "in_place_concat"},
    {"--no_merge_siblings", &engine::CompileOptions::merge_siblings,
     "batch-1 sibling 1x1 convolutions run one by one (default: those reading the same input "
     "run as one convolution, each writing its slice of the output)",
     "merge_siblings"},
    {"--no_channels_last", &engine::CompileOptions::channels_last,
     "no channels-last (nhwc) brgemm alternative for strided and other non-Winograd convolutions "
     "(default: timed where oneDNN has one, kept where faster with its reorders)",
     "channels_last"},
    {"--no_own_1x1", &engine::CompileOptions::own_pointwise,
     "1x1 convolutions on oneDNN's kernels only (default: tfpin's own 1x1 kernel is timed beside "
     "them and kept where faster)",
     "own_pointwise"},
    {"--any_layouts", &engine::CompileOptions::blocked_layouts,
     "let oneDNN choose convolution layouts (default: blocked, nChw16c on AVX-512, nChw8c on "
     "AVX2)",
     nullptr},
}};

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
  // CompileOptions::force_kernel: a kernel name's start, empty for the timed choice.
  std::string force_kernel;
  bool json = false;
  // One per row of engine_switches: the flag was given (the engine feature is off).
  std::array<bool, engine_switches.size()> switched_off{};
  bool verbose = false;
  int operator()() const;
};

// Registers the `bench` subcommand; dispatch with `if (*app) return bench();`.
CLI::App* add_bench_command(CLI::App& app, BenchCommand& bench);

}  // namespace tfpin::cli
