// `tfpin bench`: build a model-zoo network, compile it for the thread plan, run warm-up and timed
// steps and report images/sec the way tf_cnn_benchmarks does.
#include "bench.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <latch>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "bench_report.hpp"
#include "commands.hpp"
#include "output_file.hpp"
#include "ranks.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/cpulist.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"
#include "tfpin/report.hpp"
#include "tfpin/thread_affinity.hpp"
#include "threads.hpp"

namespace tfpin::cli {

namespace {

// The kernel's Cpus_allowed_list, read from /proc rather than sched_getaffinity: the shim answers
// the latter with the plan's view, and `tfpin tune` wants proof of the binding itself.
std::string kernel_cpus_allowed(const char* status_file = "/proc/self/status") {
  std::ifstream status(status_file);
  const std::string key = "Cpus_allowed_list:";
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(key)) {
      const auto first = line.find_first_not_of(" \t", key.size());
      return first == std::string::npos ? "" : line.substr(first);
    }
  }
  return "";
}

}  // namespace

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
  sub->add_option("--num_streams", bench.num_streams,
                  "throughput mode (forward-only): S independent requests at once, one per "
                  "inter-op lane, each with its own copy of the network on its lane's cores and "
                  "NUMA node; lanes default to S and threads per lane to cores / S; the step "
                  "lines show stream 0's steps as the rate of S streams")
      ->type_name("S");
  sub->add_option("--trace_file", bench.trace_file,
                  "write a Chrome trace (JSON) of the timed steps: one event per operator")
      ->type_name("FILE");
  sub->add_option("--variable_update", bench.variable_update,
                  "replicated: this process alone; horovod: data parallel over the ranks of the "
                  "MPI job it was launched in (srun --mpi=pmix), gradients averaged by allreduce; "
                  "independent: the ranks train apart (no allreduce, for comparison)")
      ->type_name("replicated|horovod|independent");
  sub->add_option("--fusion_threshold_mb", bench.fusion_threshold_mb,
                  "horovod: gradients are reduced in buckets of at least this many MiB, each as "
                  "soon as backward has filled it (HOROVOD_FUSION_THRESHOLD; 0 = one per tensor)")
      ->type_name("MB");
  sub->add_option("--stall_timeout", bench.stall_timeout,
                  "MPI jobs: seconds a rank waits for the others in any collective before it ends "
                  "the job (a rank died or stopped; 0 = wait forever)")
      ->type_name("SECONDS");
  sub->add_option("--force_kernel", bench.force_kernel,
                  "wherever a step's candidate kernels include one whose name starts with this "
                  "(e.g. tfpin_1x1, jit_1x1:avx512_core, tfpin_wino_4x3), run that one untimed; "
                  "the other steps time theirs as usual. For comparing kernels on whole models: "
                  "--json's compile.kernel_choices names the candidates")
      ->type_name("PREFIX");
  sub->add_flag("--json", bench.json, "print one JSON object instead of the text report");
  for (std::size_t i = 0; i < engine_switches.size(); ++i) {
    sub->add_flag(engine_switches[i].flag, bench.switched_off[i], engine_switches[i].help);
  }
  sub->add_flag("-v,--verbose", bench.verbose,
                "print the compiled steps (oneDNN implementation and layouts) to stderr");
  return sub;
}

