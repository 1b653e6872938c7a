// `tfpin tune`: the sweep itself. Every configuration runs in a child process started through
// `tfpin run` (binding, memory policy, environment, shim: exactly what a job would get), so one
// configuration's OpenMP pool and affinity never leak into the next, and a child that crashes is a
// failed row, not a failed tune.
#include "tune.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench.hpp"
#include "commands.hpp"
#include "output_file.hpp"
#include "plan_options.hpp"
#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"
#include "tfpin/report.hpp"

namespace tfpin::cli {

namespace {

// "1,16,32": whole numbers in 1..max, duplicates dropped, order kept. Messages name the option,
// the item and the whole list.
std::vector<unsigned> parse_list(std::string_view option, const std::string& text, unsigned max) {
  std::vector<unsigned> values;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    unsigned value = 0;
    try {
      value = parse_count(option, item, max);
    } catch (const Error& e) {
      if (item == text) throw;
      usage_error(fmt::format("{} (in {}={}; a comma-separated list is expected)", e.what(), option,
                              shown_value(text)));
    }
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

std::vector<unsigned> divisors(unsigned n) {
  std::vector<unsigned> out;
  for (unsigned d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// This very binary, so the children are the same build as the parent.
std::string self_exe() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::system, "cannot find the tfpin executable: " + ec.message());
  return path.string();
}

std::vector<std::string> child_command(const std::string& exe, const TuneCommand& tune,
                                       const TuneConfig& config, unsigned batch) {
  // No thread flags for bench: like any program in a job, it takes its layout from the environment
  // `tfpin run` exports. --enforce: a thread variable the caller set (OMP_NUM_THREADS=...) must not
  // turn every configuration into the same one.
  std::vector<std::string> argv = {exe,
                                   "run",
                                   "--enforce",
                                   "--threads",
                                   std::to_string(config.plan.threads),
                                   "--interop",
                                   std::to_string(config.plan.interop)};
  if (tune.cpuset_option != nullptr && tune.cpuset_option->count() > 0) {
    argv.insert(argv.end(), {"--cpuset", tune.cpuset});
  }
  argv.insert(argv.end(),
              {"--", exe, "bench", "--model", tune.workload.model, "--batch_size",
               std::to_string(batch), "--num_batches", tune.num_batches, "--num_warmup_batches",
               tune.num_warmup_batches, "--data_format", tune.workload.data_format, "--json"});
  if (tune.workload.forward_only) argv.push_back("--forward_only");
  if (config.streams > 1)
    argv.insert(argv.end(), {"--num_streams", std::to_string(config.streams)});
  return argv;
}

struct ChildOutput {
  int status = 0;  // waitpid status
  bool timed_out = false;
  std::string out;
  std::string err;
};

// fork + exec with stdout and stderr captured; both pipes are drained together so neither fills.
ChildOutput run_child(const std::vector<std::string>& argv, unsigned timeout_seconds) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::system, fmt::format("pipe failed: {}", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(ErrorKind::system, fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execv(args[0], args.data());
    const char* msg = "tfpin tune: cannot execute the child\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, std::strlen(msg));
    ::_exit(exit_cannot_exec);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ChildOutput result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  int open_fds = 2;
  while (open_fds > 0) {
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }
    const int ready = ::poll(fds, 2, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  const std::size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// Turns one child's exit and output into a row. A measurement the child made on other CPUs than
// the plan's is not one of this configuration: it fails too.
TuneResult evaluate(const ChildOutput& output, const TuneConfig& config, unsigned timeout) {
  TuneResult r;
  if (output.timed_out) {
    r.error = fmt::format("timed out after {} s (--timeout)", timeout);
    return r;
  }
  if (WIFSIGNALED(output.status)) {
    const int sig = WTERMSIG(output.status);
    r.error = fmt::format("killed by signal {} ({})", sig, ::strsignal(sig));
    if (const std::string why = last_line(output.err); !why.empty()) r.error += ": " + why;
    return r;
  }
  const int code = WIFEXITED(output.status) ? WEXITSTATUS(output.status) : -1;
  if (code != 0) {
    const std::string why = last_line(output.err);
    r.error = fmt::format("exit {}{}{}", code, why.empty() ? "" : ": ", why);
    return r;
  }
  try {
    r.child = nlohmann::json::parse(last_line(output.out));
    r.images_per_sec = r.child.at("images_per_sec").get<double>();
  } catch (const nlohmann::json::exception& e) {
    r.error = fmt::format("unreadable output ({}): {}", e.what(), last_line(output.out));
    return r;
  }
  const std::vector<std::vector<unsigned>> planned = lane_cpus(config.plan);
  std::vector<unsigned> bound = config.plan.cpus();
  std::sort(bound.begin(), bound.end());
  const auto child_lanes = r.child.value("lanes", std::vector<std::vector<unsigned>>{});
  const std::string child_cpus = r.child.value("cpus_allowed", std::string{});
  std::vector<unsigned> child_bound;
  try {
    child_bound = parse_cpulist(child_cpus, "cpus_allowed");
  } catch (const Error&) {
    // Left empty: reported as a mismatch below.
  }
  std::sort(child_bound.begin(), child_bound.end());
  if (child_lanes != planned || child_bound != bound) {
    r.error =
        fmt::format("not pinned as planned: ran on CPUs {} with lanes {}; the plan is {} ({})",
                    child_cpus, r.child.value("lanes", nlohmann::json::array()).dump(),
                    format_cpulist(bound), lanes_text(config.plan));
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace

CLI::App* add_tune_command(CLI::App& app, TuneCommand& tune) {
  CLI::App* sub = app.add_subcommand(
      "tune",
      "sweep threads x inter-op x batch size on this allocation, each run pinned in its own "
      "process; print the table, a plot and the #SBATCH lines of the fastest");
  // Help shows each option's default from the command's own initial value: written once.
  sub->option_defaults()->always_capture_default();
  add_workload_options(*sub, tune.workload);
  sub->add_option("--batch_sizes", tune.batch_sizes, "batch sizes to try")->type_name("LIST");
  tune.threads_option = sub->add_option("--threads", tune.threads,
                                        "total thread counts to try (default: every allowed core)")
                            ->type_name("LIST");
  tune.interop_option =
      sub->add_option("--interop", tune.interop,
                      "inter-op lane counts to try, each with every thread count it divides "
                      "(default: every divisor of each thread count)")
          ->type_name("LIST");
  sub->add_option("--num_batches", tune.num_batches, "timed steps per run")->type_name("N");
  sub->add_option("--num_warmup_batches", tune.num_warmup_batches, "untimed steps first")
      ->type_name("N");
  tune.cpuset_option = sub->add_option("--cpuset", tune.cpuset,
                                       "tune on these CPUs only, a cpulist (default: this "
                                       "process's affinity)")
                           ->type_name("LIST");
  sub->add_option("--topology", tune.topology,
                  "with --dry-run: list the sweep for another machine (hwloc XML or synthetic "
                  "description)")
      ->type_name("DESC|FILE");
  sub->add_flag("--dry-run", tune.dry_run, "list the configurations and commands; run nothing");
  sub->add_option("--timeout", tune.timeout,
                  "seconds one run may take before it is killed and reported as failed (0: no "
                  "limit)")
      ->type_name("S");
  sub->add_option("--plot", tune.plot, "write an SVG plot of images/sec per configuration")
      ->type_name("FILE");
  sub->add_flag("--json", tune.json, "print one JSON object (results and recommendation)");
  sub->add_flag("--streams", tune.streams,
                "with --forward_only: also run every configuration of several lanes as "
                "throughput streams (bench --num_streams = lanes: one independent request per "
                "lane), and recommend the best for serving apart from the best one-request "
                "layout");
  return sub;
}

namespace {

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

// --threads (default: every allowed core), each at most the cores allowed.
std::vector<unsigned> thread_counts_option(const CLI::Option* option, const std::string& text,
                                           const TuneSweep& sweep) {
  if (!given(option)) return {sweep.cores};
  const std::vector<unsigned> counts = parse_list("--threads", text, max_count);
  for (unsigned t : counts) {
    if (t > sweep.cores) {
      usage_error(fmt::format(
          "--threads={}: {} is more than the {} cores allowed (CPUs {}); "
          "valid: 1..{}",
          shown_value(text), t, sweep.cores, format_cpulist(sweep.allowed), sweep.cores));
    }
  }
  return counts;
}

// --interop (default: empty, every divisor): each must divide at least one thread count.
std::vector<unsigned> lane_counts_option(const CLI::Option* option, const std::string& text,
                                         const std::vector<unsigned>& thread_counts,
                                         const TuneSweep& sweep) {
  if (!given(option)) return {};
  const unsigned cores = sweep.cores;
  const std::vector<unsigned> counts = parse_list("--interop", text, max_count);
  for (unsigned m : counts) {
    if (m > cores) {
      usage_error(
          fmt::format("--interop={}: {} is more than the {} cores allowed (CPUs {}); valid: 1..{}",
                      shown_value(text), m, cores, format_cpulist(sweep.allowed), cores));
    }
    if (std::none_of(thread_counts.begin(), thread_counts.end(),
                     [m](unsigned t) { return t % m == 0; })) {
      check_multiple({"--threads", "--interop"}, thread_counts.back(), m, cores);
    }
  }
  return counts;
}

void print_dry_run(const TuneCommand& tune, const TuneSweep& sweep, const Topology& machine,
                   const std::string& exe) {
  if (tune.json) {
    nlohmann::json j = tune_json(sweep);
    j["dry_run"] = true;
    j["topology"] = machine.source();
    j["commands"] = nlohmann::json::array();
    for (const TuneConfig& c : sweep.configs) {
      j["commands"].push_back(
          fmt::format("{}", fmt::join(child_command(exe, tune, c, sweep.batches.front()), " ")));
    }
    std::cout << json_text(j, 2) << '\n';
    return;
  }
  fmt::print(
      "tfpin tune --dry-run: {} configurations x {} batch sizes ({}) = {} runs of {} on {} "
      "cores (CPUs {}, {})\n",
      sweep.configs.size(), sweep.batches.size(), fmt::join(sweep.batches, ","),
      sweep.configs.size() * sweep.batches.size(), tune.workload.model, sweep.cores,
      format_cpulist(sweep.allowed), machine.source());
  fmt::print("{:>7}  {:>7}  {:>5}  {:>7}  {}\n", "threads", "interop", "intra", "streams", "lanes");
  for (const TuneConfig& c : sweep.configs) {
    fmt::print("{:>7}  {:>7}  {:>5}  {:>7}  {}\n", c.plan.threads, c.plan.interop, c.plan.intra,
               c.streams, lanes_text(c.plan));
  }
  fmt::print(
      "each run, e.g.: {}\n",
      fmt::join(child_command("tfpin", tune, sweep.configs.front(), sweep.batches.front()), " "));
}

// Every configuration at every batch size, one child each; a failed child is a failed row.
void run_sweep(const TuneCommand& tune, TuneSweep& sweep, const std::string& exe,
               unsigned timeout_seconds) {
  const bool progress = isatty(STDERR_FILENO) != 0;
  const std::size_t total = sweep.configs.size() * sweep.batches.size();
  for (unsigned batch : sweep.batches) {
    for (std::size_t i = 0; i < sweep.configs.size(); ++i) {
      const TuneConfig& config = sweep.configs[i];
      if (progress) {
        fmt::print(stderr, "\r\033[K[{}/{}] {} threads, {} inter-op{}, batch {} ...",
                   sweep.results.size() + 1, total, config.plan.threads, config.plan.interop,
                   config.streams > 1 ? fmt::format(", {} streams", config.streams) : "", batch);
      }
      const auto start = std::chrono::steady_clock::now();
      const ChildOutput output =
          run_child(child_command(exe, tune, config, batch), timeout_seconds);
      TuneResult result = evaluate(output, config, timeout_seconds);
      result.config = i;
      result.batch = batch;
      result.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      sweep.results.push_back(std::move(result));
    }
  }
  if (progress) fmt::print(stderr, "\r\033[K");
}

void print_report(const TuneCommand& tune, const TuneSweep& sweep) {
  if (tune.json) {
    std::cout << json_text(tune_json(sweep), 2) << '\n';
    return;
  }
  fmt::print(
      "tfpin tune: {}, {}, {}, {} timed steps after {} warm-up, {} cores "
      "(CPUs {})\n\n",
      tune.workload.model, tune.workload.forward_only ? "forward-only" : "training",
      tune.workload.data_format, sweep.num_batches, sweep.num_warmup_batches, sweep.cores,
      format_cpulist(sweep.allowed));
  std::cout << tune_table(sweep) << '\n' << tune_bars(sweep) << '\n' << tune_recommendation(sweep);
  if (!tune.plot.empty()) fmt::print("plot: {}\n", tune.plot);
}

}  // namespace

TuneSweep TuneCommand::plan_sweep(const Topology& machine) const {
  TuneSweep sweep;
  sweep.workload = workload;
  model_option(workload.model);
  data_format_option(workload.data_format);
  sweep.batches = parse_list("--batch_sizes", batch_sizes, 1u << 30);
  sweep.num_batches = parse_count("--num_batches", num_batches, 1000000);
  sweep.num_warmup_batches =
      parse_non_negative("--num_warmup_batches", num_warmup_batches, 1000000);

  std::optional<std::vector<unsigned>> allowed;
  if (!machine_is_other()) allowed = current_affinity();
  if (cpuset_option != nullptr && cpuset_option->count() > 0) {
    allowed = narrow_allowed(cpuset, allowed);
  }
  // --cpuset is the user's: an allowed set that does not fit the machine is their error.
  const bool cpuset_given = cpuset_option != nullptr && cpuset_option->count() > 0;
  PlacementRequest whole;
  whole.allowed = allowed;
  whole.allowed_by_user = cpuset_given;
  const Plan all = compute_plan(machine, whole);
  sweep.allowed = all.allowed;
  sweep.cores = all.threads;
  for (const Core& core : machine.cores()) {
    const auto in_allowed = [&](unsigned pu) {
      return std::find(sweep.allowed.begin(), sweep.allowed.end(), pu) != sweep.allowed.end();
    };
    if (std::count_if(core.pus.begin(), core.pus.end(), in_allowed) > 1) sweep.smt = true;
  }

  const std::vector<unsigned> thread_counts = thread_counts_option(threads_option, threads, sweep);
  const std::vector<unsigned> lane_counts =
      lane_counts_option(interop_option, interop, thread_counts, sweep);
  for (unsigned t : thread_counts) {
    for (unsigned m : lane_counts.empty() ? divisors(t) : lane_counts) {
      if (t % m != 0) continue;
      PlacementRequest request;
      request.threads = t;
      request.interop = m;
      request.allowed = allowed;
      request.allowed_by_user = cpuset_given;
      sweep.configs.push_back({compute_plan(machine, request)});
    }
  }
  if (streams) {
    if (!workload.forward_only) {
      usage_error(
          "--streams measures independent inference requests and needs --forward_only (valid: "
          "tune --forward_only --streams)");
    }
    const std::size_t layouts = sweep.configs.size();
    for (std::size_t i = 0; i < layouts; ++i) {
      const TuneConfig layout = sweep.configs[i];
      if (layout.plan.interop > 1) sweep.configs.push_back({layout.plan, layout.plan.interop});
    }
  }
  return sweep;
}

bool TuneCommand::machine_is_other() const { return !topology.empty() && topology != "host"; }

int TuneCommand::operator()() const {
  // Everything is checked before the first child starts: a typo should not cost a sweep.
  const unsigned timeout_seconds = parse_non_negative("--timeout", timeout, 1000000);
  if (machine_is_other() && !dry_run) {
    usage_error(fmt::format(
        "--topology={} describes another machine: tune measures this one; add --dry-run to list "
        "the configurations for it",
        shown_value(topology)));
  }
  const Topology machine = topology_option(topology);
  TuneSweep sweep = plan_sweep(machine);
  const std::string exe = self_exe();
  if (dry_run) {
    print_dry_run(*this, sweep, machine, exe);
    return 0;
  }
  // Fail on an unwritable --plot now, not after the sweep.
  if (const std::string why = plot.empty() ? "" : output_unwritable(plot); !why.empty()) {
    usage_error(fmt::format("--plot={}: cannot write to it ({}); valid: a file tfpin can write",
                            shown_value(plot), why));
  }
  run_sweep(*this, sweep, exe, timeout_seconds);
  if (!plot.empty()) {
    try {
      write_output_file(plot, tune_svg(sweep));
    } catch (const Error& e) {
      fmt::print(stderr, "tfpin tune: --plot: {}\n", shown_value(e.what(), 400));
      return exit_failure;
    }
  }
  print_report(*this, sweep);
  if (best_result(sweep) < 0) {
    fmt::print(stderr, "tfpin tune: no configuration could be measured\n");
    return exit_failure;
  }
  return 0;
}

}  // namespace tfpin::cli
