// `tfpin tune`: sweep threads x inter-op x batch size on this allocation, each configuration in its
// own pinned child process (`tfpin run ... -- tfpin bench ... --json`), then report the table, a
// plot and the #SBATCH lines of the fastest configuration.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cli_fwd.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin::cli {

struct TuneSweep;

struct TuneCommand {
  // Kept as text: tfpin's own parsers give the messages (option, value, what is valid). The
  // initial values are the defaults `--help` shows.
  WorkloadOptions workload;
  std::string batch_sizes = "1,16,32";
  std::string threads;  // list; default: every allowed core
  std::string interop;  // list; default: every divisor of each thread count
  std::string num_batches = "20";
  std::string num_warmup_batches = "10";  // tfpin bench adds runs to cover the kernel trials
  std::string cpuset;
  std::string topology;
  std::string plot;
  std::string timeout = "0";
  bool json = false;
  bool dry_run = false;
  bool streams = false;  // --streams: also every multi-lane configuration as throughput streams
  CLI::Option* cpuset_option = nullptr;
  // --threads and --interop given, even empty ("--threads ''" is refused, not the default).
  CLI::Option* threads_option = nullptr;
  CLI::Option* interop_option = nullptr;
  int operator()() const;

 private:
  [[nodiscard]] bool machine_is_other() const;  // --topology names another machine than this
  // The checked options and the configurations to run on `machine`. Throws tfpin::Error.
  [[nodiscard]] TuneSweep plan_sweep(const Topology& machine) const;
};

// Registers the `tune` subcommand; dispatch with `if (*app) return tune();`.
CLI::App* add_tune_command(CLI::App& app, TuneCommand& tune);

// One point of the sweep: a thread layout and the plan placement computed for it.
struct TuneConfig {
  Plan plan;             // threads, interop, intra, lanes
  unsigned streams = 1;  // > 1: bench --num_streams (one independent request per lane)
};

// One child run: a configuration at one batch size.
struct TuneResult {
  std::size_t config = 0;  // index into the configurations
  unsigned batch = 0;
  bool ok = false;
  double images_per_sec = 0;
  nlohmann::json child;  // the child's `tfpin bench --json` object, when it printed one
  std::string error;     // why it failed: the child's message, its signal, a pinning mismatch
  double seconds = 0;    // wall time of the child
};

struct TuneSweep {
  WorkloadOptions workload;
  unsigned num_batches = 0;
  unsigned num_warmup_batches = 0;
  std::vector<unsigned> allowed;  // the usable allowed CPUs of this allocation
  unsigned cores = 0;             // slots in `allowed` (one per core)
  bool smt = false;               // the allowed cores have more than one hardware thread
  std::vector<unsigned> batches;
  std::vector<TuneConfig> configs;
  std::vector<TuneResult> results;  // batch after batch, configuration after configuration
};

// Renderings (tune_report.cpp). Lanes as "0-3 | 4-7".
std::vector<std::vector<unsigned>> lane_cpus(const Plan& plan);
std::string lanes_text(const Plan& plan);
// `best` is the index of the fastest result, or -1 when none ran.
std::ptrdiff_t best_result(const TuneSweep& sweep);
// The fastest run of a streams configuration (--streams), or -1.
std::ptrdiff_t best_streams_result(const TuneSweep& sweep);
std::string tune_table(const TuneSweep& sweep);
std::string tune_bars(const TuneSweep& sweep, unsigned width = 40);
std::string tune_recommendation(const TuneSweep& sweep);
// The job-script lines that give a job this plan (--hint=nomultithread on SMT machines).
std::vector<std::string> sbatch_lines(const Plan& plan, bool smt);
nlohmann::json tune_json(const TuneSweep& sweep);
std::string tune_svg(const TuneSweep& sweep);

}  // namespace tfpin::cli
