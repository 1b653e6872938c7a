// `tfpin bench`'s report: tf_cnn_benchmarks' header and statistics, the closing totals, the JSON.
#include "bench_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

namespace tfpin::cli {

namespace {

std::string bytes_string(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// The CPU's "model name" from /proc/cpuinfo, so that every report says where it was measured.
std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const std::size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

// The median and 90th percentile of the request latencies, in ms.
std::pair<double, double> latency_ms(std::vector<double> seconds) {
  if (seconds.empty()) return {0, 0};
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(seconds.size()))) - 1;
    return 1e3 * seconds[std::min(i, seconds.size() - 1)];
  };
  const std::size_t m = seconds.size() / 2;
  const double median = seconds.size() % 2 == 1 ? seconds[m] : 0.5 * (seconds[m - 1] + seconds[m]);
  return {1e3 * median, at(0.9)};
}

}  // namespace

// tf_cnn_benchmarks' get_perf_timing_str.
Stats perf_stats(double batch, const std::vector<double>& times) {
  Stats s;
  if (times.empty()) return s;
  const double n = static_cast<double>(times.size());
  const double mean_time = std::accumulate(times.begin(), times.end(), 0.0) / n;
  s.mean = batch / mean_time;
  std::vector<double> speeds;
  for (double t : times) speeds.push_back(batch / t);
  const double mean_speed = std::accumulate(speeds.begin(), speeds.end(), 0.0) / n;
  double var = 0;
  for (double v : speeds) var += (v - mean_speed) * (v - mean_speed);
  s.uncertainty = std::sqrt(var / n) / std::sqrt(n);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  };
  const double med = median(speeds);
  std::vector<double> dev;
  for (double v : speeds) dev.push_back(std::abs(v - med));
  s.jitter = 1.4826 * median(dev);
  return s;
}

std::string perf_string(const Stats& s) {
  return fmt::format("images/sec: {:.1f} +/- {:.1f} (jitter = {:.1f})", s.mean, s.uncertainty,
                     s.jitter);
}

// tf_cnn_benchmarks' preamble.
void print_header(const BenchCommand& bench, const BenchSettings& settings, int ranks,
                  const std::vector<RankPlace>& places) {
  const engine::LibraryVersion v = engine::onednn_runtime_version();
  const ThreadSettings& threads = settings.threads;
  fmt::print("tfpin engine: oneDNN {} ({}), ISA {}\n", v.text(), v.runtime,
             engine::onednn_effective_isa());
  fmt::print("CPU:         {}\n", cpu_model_name());
  fmt::print("Model:       {}\n", bench.workload.model);
  fmt::print("Dataset:     imagenet (synthetic)\n");
  fmt::print("Mode:        {}\n", bench.workload.forward_only
                                      ? "forward-only (inference)"
                                      : "training (SGD with momentum, cross-entropy)");
  fmt::print("Batch size:  {} global\n             {} per device\n",
             static_cast<std::uint64_t>(settings.batch) * static_cast<unsigned>(ranks),
             settings.batch);
  fmt::print("Num batches: {}\n", settings.steps);
  fmt::print("Devices:     ['{}/cpu:0']\n", settings.over_mpi() ? "horovod" : "");
  fmt::print("Data format: {}\n", engine::to_string(settings.layout));
  fmt::print("Threads:     intra {} ({}), inter-op {} ({}), lanes {} ({})\n", threads.intra,
             threads.intra_source, threads.lanes, threads.lanes_source,
             lanes_text(threads.lane_cpus), threads.cpus_source);
  if (settings.streams > 1) {
    fmt::print(
        "Streams:     {} (one request per lane at a time, each with its own network and "
        "activations)\n",
        settings.streams);
  }
  if (settings.over_mpi()) {
    fmt::print("Variable update: {} ({} ranks{})\n", bench.variable_update, ranks,
               settings.update == VariableUpdate::horovod
                   ? fmt::format(", gradients allreduced in buckets of {} MiB",
                                 settings.fusion_threshold_bytes >> 20)
                   : ", no allreduce");
    for (std::size_t r = 0; r < places.size(); ++r) {
      fmt::print("  rank {}: {} cpus {} lanes {}\n", r, places[r].node, places[r].cpus_allowed,
                 places[r].lanes);
    }
  }
  fmt::print("==========\nGenerating model\n");
  std::fflush(stdout);
}

