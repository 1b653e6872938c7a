// What `tfpin bench` reports: the checked settings, the timed steps and what they gave, printed as
// tf_cnn_benchmarks' text (header, running lines, totals) or as one JSON object.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench.hpp"
#include "threads.hpp"
#include "workload.hpp"

namespace tfpin::cli {

enum class VariableUpdate { replicated, horovod, independent };

// The command's flags, checked.
struct BenchSettings {
  ModelChoice model;
  engine::Layout layout = engine::Layout::nhwc;
  unsigned batch = 0;  // per rank
  unsigned steps = 0;
  unsigned warmup = 0;
  unsigned streams = 1;  // --num_streams: one runtime per lane, each running its own requests
  ThreadSettings threads;
  VariableUpdate update = VariableUpdate::replicated;
  std::uint64_t fusion_threshold_bytes = 0;
  unsigned stall_seconds = 0;
  [[nodiscard]] bool over_mpi() const { return update != VariableUpdate::replicated; }
};

// Where every rank runs, for the header and the JSON.
struct RankPlace {
  std::string node;
  std::string cpus_allowed;
  std::string lanes;
};

// The timed steps, as one stream (run_steps) or several (run_streams) measured them.
struct Timing {
  std::vector<double> step_seconds;      // stream 0's
  std::vector<double> all_step_seconds;  // every stream's: the request latencies
  std::vector<double> stream_images_per_sec;
  std::vector<std::string> stream_cpus_allowed;
  double seconds = 0;          // the whole timed loop
  std::vector<double> losses;  // per timed step: the mean over the ranks
  double reduce_seconds = 0;   // summed over the timed steps
  double exposed_seconds = 0;
};

struct Stats {
  double mean = 0;         // images/sec from the mean step time
  double uncertainty = 0;  // standard error of the per-step speeds
  double jitter = 0;       // 1.4826 x median absolute deviation of the per-step speeds
};

// What the timed steps gave.
struct Outcome {
  double images_per_sec = 0;  // over the whole timed loop, summed over the ranks
  std::vector<double> rank_images_per_sec;
  Stats stats;
  double best_step_images_per_sec = 0;
  double flops_per_image = 0;
  float loss = 0;  // the last step's, mean over the ranks
  bool finite = true;
  // Data parallel, per timed step (rank 0's).
  double reduce_seconds_per_step = 0;
  double exposed_seconds_per_step = 0;
  std::vector<double> weight_checksums;  // per rank, after the run
};

// tf_cnn_benchmarks' get_perf_timing_str: images/sec of `batch` images per step.
Stats perf_stats(double batch, const std::vector<double>& times);
// "images/sec: M +/- U (jitter = J)"
std::string perf_string(const Stats& s);

// tf_cnn_benchmarks' preamble.
void print_header(const BenchCommand& bench, const BenchSettings& settings, int ranks,
                  const std::vector<RankPlace>& places);

// The `--json` report.
nlohmann::json json_report(const BenchCommand& bench, const BenchSettings& settings,
                           const std::vector<RankPlace>& places,
                           const engine::CompileReport& report, const Timing& timing,
                           const Outcome& outcome);

// The closing lines of the text report: totals, streams, FLOPs and memory, ranks, allreduce.
void print_text_report(const BenchSettings& settings, bool forward_only,
                       const engine::CompileReport& report, const Timing& timing,
                       const Outcome& outcome);

}  // namespace tfpin::cli