namespace {

VariableUpdate variable_update_option(const std::string& text) {
  if (text == "replicated") return VariableUpdate::replicated;
  if (text == "horovod") return VariableUpdate::horovod;
  if (text == "independent") return VariableUpdate::independent;
  usage_error(
      fmt::format("--variable_update={} is not supported (valid: replicated, horovod, independent)",
                  shown_value(text)));
}

BenchSettings check_flags(const BenchCommand& bench) {
  BenchSettings settings;
  settings.model = model_option(bench.workload.model);
  settings.layout = data_format_option(bench.workload.data_format);
  // An ONNX model's input is laid out as the model says: NCHW.
  if (!settings.model.zoo) settings.layout = engine::Layout::nchw;
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
  settings.streams = parse_count("--num_streams", bench.num_streams, max_count);
  if (settings.streams > 1) {
    if (!bench.workload.forward_only) {
      usage_error(
          fmt::format("--num_streams={}: streams run independent inference requests and need "
                      "--forward_only (valid: 1 for training)",
                      settings.streams));
    }
    if (request.inter && *request.inter != 0 && *request.inter != settings.streams) {
      usage_error(fmt::format(
          "--num_streams={} runs one request per inter-op lane, but --num_inter_threads={} "
          "(valid: leave --num_inter_threads out, or give it the same value)",
          settings.streams, *request.inter));
    }
    if (!bench.trace_file.empty()) {
      usage_error(
          fmt::format("--trace_file traces one request at a time (valid with "
                      "--num_streams=1, not {})",
                      settings.streams));
    }
    request.inter = settings.streams;
    request.inter_flag = "--num_streams";
    request.intra_ignores_environment = true;
  }
  settings.threads = resolve_threads(request, process_getenv);
  settings.update = variable_update_option(bench.variable_update);
  settings.fusion_threshold_bytes =
      std::uint64_t{
          parse_non_negative("--fusion_threshold_mb", bench.fusion_threshold_mb, 1u << 20)}
      << 20;
  settings.stall_seconds = parse_non_negative("--stall_timeout", bench.stall_timeout, 1000000);
  return settings;
}

// All the CPUs of the plan: where the communication thread may run. It sleeps while the network
// works and wakes only to start and finish a bucket's reduction, so it shares the compute cores
// rather than taking one of its own (which would idle most of the time).
std::vector<unsigned> plan_cpus(const ThreadSettings& threads) {
  std::vector<unsigned> cpus;
  for (const auto& lane : threads.lane_cpus) cpus.insert(cpus.end(), lane.begin(), lane.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

engine::CompileOptions compile_options(const BenchCommand& bench, const BenchSettings& settings,
                                       Ranks& ranks) {
  engine::CompileOptions options = engine_options(settings.threads);
  for (std::size_t i = 0; i < engine_switches.size(); ++i) {
    options.*engine_switches[i].option = !bench.switched_off[i];
  }
  options.trace = !bench.trace_file.empty();
  options.force_kernel = bench.force_kernel;
  if (!bench.workload.forward_only) {
    engine::TrainingOptions training;
    training.first_sample = static_cast<std::uint64_t>(ranks.rank()) * settings.batch;
    if (settings.update == VariableUpdate::horovod) {
      engine::DataParallelOptions dp;
      dp.reducer = ranks.gradient_reducer();
      dp.replicas = static_cast<unsigned>(ranks.size());
      dp.fusion_threshold_bytes = settings.fusion_threshold_bytes;
      dp.communication_cpus = plan_cpus(settings.threads);
      training.data_parallel = dp;
    }
    options.training = training;
  }
  return options;
}

// The synthetic data a run reads and writes, bound to the runtime.
struct Feed {
  std::vector<float> images;
  std::vector<float> labels;
  std::vector<float> probabilities;
};

// Sample g of the global batch is the same whichever rank holds it: the ranks of a data-parallel
// job together see what one process of the global batch sees.
engine::Status bind_feed(engine::Runtime& runtime, bool training, unsigned batch,
                         std::uint64_t first_sample, Feed& feed) {
  const engine::TensorInfo& in_info = runtime.inputs().at(0);
  const engine::TensorInfo& out_info = runtime.outputs().at(0);
  feed.images.resize(in_info.elements());
  const std::size_t per_sample = in_info.elements() / batch;  // the batch is outermost
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (unsigned n = 0; n < batch; ++n) {
    const std::uint64_t sample = first_sample + n;
    std::seed_seq seed{7u, static_cast<unsigned>(sample), static_cast<unsigned>(sample >> 32)};
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < per_sample; ++i) feed.images[n * per_sample + i] = dist(rng);
  }
  feed.probabilities.resize(out_info.elements());
  // Synthetic labels, as tf_cnn_benchmarks' synthetic data: fixed, spread over the classes.
  feed.labels.resize(batch);
  const auto classes = static_cast<std::uint64_t>(out_info.dims.size() == 2 ? out_info.dims[1] : 1);
  for (unsigned n = 0; n < batch; ++n) {
    feed.labels[n] = static_cast<float>(((first_sample + n) * 7919u) % classes);
  }
  std::vector<engine::ExternalInput> in = {{in_info.name, feed.images.data()}};
  if (training) in.push_back({"labels", feed.labels.data()});
  const engine::ExternalOutput out[] = {{out_info.name, feed.probabilities.data()}};
  return runtime.setup(in, out);
}

// Warm-up, then the timed steps with tf_cnn_benchmarks' running report (rank 0 prints). A failed
// step ends the job.
Timing run_steps(engine::Runtime& runtime, const BenchCommand& bench, const BenchSettings& settings,
                 Ranks& ranks) {
  using Clock = std::chrono::steady_clock;
  const bool forward_only = bench.workload.forward_only;
  const bool printing = ranks.rank() == 0 && !bench.json;
  const bool progress = printing && isatty(STDERR_FILENO) != 0;
  auto run_step = [&](const char* phase, unsigned index) {
    engine::Status s = runtime.run();
    if (!s.ok()) {
      if (progress) fmt::print(stderr, "\r\033[K");
      ranks.abort(fmt::format("{} step {} failed: {}", phase, index + 1, s.to_string()),
                  exit_failure);
    }
  };
  if (printing) fmt::print("Running warm up\n");
  std::fflush(stdout);
  // Never time the runs that try candidate kernels (the slower ones run there).
  const unsigned warmup = std::max(settings.warmup, runtime.report().trial_runs);
  for (unsigned i = 0; i < warmup; ++i) {
    if (progress) fmt::print(stderr, "\rwarm-up {}/{}", i + 1, warmup);
    run_step("warm-up", i);
  }
  runtime.take_trace();  // keep only the timed steps
  if (progress) fmt::print(stderr, "\r\033[K");
  if (printing) fmt::print("Done warm up\nStep\tImg/sec{}\n", forward_only ? "" : "\ttotal_loss");
  std::fflush(stdout);
  const double batch = settings.batch;
  Timing timing;
  std::vector<double>& times = timing.step_seconds;
  const auto start = Clock::now();
  for (unsigned i = 0; i < settings.steps; ++i) {
    const auto t0 = Clock::now();
    run_step("timed", i);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    const engine::ExchangeStats exchange = runtime.exchange_stats();
    timing.reduce_seconds += exchange.reduce_seconds;
    timing.exposed_seconds += exchange.exposed_seconds;
    if (!forward_only) {
      timing.losses.push_back(ranks.sum(runtime.loss()) / ranks.size());
    }
    if (progress) {
      fmt::print(stderr, "\rstep {}/{}: {:.1f} images/sec", i + 1, settings.steps,
                 batch / times.back());
    }
    if (printing && (i == 0 || (i + 1) % 10 == 0)) {
      if (progress) fmt::print(stderr, "\r\033[K");
      if (forward_only) {
        fmt::print("{}\t{}\n", i + 1, perf_string(perf_stats(batch, times)));
      } else {
        fmt::print("{}\t{}\t{:.3f}\n", i + 1, perf_string(perf_stats(batch, times)),
                   timing.losses.back());
      }
      std::fflush(stdout);
    }
  }
  timing.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (progress) fmt::print(stderr, "\r\033[K");
  timing.all_step_seconds = times;
  timing.stream_images_per_sec = {batch * settings.steps / timing.seconds};
  return timing;
}

// One throughput stream: its own runtime (network, activations, lane) and its own requests.
struct Stream {
  std::unique_ptr<engine::Runtime> runtime;
  Feed feed;
  std::vector<double> step_seconds;
  double seconds = 0;
  std::string cpus_allowed;  // of its driving thread, as the kernel has it
  std::string error;         // a failed step
};

// A stream's creating and driving thread runs on the stream's cores, and allocates on their NUMA
// node: the network's weights and activations are first touched there, and the lane threads the
// runtime starts inherit both. A memory policy the process already has (numactl, srun
// --mem-bind) is kept.
void place_stream_thread(const std::vector<unsigned>& cpus) {
  // A failure here shows again, with its reason, when the runtime pins its lane.
  (void)set_thread_affinity(pthread_self(), cpus);
  if (cpus.empty() || numa_available() < 0 || numa_max_node() < 1) return;
  if (inherited_memory_policy()) return;
  const int node = numa_node_of_cpu(static_cast<int>(cpus.front()));
  if (node >= 0) numa_set_preferred(node);
}

// --num_streams S > 1: the S streams run their warm-up together, then their timed requests
// together; the throughput is every stream's requests over the wall time until the last one
// ends. Stream 0 prints the running report (its steps at S times its rate).
Timing run_streams(std::vector<Stream>& streams, const ThreadSettings& threads,
                   const BenchCommand& bench, const BenchSettings& settings, Ranks& ranks) {
  using Clock = std::chrono::steady_clock;
  const bool printing = ranks.rank() == 0 && !bench.json;
  const double batch = settings.batch;
  const double rate_factor = static_cast<double>(streams.size());
  if (printing) fmt::print("Running warm up\n");
  std::fflush(stdout);
  std::latch warm(static_cast<std::ptrdiff_t>(streams.size()) + 1);
  std::latch go(1);
  std::vector<std::thread> drivers;
  for (std::size_t k = 0; k < streams.size(); ++k) {
    drivers.emplace_back([&, k] {
      Stream& stream = streams[k];
      place_stream_thread(threads.lane_cpus.at(k));
      stream.cpus_allowed = kernel_cpus_allowed("/proc/thread-self/status");
      const unsigned warmup = std::max(settings.warmup, stream.runtime->report().trial_runs);
      for (unsigned i = 0; i < warmup && stream.error.empty(); ++i) {
        const engine::Status s = stream.runtime->run();
        if (!s.ok()) stream.error = fmt::format("warm-up step {} failed: {}", i + 1, s.to_string());
      }
      warm.count_down();
      go.wait();
      const auto start = Clock::now();
      for (unsigned i = 0; i < settings.steps && stream.error.empty(); ++i) {
        const auto t0 = Clock::now();
        const engine::Status s = stream.runtime->run();
        if (!s.ok()) {
          stream.error = fmt::format("timed step {} failed: {}", i + 1, s.to_string());
          break;
        }
        stream.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (k == 0 && printing && (i == 0 || (i + 1) % 10 == 0)) {
          fmt::print("{}\t{}\n", i + 1,
                     perf_string(perf_stats(rate_factor * batch, stream.step_seconds)));
          std::fflush(stdout);
        }
      }
      stream.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    });
  }
  warm.arrive_and_wait();
  if (printing) fmt::print("Done warm up\nStep\tImg/sec\n");
  std::fflush(stdout);
  const auto start = Clock::now();
  go.count_down();
  for (std::thread& t : drivers) t.join();
  Timing timing;
  timing.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (std::size_t k = 0; k < streams.size(); ++k) {
    if (!streams[k].error.empty()) {
      ranks.abort(fmt::format("stream {}: {}", k, streams[k].error), exit_failure);
    }
    timing.all_step_seconds.insert(timing.all_step_seconds.end(), streams[k].step_seconds.begin(),
                                   streams[k].step_seconds.end());
    timing.stream_images_per_sec.push_back(batch * settings.steps / streams[k].seconds);
    timing.stream_cpus_allowed.push_back(streams[k].cpus_allowed);
  }
  timing.step_seconds = streams.at(0).step_seconds;
  return timing;
}

// FNV-1a over the trained tensors' bytes (identity of the initial weights), and their sum of
// magnitudes (replicas that trained in step agree on it to rounding). Batch norm's running
// statistics are left out: each rank keeps its own, from its own batches.
struct WeightDigest {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  double magnitude = 0;
};

WeightDigest weight_digest(const engine::Runtime& runtime) {
  WeightDigest digest;
  std::vector<float> values;
  for (const std::string& name : runtime.trained_names()) {
    if (!runtime.parameter(name, &values).ok()) continue;
    for (float v : values) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      for (int b = 0; b < 4; ++b) {
        digest.hash ^= (bits >> (8 * b)) & 0xffu;
        digest.hash *= 0x100000001b3ull;
      }
      digest.magnitude += std::abs(static_cast<double>(v));
    }
  }
  return digest;
}

// Every rank must run the same job. Each rank's settings as "key=value" lines; compile failures
// are reported by the rank that had them. Ends the job when they disagree; every rank sees the same
// gathered settings and so reaches the same verdict, and they all end together.
void check_ranks_agree(Ranks& ranks, const std::vector<std::string>& lines,
                       const std::string& compile_error) {
  std::string mine = compile_error.empty() ? "compiled=yes\n" : "compiled=no\n";
  for (const std::string& line : lines) mine += line + "\n";
  const std::vector<std::string> all = ranks.allgather(mine);
  auto split = [](const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t end = text.find('\n', pos);
      out.push_back(text.substr(pos, end - pos));
      pos = end + 1;
    }
    return out;
  };
  const std::vector<std::string> first = split(all[0]);
  std::vector<std::string> differences;
  bool failed_somewhere = first.at(0) != "compiled=yes";
  for (std::size_t r = 1; r < all.size(); ++r) {
    const std::vector<std::string> other = split(all[r]);
    if (other.at(0) != "compiled=yes") {
      failed_somewhere = true;
      continue;
    }
    for (std::size_t k = 0; k < std::min(first.size(), other.size()); ++k) {
      if (first[k] != other[k]) {
        differences.push_back(fmt::format("rank {} has {} where rank 0 has {}", r, other[k],
                                          first[k].substr(first[k].find('=') + 1)));
      }
    }
  }
  if (failed_somewhere)
    ranks.end_together(compile_error, exit_failure);  // the failed ranks say why
  if (differences.empty()) return;
  if (ranks.rank() != 0) ranks.end_together("", exit_usage);  // rank 0 says why
  ranks.end_together(fmt::format("the ranks of this job disagree, and every rank must run the same "
                                 "model, batch size, thread layout and weights: {}",
                                 fmt::join(differences, "; ")),
                     exit_usage);
}

}  // namespace