nlohmann::json json_report(const BenchCommand& bench, const BenchSettings& settings,
                           const std::vector<RankPlace>& places,
                           const engine::CompileReport& report, const Timing& timing,
                           const Outcome& outcome) {
  const bool forward_only = bench.workload.forward_only;
  nlohmann::json j;
  j["model"] = bench.workload.model;
  j["batch_size"] = settings.batch;
  j["num_batches"] = settings.steps;
  j["num_warmup_batches"] = settings.warmup;
  j["data_format"] = engine::to_string(settings.layout);
  j["forward_only"] = forward_only;
  j["mode"] = forward_only ? "inference" : "training";
  if (!forward_only) {
    j["loss"] = outcome.loss;
    j["losses"] = timing.losses;
  }
  j["images_per_sec"] = outcome.images_per_sec;
  const auto [median_ms, p90_ms] = latency_ms(timing.all_step_seconds);
  j["latency_ms"] = {{"median", median_ms}, {"p90", p90_ms}};  // per request (step)
  j["num_streams"] = settings.streams;
  if (settings.streams > 1) {
    nlohmann::json per_stream = nlohmann::json::array();
    for (std::size_t k = 0; k < timing.stream_images_per_sec.size(); ++k) {
      per_stream.push_back({{"images_per_sec", timing.stream_images_per_sec[k]},
                            {"cpus_allowed", timing.stream_cpus_allowed.at(k)}});
    }
    j["streams"] = per_stream;
  }
  // "best": the fastest step, a floor for what the machine gives when nothing else runs on it.
  j["step_images_per_sec"] = {{"mean", outcome.stats.mean},
                              {"uncertainty", outcome.stats.uncertainty},
                              {"jitter", outcome.stats.jitter},
                              {"best", outcome.best_step_images_per_sec}};
  const ThreadSettings& threads = settings.threads;
  j["intra"] = threads.intra;
  j["interop"] = threads.lanes;
  j["intra_source"] = threads.intra_source;
  j["interop_source"] = threads.lanes_source;
  j["lanes"] = threads.lane_cpus;
  j["cpus_allowed"] = places.at(0).cpus_allowed;
  for (std::size_t i = 0; i < engine_switches.size(); ++i) {
    if (engine_switches[i].json_key != nullptr) {
      j[engine_switches[i].json_key] = !bench.switched_off[i];
    }
  }
  j["onednn"] = {{"version", engine::onednn_runtime_version().text()},
                 {"built_with", engine::onednn_build_version().text()},
                 {"runtime", engine::onednn_runtime_version().runtime},
                 {"winograd_offered", engine::onednn_offers_winograd()},
                 {"isa", engine::onednn_effective_isa()}};
  j["cpu"] = cpu_model_name();
  j["gflop_per_image"] = outcome.flops_per_image / 1e9;
  j["gflops"] = outcome.flops_per_image * outcome.images_per_sec / 1e9;
  j["memory"] = {{"activations_peak_bytes", report.arena_bytes},
                 {"activations_unplanned_bytes", report.activation_bytes},
                 {"weights_bytes", report.weight_bytes},
                 {"scratchpad_bytes_per_lane", report.scratchpad_bytes}};
  j["compile"] = {{"steps", report.steps},
                  {"reorders", report.reorders},
                  {"wide_steps", report.wide_steps},
                  {"narrow_steps", report.narrow_steps},
                  {"timed_choices", report.timed_choices},
                  {"trial_runs", report.trial_runs},
                  {"forced_choices", report.forced_choices},
                  {"winograd_convolutions", report.winograd_convolutions},
                  {"folded_batch_norms", report.folded_batch_norms},
                  {"fused_relus", report.fused_relus},
                  {"fused_pools", report.fused_pools},
                  {"moved_average_pools", report.moved_average_pools},
                  {"max_pools_before_concats", report.max_pools_before_concats},
                  {"fused_adds", report.fused_adds},
                  {"in_place_adds", report.in_place_adds},
                  {"in_place_concats", report.in_place_concats},
                  {"merged_convolutions", report.merged_convolutions},
                  {"trained_tensors", report.parameters}};
  nlohmann::json choices = nlohmann::json::array();
  for (const engine::KernelChoice& c : report.kernel_choices) {
    nlohmann::json candidates = nlohmann::json::object();
    for (const auto& candidate : c.candidates) candidates[candidate.kernel] = candidate.best_us;
    choices.push_back({{"step", c.step}, {"kept", c.kept}, {"best_us", candidates}});
  }
  j["compile"]["kernel_choices"] = choices;
  if (!bench.force_kernel.empty()) j["force_kernel"] = bench.force_kernel;
  j["outputs_finite"] = outcome.finite;
  j["variable_update"] = bench.variable_update;
  j["ranks"] = places.size();
  j["global_batch_size"] = static_cast<std::uint64_t>(settings.batch) * places.size();
  if (settings.over_mpi()) {
    nlohmann::json per_rank = nlohmann::json::array();
    for (std::size_t r = 0; r < places.size(); ++r) {
      nlohmann::json x = {{"rank", r},
                          {"node", places[r].node},
                          {"cpus_allowed", places[r].cpus_allowed},
                          {"lanes", places[r].lanes},
                          {"images_per_sec", outcome.rank_images_per_sec.at(r)}};
      if (!forward_only) x["weights_checksum"] = outcome.weight_checksums.at(r);
      per_rank.push_back(x);
    }
    j["per_rank"] = per_rank;
  }
  if (settings.update == VariableUpdate::horovod && !forward_only) {
    const double reduce = outcome.reduce_seconds_per_step;
    j["allreduce"] = {
        {"buckets", report.gradient_buckets},
        {"bytes_per_step", report.gradient_bytes},
        {"fusion_threshold_bytes", settings.fusion_threshold_bytes},
        {"seconds_per_step", reduce},
        {"exposed_seconds_per_step", outcome.exposed_seconds_per_step},
        {"hidden_fraction",
         reduce > 0 ? std::clamp(1.0 - outcome.exposed_seconds_per_step / reduce, 0.0, 1.0) : 1.0}};
  }
  return j;
}

