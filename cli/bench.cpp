// `tfpin bench`: build a model-zoo network, compile it for the thread plan, run warm-up and timed
// steps and report images/sec the way tf_cnn_benchmarks does.
#include "bench.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "commands.hpp"
#include "tfpin/cpulist.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"
#include "tfpin/report.hpp"
#include "threads.hpp"

namespace tfpin::cli {

namespace {

using tfpin::engine::Layout;
using tfpin::engine::Model;

struct Stats {
  double mean = 0;         // images/sec from the mean step time
  double uncertainty = 0;  // standard error of the per-step speeds
  double jitter = 0;       // 1.4826 x median absolute deviation of the per-step speeds
};

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

// The kernel's Cpus_allowed_list, read from /proc rather than sched_getaffinity: the shim answers
// the latter with the plan's view, and `tfpin tune` wants proof of the binding itself.
std::string kernel_cpus_allowed() {
  std::ifstream status("/proc/self/status");
  const std::string key = "Cpus_allowed_list:";
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(key)) {
      const auto first = line.find_first_not_of(" \t", key.size());
      return first == std::string::npos ? "" : line.substr(first);
    }
  }
  return "";
}

std::string bytes_string(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

engine::Model model_option(const std::string& text) {
  const auto model = engine::parse_model(text);
  if (!model) {
    usage_error(fmt::format("--model={} is not a model of the zoo (valid: {})", shown_value(text),
                            fmt::join(engine::model_names(), ", ")));
  }
  return *model;
}

engine::Layout data_format_option(const std::string& text) {
  const auto layout = engine::parse_layout(text);
  if (!layout) {
    usage_error(
        fmt::format("--data_format={} is not a layout (valid: NHWC, NCHW)", shown_value(text)));
  }
  return *layout;
}

std::string lanes_text(const std::vector<std::vector<unsigned>>& lanes) {
  std::vector<std::string> texts;
  for (const auto& cpus : lanes) texts.push_back(format_cpulist(cpus));
  return fmt::format("{}", fmt::join(texts, " | "));
}

void add_workload_options(CLI::App& sub, WorkloadOptions& workload) {
  sub.add_option("--model", workload.model,
                 fmt::format("{}", fmt::join(engine::model_names(), "|")))
      ->type_name("NAME");
  sub.add_option("--data_format", workload.data_format, "layout of the input images: NHWC|NCHW")
      ->type_name("NHWC|NCHW");
  sub.add_flag("--forward_only", workload.forward_only,
               "inference only (default: training steps: forward, backward, SGD update)");
}

CLI::App* add_bench_command(CLI::App& app, BenchCommand& bench) {
  CLI::App* sub = app.add_subcommand(
      "bench", "images/sec of a standard CNN on the engine (tf_cnn_benchmarks' flags and output)");
  // Help shows each option's default from the command's own initial value: written once.
  sub->option_defaults()->always_capture_default();
  add_workload_options(*sub, bench.workload);
  sub->add_option("--batch_size", bench.batch_size, "images per step")->type_name("B");
  sub->add_option("--num_batches", bench.num_batches, "timed steps")->type_name("N");
  sub->add_option("--num_warmup_batches", bench.num_warmup_batches, "untimed steps first")
      ->type_name("N");
  bench.num_intra_option =
      sub->add_option("--num_intra_threads", bench.num_intra_threads,
                      "OpenMP threads per inter-op lane (default: TF_NUM_INTRAOP_THREADS, "
                      "OMP_NUM_THREADS, the tfpin plan, else cores / lanes; 0 = default)")
          ->type_name("I");
  bench.num_inter_option =
      sub->add_option("--num_inter_threads", bench.num_inter_threads,
                      "inter-op lanes running independent operators concurrently (default: "
                      "TF_NUM_INTEROP_THREADS, the tfpin plan, else 1; 0 = default)")
          ->type_name("M");
  sub->add_option("--trace_file", bench.trace_file,
                  "write a Chrome trace (JSON) of the timed steps: one event per operator")
      ->type_name("FILE");
  sub->add_flag("--json", bench.json, "print one JSON object instead of the text report");
  sub->add_flag("--no_fusion", bench.no_fusion,
                "compile without batch-norm folding and post-op fusion (for comparison)");
  sub->add_flag("--no_winograd", bench.no_winograd,
                "direct convolutions only (default: Winograd where oneDNN finds it faster)");
  sub->add_flag("--any_layouts", bench.any_layouts,
                "let oneDNN choose convolution layouts (default: blocked nChw16c)");
  sub->add_flag("-v,--verbose", bench.verbose,
                "print the compiled steps (oneDNN implementation and layouts) to stderr");
  return sub;
}

namespace {

// The command's flags, checked.
struct BenchSettings {
  engine::Model model = engine::Model::resnet50;
  engine::Layout layout = engine::Layout::nhwc;
  unsigned batch = 0;
  unsigned steps = 0;
  unsigned warmup = 0;
  ThreadSettings threads;
};

BenchSettings check_flags(const BenchCommand& bench) {
  BenchSettings settings;
  settings.model = model_option(bench.workload.model);
  settings.layout = data_format_option(bench.workload.data_format);
  settings.batch = parse_count("--batch_size", bench.batch_size, 1u << 30);
  settings.steps = parse_count("--num_batches", bench.num_batches, 1000000);
  settings.warmup = parse_non_negative("--num_warmup_batches", bench.num_warmup_batches, 1000000);
  ThreadRequest request;
  if (bench.num_intra_option != nullptr && bench.num_intra_option->count() > 0) {
    request.intra = parse_non_negative("--num_intra_threads", bench.num_intra_threads, max_count);
  }
  if (bench.num_inter_option != nullptr && bench.num_inter_option->count() > 0) {
    request.inter = parse_non_negative("--num_inter_threads", bench.num_inter_threads, max_count);
  }
  settings.threads = resolve_threads(request, process_getenv);
  return settings;
}

// tf_cnn_benchmarks' preamble.
void print_header(const BenchCommand& bench, const BenchSettings& settings) {
  const engine::LibraryVersion v = engine::onednn_runtime_version();
  const ThreadSettings& threads = settings.threads;
  fmt::print("tfpin engine: oneDNN {} ({})\n", v.text(), v.runtime);
  fmt::print("Model:       {}\n", bench.workload.model);
  fmt::print("Dataset:     imagenet (synthetic)\n");
  fmt::print("Mode:        {}\n", bench.workload.forward_only
                                      ? "forward-only (inference)"
                                      : "training (SGD with momentum, cross-entropy)");
  fmt::print("Batch size:  {} global\n             {} per device\n", settings.batch,
             settings.batch);
  fmt::print("Num batches: {}\n", settings.steps);
  fmt::print("Devices:     ['/cpu:0']\n");
  fmt::print("Data format: {}\n", engine::to_string(settings.layout));
  fmt::print("Threads:     intra {} ({}), inter-op {} ({}), lanes {} ({})\n", threads.intra,
             threads.intra_source, threads.inter, threads.inter_source,
             lanes_text(threads.lane_cpus), threads.cpus_source);
  fmt::print("==========\nGenerating model\n");
  std::fflush(stdout);
}

engine::CompileOptions compile_options(const BenchCommand& bench, const BenchSettings& settings) {
  engine::CompileOptions options;
  options.lanes = settings.threads.inter;
  options.intra = settings.threads.intra;
  options.lane_cpus = settings.threads.lane_cpus;
  options.fusion = !bench.no_fusion;
  options.winograd = !bench.no_winograd;
  options.blocked_layouts = !bench.any_layouts;
  options.trace = !bench.trace_file.empty();
  if (!bench.workload.forward_only) options.training = engine::TrainingOptions{};
  return options;
}

// The synthetic data a run reads and writes, bound to the runtime.
struct Feed {
  std::vector<float> images;
  std::vector<float> labels;
  std::vector<float> probabilities;
};

engine::Status bind_feed(engine::Runtime& runtime, bool training, unsigned batch, Feed& feed) {
  const engine::TensorInfo& in_info = runtime.inputs().at(0);
  const engine::TensorInfo& out_info = runtime.outputs().at(0);
  feed.images.resize(in_info.elements());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : feed.images) x = dist(rng);
  feed.probabilities.resize(out_info.elements());
  // Synthetic labels, as tf_cnn_benchmarks' synthetic data: fixed, spread over the classes.
  feed.labels.resize(batch);
  for (unsigned i = 0; i < batch; ++i) feed.labels[i] = static_cast<float>((i * 7919u) % 1000u);
  std::vector<engine::ExternalInput> in = {{in_info.name, feed.images.data()}};
  if (training) in.push_back({"labels", feed.labels.data()});
  const engine::ExternalOutput out[] = {{out_info.name, feed.probabilities.data()}};
  return runtime.setup(in, out);
}

struct Timing {
  std::vector<double> step_seconds;
  double seconds = 0;  // the whole timed loop
};

// Warm-up, then the timed steps with tf_cnn_benchmarks' running report; nullopt when a step failed
// (reported).
std::optional<Timing> run_steps(engine::Runtime& runtime, const BenchCommand& bench,
                                const BenchSettings& settings) {
  using Clock = std::chrono::steady_clock;
  const bool forward_only = bench.workload.forward_only;
  const bool progress = !bench.json && isatty(STDERR_FILENO) != 0;
  auto run_step = [&]() {
    engine::Status s = runtime.run();
    if (!s.ok()) {
      if (progress) fmt::print(stderr, "\r\033[K");
      fmt::print(stderr, "tfpin bench: step failed: {}\n", s.to_string());
      return false;
    }
    return true;
  };
  if (!bench.json) fmt::print("Running warm up\n");
  std::fflush(stdout);
  for (unsigned i = 0; i < settings.warmup; ++i) {
    if (progress) fmt::print(stderr, "\rwarm-up {}/{}", i + 1, settings.warmup);
    if (!run_step()) return std::nullopt;
  }
  runtime.take_trace();  // keep only the timed steps
  if (progress) fmt::print(stderr, "\r\033[K");
  if (!bench.json)
    fmt::print("Done warm up\nStep\tImg/sec{}\n", forward_only ? "" : "\ttotal_loss");
  std::fflush(stdout);
  const double batch = settings.batch;
  std::vector<double> times;
  const auto start = Clock::now();
  for (unsigned i = 0; i < settings.steps; ++i) {
    const auto t0 = Clock::now();
    if (!run_step()) return std::nullopt;
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (progress) {
      fmt::print(stderr, "\rstep {}/{}: {:.1f} images/sec", i + 1, settings.steps,
                 batch / times.back());
    }
    if (!bench.json && (i == 0 || (i + 1) % 10 == 0)) {
      if (progress) fmt::print(stderr, "\r\033[K");
      if (forward_only) {
        fmt::print("{}\t{}\n", i + 1, perf_string(perf_stats(batch, times)));
      } else {
        fmt::print("{}\t{}\t{:.3f}\n", i + 1, perf_string(perf_stats(batch, times)),
                   runtime.loss());
      }
      std::fflush(stdout);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (progress) fmt::print(stderr, "\r\033[K");
  return Timing{std::move(times), seconds};
}

// What the timed steps gave.
struct Outcome {
  double images_per_sec = 0;  // over the whole timed loop
  Stats stats;
  double best_step_images_per_sec = 0;
  double flops_per_image = 0;
  float loss = 0;
  bool finite = true;
};

nlohmann::json json_report(const BenchCommand& bench, const BenchSettings& settings,
                           const std::string& cpus_allowed, const engine::CompileReport& report,
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
  if (!forward_only) j["loss"] = outcome.loss;
  j["images_per_sec"] = outcome.images_per_sec;
  // "best": the fastest step, a floor for what the machine gives when nothing else runs on it.
  j["step_images_per_sec"] = {{"mean", outcome.stats.mean},
                              {"uncertainty", outcome.stats.uncertainty},
                              {"jitter", outcome.stats.jitter},
                              {"best", outcome.best_step_images_per_sec}};
  const ThreadSettings& threads = settings.threads;
  j["intra"] = threads.intra;
  j["interop"] = threads.inter;
  j["intra_source"] = threads.intra_source;
  j["interop_source"] = threads.inter_source;
  j["lanes"] = threads.lane_cpus;
  j["cpus_allowed"] = cpus_allowed;
  j["fusion"] = !bench.no_fusion;
  j["winograd"] = !bench.no_winograd;
  j["onednn"] = {{"version", engine::onednn_runtime_version().text()},
                 {"built_with", engine::onednn_build_version().text()},
                 {"runtime", engine::onednn_runtime_version().runtime},
                 {"winograd_offered", engine::onednn_offers_winograd()}};
  j["gflop_per_image"] = outcome.flops_per_image / 1e9;
  j["gflops"] = outcome.flops_per_image * outcome.images_per_sec / 1e9;
  j["memory"] = {{"activations_peak_bytes", report.arena_bytes},
                 {"activations_unplanned_bytes", report.activation_bytes},
                 {"weights_bytes", report.weight_bytes},
                 {"scratchpad_bytes_per_lane", report.scratchpad_bytes}};
  j["compile"] = {{"steps", report.steps},
                  {"reorders", report.reorders},
                  {"folded_batch_norms", report.folded_batch_norms},
                  {"fused_relus", report.fused_relus},
                  {"fused_adds", report.fused_adds},
                  {"in_place_adds", report.in_place_adds},
                  {"trained_tensors", report.parameters}};
  j["outputs_finite"] = outcome.finite;
  return j;
}

void print_text_report(bool forward_only, const engine::CompileReport& report,
                       const Outcome& outcome) {
  fmt::print("----------------------------------------------------------------\n");
  fmt::print("total images/sec: {:.2f}\n", outcome.images_per_sec);
  fmt::print("----------------------------------------------------------------\n");
  fmt::print(
      "GFLOP/image: {:.2f}{}, GFLOP/s: {:.1f}; memory: activations {} (peak after reuse, "
      "{} without), weights {}; {} steps, {} reorders\n",
      outcome.flops_per_image / 1e9, forward_only ? "" : " (3x forward)",
      outcome.flops_per_image * outcome.images_per_sec / 1e9, bytes_string(report.arena_bytes),
      bytes_string(report.activation_bytes), bytes_string(report.weight_bytes), report.steps,
      report.reorders);
}

}  // namespace

int BenchCommand::operator()() const {
  // Before the engine starts: the main thread then becomes a lane's OpenMP master, pinned to one
  // core.
  const std::string cpus_allowed = kernel_cpus_allowed();
  const BenchSettings settings = check_flags(*this);
  // An unwritable trace file is refused now, not after the run.
  if (!trace_file.empty() && !std::ofstream(trace_file)) {
    usage_error(
        fmt::format("--trace_file={}: cannot write to it ({}); valid: a file tfpin can write",
                    shown_value(trace_file), std::strerror(errno)));
  }
  const bool forward_only = workload.forward_only;
  if (!json) print_header(*this, settings);

  const engine::Graph graph = engine::build_model(settings.model, settings.batch, settings.layout);
  std::unique_ptr<engine::Runtime> runtime;
  engine::Status status =
      engine::Runtime::create(graph, compile_options(*this, settings), &runtime);
  if (!status.ok()) {
    // A batch whose memory cannot be planned is the user's value to change, like a bad flag.
    const bool too_large = status.code() == engine::StatusCode::out_of_memory;
    const std::string refusal =
        too_large ? fmt::format(
                        "--batch_size={} is too large for {} on this machine (valid: a "
                        "smaller batch): ",
                        settings.batch, workload.model)
                  : std::string();
    fmt::print(stderr, "tfpin bench: {}cannot compile {} for batch {}: {}\n", refusal,
               workload.model, settings.batch, status.to_string());
    return too_large ? exit_usage : exit_failure;
  }
  if (verbose) fmt::print(stderr, "{}", runtime->describe());
  Feed feed;
  status = bind_feed(*runtime, !forward_only, settings.batch, feed);
  if (!status.ok()) {
    fmt::print(stderr, "tfpin bench: setup failed: {}\n", status.to_string());
    return exit_failure;
  }

  const std::optional<Timing> timing = run_steps(*runtime, *this, settings);
  if (!timing) return exit_failure;
  if (!trace_file.empty()) {
    std::ofstream f(trace_file);
    f << engine::chrome_trace_json(runtime->take_trace());
    if (!f) {
      fmt::print(stderr, "tfpin bench: cannot write --trace_file={}\n", shown_value(trace_file));
      return exit_failure;
    }
  }

  const engine::CompileReport& report = runtime->report();
  const double batch = settings.batch;
  Outcome outcome;
  const std::vector<double>& times = timing->step_seconds;
  outcome.images_per_sec = batch * settings.steps / timing->seconds;
  outcome.stats = perf_stats(batch, times);
  outcome.best_step_images_per_sec = batch / *std::min_element(times.begin(), times.end());
  // Training counts 3x the forward FLOPs (forward, backward data, backward weights), as is usual.
  outcome.flops_per_image = report.flops / batch * (forward_only ? 1.0 : 3.0);
  outcome.loss = runtime->loss();
  outcome.finite = std::all_of(feed.probabilities.begin(), feed.probabilities.end(),
                               [](float p) { return std::isfinite(p); });
  if (!forward_only) outcome.finite = outcome.finite && std::isfinite(outcome.loss);

  if (json) {
    fmt::print("{}\n", json_text(json_report(*this, settings, cpus_allowed, report, outcome)));
  } else {
    print_text_report(forward_only, report, outcome);
  }
  if (!outcome.finite) {
    fmt::print(stderr, "tfpin bench: the outputs {}are not finite\n",
               forward_only ? "" : "or the loss ");
    return exit_failure;
  }
  return 0;
}

}  // namespace tfpin::cli