int BenchCommand::operator()() const {
  // Before the engine starts: the main thread then becomes a lane's OpenMP master, pinned to one
  // core.
  const std::string cpus_allowed = kernel_cpus_allowed();
  const BenchSettings settings = check_flags(*this);
  // An unwritable trace file is refused now, not after the run (without opening it: an existing
  // file is not truncated, a FIFO's reader does not see an early close).
  if (const std::string why = trace_file.empty() ? "" : output_unwritable(trace_file);
      !why.empty()) {
    usage_error(
        fmt::format("--trace_file={}: cannot write to it ({}); valid: a file tfpin can write",
                    shown_value(trace_file), why));
  }
  const bool forward_only = workload.forward_only;
  const std::unique_ptr<Ranks> ranks =
      settings.over_mpi() ? join_mpi_job(settings.stall_seconds) : single_process();
  const bool printing = ranks->rank() == 0;

  const engine::Graph graph =
      workload_graph(settings.model, settings.batch, settings.layout, !forward_only);
  const engine::CompileOptions options = compile_options(*this, settings, *ranks);
  std::vector<Stream> streams(settings.streams);
  engine::Status status;
  if (settings.streams == 1) {
    status = engine::Runtime::create(graph, options, &streams[0].runtime);
  } else {
    // One after another: compiling times kernels, which a neighbour's compile would disturb.
    for (std::size_t k = 0; k < streams.size() && status.ok(); ++k) {
      engine::CompileOptions one_lane = options;
      one_lane.lanes = 1;
      one_lane.lane_cpus = {settings.threads.lane_cpus.at(k)};
      std::thread([&, k] {
        place_stream_thread(one_lane.lane_cpus[0]);
        status = engine::Runtime::create(graph, one_lane, &streams[k].runtime);
        if (status.ok()) {
          status = bind_feed(*streams[k].runtime, false, settings.batch, 0, streams[k].feed);
        }
      }).join();
    }
  }
  std::unique_ptr<engine::Runtime>& runtime = streams[0].runtime;
  std::string compile_error;
  if (!status.ok()) {
    // A batch whose memory cannot be planned is the user's value to change, like a bad flag.
    const bool too_large = status.code() == engine::StatusCode::out_of_memory;
    const std::string refusal =
        too_large ? fmt::format(
                        "--batch_size={} is too large for {} on this machine (valid: a "
                        "smaller batch): ",
                        settings.batch, workload.model)
                  : std::string();
    compile_error = fmt::format("{}cannot compile {} for batch {}: {}", refusal, workload.model,
                                settings.batch, status.to_string());
    if (!settings.over_mpi()) {
      fmt::print(stderr, "tfpin bench: {}\n", compile_error);
      return too_large ? exit_usage : exit_failure;
    }
  }
  // A prefix no candidate has (a typo) would silently time every step as usual.
  const bool force_unmatched =
      runtime && !force_kernel.empty() && runtime->report().forced_choices == 0;
  const std::string force_refusal =
      force_unmatched
          ? fmt::format(
                "--force_kernel={}: no step of {} at batch {} offers a kernel whose name starts "
                "with it (valid: the start of a name in --json's compile.kernel_choices, e.g. "
                "tfpin_1x1, jit_1x1:avx512_core, tfpin_wino_4x3, or of a step's kernel in -v's "
                "list)",
                shown_value(force_kernel), workload.model, settings.batch)
          : std::string();
  if (force_unmatched && !settings.over_mpi()) {
    fmt::print(stderr, "tfpin bench: {}\n", force_refusal);
    return exit_usage;
  }
  RankPlace place{ranks->node(), cpus_allowed, lanes_text(settings.threads.lane_cpus)};
  std::vector<RankPlace> places = {place};
  if (settings.over_mpi()) {
    const engine::CompileReport empty;
    const engine::CompileReport& report = runtime ? runtime->report() : empty;
    const WeightDigest initial = runtime ? weight_digest(*runtime) : WeightDigest{};
    std::vector<std::string> agreed = {
        fmt::format("model={}", workload.model),
        fmt::format("batch_size={}", settings.batch),
        fmt::format("data_format={}", engine::to_string(settings.layout)),
        fmt::format("forward_only={}", forward_only),
        fmt::format("num_batches={}", settings.steps),
        fmt::format("num_warmup_batches={}", settings.warmup),
        fmt::format("num_intra_threads={}", settings.threads.intra),
        fmt::format("num_inter_threads={}", settings.threads.lanes),
        fmt::format("num_streams={}", settings.streams),
        fmt::format("variable_update={}", variable_update),
        fmt::format("fusion_threshold_mb={}", settings.fusion_threshold_bytes >> 20),
        fmt::format("force_kernel={}", force_kernel),
        fmt::format("forced_choices={}", report.forced_choices)};
    for (std::size_t i = 0; i < engine_switches.size(); ++i) {
      agreed.push_back(fmt::format("{}={}", engine_switches[i].flag + 2, switched_off[i]));
    }
    agreed.push_back(fmt::format("oneDNN={}", engine::onednn_runtime_version().text()));
    agreed.push_back(fmt::format("gradient_buckets={}", report.gradient_buckets));
    agreed.push_back(fmt::format("gradient_bytes={}", report.gradient_bytes));
    agreed.push_back(fmt::format("initial_weights={:016x}", initial.hash));
    check_ranks_agree(*ranks, agreed, compile_error);
    // Every rank compiled the same model with the same options: all end here together, or none.
    if (force_unmatched) ranks->end_together(ranks->rank() == 0 ? force_refusal : "", exit_usage);
    const std::vector<std::string> nodes = ranks->allgather(place.node);
    const std::vector<std::string> cpus = ranks->allgather(place.cpus_allowed);
    const std::vector<std::string> lanes = ranks->allgather(place.lanes);
    places.clear();
    for (std::size_t r = 0; r < nodes.size(); ++r) places.push_back({nodes[r], cpus[r], lanes[r]});
  }
  if (printing && !json) print_header(*this, settings, ranks->size(), places);
  if (verbose && printing) fmt::print(stderr, "{}", runtime->describe());
  if (settings.streams == 1) {
    status = bind_feed(*runtime, !forward_only, settings.batch,
                       static_cast<std::uint64_t>(ranks->rank()) * settings.batch, streams[0].feed);
    if (!status.ok()) {
      ranks->abort(fmt::format("setup failed: {}", status.to_string()), exit_failure);
    }
  }

  const Timing timing = settings.streams == 1
                            ? run_steps(*runtime, *this, settings, *ranks)
                            : run_streams(streams, settings.threads, *this, settings, *ranks);
  if (!trace_file.empty() && printing) {
    try {
      write_output_file(trace_file, engine::chrome_trace_json(runtime->take_trace()));
    } catch (const Error& e) {
      fmt::print(stderr, "tfpin bench: --trace_file: {}\n", shown_value(e.what(), 400));
      return exit_failure;
    }
  }

  const engine::CompileReport& report = runtime->report();
  const double batch = settings.batch;
  // Images per step of all the streams together.
  const double step_images = batch * settings.streams;
  Outcome outcome;
  const std::vector<double>& times = timing.step_seconds;
  outcome.rank_images_per_sec = ranks->allgather(step_images * settings.steps / timing.seconds);
  for (double x : outcome.rank_images_per_sec) outcome.images_per_sec += x;
  outcome.stats = perf_stats(step_images, times);
  outcome.best_step_images_per_sec = step_images / *std::min_element(times.begin(), times.end());
  // Training counts 3x the forward FLOPs (forward, backward data, backward weights), as is usual.
  outcome.flops_per_image = report.flops / batch * (forward_only ? 1.0 : 3.0);
  outcome.loss = forward_only ? runtime->loss() : static_cast<float>(timing.losses.back());
  outcome.reduce_seconds_per_step = timing.reduce_seconds / settings.steps;
  outcome.exposed_seconds_per_step = timing.exposed_seconds / settings.steps;
  bool finite = std::all_of(streams.begin(), streams.end(), [](const Stream& stream) {
    return std::all_of(stream.feed.probabilities.begin(), stream.feed.probabilities.end(),
                       [](float p) { return std::isfinite(p); });
  });
  if (!forward_only) finite = finite && std::isfinite(runtime->loss());
  outcome.finite = ranks->sum(finite ? 0.0 : 1.0) == 0.0;
  if (settings.over_mpi() && !forward_only) {
    outcome.weight_checksums = ranks->allgather(weight_digest(*runtime).magnitude);
  }

  if (printing) {
    if (json) {
      fmt::print("{}\n", json_text(json_report(*this, settings, places, report, timing, outcome)));
    } else {
      print_text_report(settings, forward_only, report, timing, outcome);
    }
    std::fflush(stdout);
  }
  if (!outcome.finite) {
    if (!printing) return exit_failure;
    fmt::print(stderr, "tfpin bench: the outputs {}are not finite{}\n",
               forward_only ? "" : "or the loss ",
               !forward_only && !settings.model.zoo
                   ? " (an ONNX model exported for inference has its batch norms folded into the "
                     "convolutions, and untrained weights without them can diverge in training; "
                     "--forward_only measures inference)"
                   : "");
    return exit_failure;
  }
  if (settings.update == VariableUpdate::horovod && !forward_only) {
    // The replicas applied the same averaged gradients: their weights must agree.
    const double reference = outcome.weight_checksums.at(0);
    for (std::size_t r = 1; r < outcome.weight_checksums.size(); ++r) {
      const double other = outcome.weight_checksums[r];
      if (std::abs(other - reference) > 1e-6 * std::abs(reference)) {
        if (!printing) return exit_failure;
        fmt::print(stderr,
                   "tfpin bench: the ranks' weights differ after training (rank {}: sum |w| = "
                   "{}, rank 0: {}): the gradient allreduce did not keep them in step\n",
                   r, other, reference);
        return exit_failure;
      }
    }
  }
  return 0;
}

}  // namespace tfpin::cli