void print_text_report(const BenchSettings& settings, bool forward_only,
                       const engine::CompileReport& report, const Timing& timing,
                       const Outcome& outcome) {
  fmt::print("----------------------------------------------------------------\n");
  fmt::print("total images/sec: {:.2f}\n", outcome.images_per_sec);
  fmt::print("----------------------------------------------------------------\n");
  if (settings.streams > 1) {
    const auto [median_ms, p90_ms] = latency_ms(timing.all_step_seconds);
    fmt::print(
        "{} streams: images/sec per stream {:.2f}; latency per request: median {:.2f} ms, "
        "p90 {:.2f} ms\n",
        settings.streams, fmt::join(timing.stream_images_per_sec, ", "), median_ms, p90_ms);
  }
  fmt::print(
      "GFLOP/image: {:.2f}{}, GFLOP/s: {:.1f}; memory: activations {} (peak after reuse, "
      "{} without), weights {}; {} steps, {} reorders, {} wide and {} narrow steps\n",
      outcome.flops_per_image / 1e9, forward_only ? "" : " (3x forward)",
      outcome.flops_per_image * outcome.images_per_sec / 1e9, bytes_string(report.arena_bytes),
      bytes_string(report.activation_bytes), bytes_string(report.weight_bytes), report.steps,
      report.reorders, report.wide_steps, report.narrow_steps);
  if (settings.over_mpi()) {
    fmt::print("per rank images/sec: {:.2f}\n", fmt::join(outcome.rank_images_per_sec, ", "));
  }
  if (settings.update == VariableUpdate::horovod && !forward_only) {
    const double reduce = outcome.reduce_seconds_per_step;
    fmt::print(
        "allreduce per step: {} in {} buckets, {:.1f} ms, of which {:.1f} ms not hidden behind "
        "backward ({:.0f}% hidden)\n",
        bytes_string(report.gradient_bytes), report.gradient_buckets, reduce * 1e3,
        outcome.exposed_seconds_per_step * 1e3,
        reduce > 0 ? 100.0 * std::clamp(1.0 - outcome.exposed_seconds_per_step / reduce, 0.0, 1.0)
                   : 100.0);
  }
}

}  // namespace tfpin::cli
