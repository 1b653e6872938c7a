#include "plan_options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace tfpin::cli {

void PlanOptions::add_to(CLI::App& app) {
  // TFPIN_THREADS / TFPIN_INTEROP are read in compute(): TFPIN_INTEROP is also the plan hand-over,
  // which must not count as a request.
  threads_option = app.add_option("--threads", threads,
                                  "compute threads in total, inter-op x intra-op (default: "
                                  "$TFPIN_THREADS, else one per allowed core)")
                       ->type_name("N");
  interop_option = app.add_option("--interop", interop,
                                  "inter-op lanes; each gets threads/interop cores (default: "
                                  "$TFPIN_INTEROP, else 1)")
                       ->type_name("M");
  cpuset_option = app.add_option("--cpuset", cpuset,
                                 "allowed CPUs as a cpulist, e.g. 0-3,8-11 (default: this "
                                 "process's affinity)")
                      ->type_name("LIST");
  blocktime_option = app.add_option("--blocktime", blocktime,
                                    "OpenMP spin time after a parallel region, ms (default 1)")
                         ->type_name("MS");
  app.add_flag("--hyperthreads", hyperthreads,
               "count every hardware thread as a slot (default: one thread per core)");
  app.add_flag("--no-cpu-files", no_cpu_files,
               "the shim shows the real /sys/devices/system/cpu, /proc/cpuinfo and /proc/stat "
               "(default: only the plan's CPUs, for programs that count CPUs there)");
}

namespace {

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

}  // namespace

std::vector<unsigned> narrow_allowed(const std::string& cpuset,
                                     const std::optional<std::vector<unsigned>>& allowed) {
  std::vector<unsigned> cpus = parse_cpulist(cpuset, "--cpuset");
  if (allowed) {
    // Binding can narrow what this process may use, never widen it.
    std::vector<unsigned> outside;
    for (unsigned cpu : cpus) {
      if (std::find(allowed->begin(), allowed->end(), cpu) == allowed->end())
        outside.push_back(cpu);
    }
    if (!outside.empty()) {
      throw Error(
          ErrorKind::invalid_request,
          fmt::format("--cpuset={}: CPUs {} are outside this process's CPUs (valid: CPUs "
                      "within {})",
                      shown_value(cpuset), format_cpulist(outside), format_cpulist(*allowed)));
    }
  }
  return cpus;
}

ComputedPlan compute(const PlanOptions& options, Topology topology,
                     std::optional<std::vector<unsigned>> allowed) {
  auto from_option = [](const CLI::Option* option, const char* name,
                        const std::string& text) -> std::optional<unsigned> {
    if (!given(option)) return std::nullopt;
    return parse_count(name, text);
  };
  PlacementRequest request;
  const std::optional<unsigned> threads_flag =
      from_option(options.threads_option, "--threads", options.threads);
  const std::optional<unsigned> interop_flag =
      from_option(options.interop_option, "--interop", options.interop);
  request.threads = requested_count(threads_flag, process_getenv, env_threads);
  const std::optional<unsigned> interop =
      requested_count(interop_flag, process_getenv, env_interop);
  request.interop = interop.value_or(1);
  // Messages name what the user set: the option, or the variable it came from.
  if (!threads_flag && request.threads) request.names.threads = env_threads;
  if (!interop_flag && interop) request.names.interop = env_interop;
  request.hyperthreads =
      options.hyperthreads ? HyperthreadPolicy::all : HyperthreadPolicy::one_per_core;
  if (given(options.cpuset_option)) {
    allowed = narrow_allowed(options.cpuset, std::move(allowed));
    request.allowed_by_user = true;
  }
  request.allowed = std::move(allowed);
  EnvironmentPolicy policy;
  policy.cpu_files = !options.no_cpu_files;
  if (given(options.blocktime_option)) {
    policy.blocktime_ms = parse_non_negative("--blocktime", options.blocktime, 1000);
  }
  Plan plan = compute_plan(topology, request);
  std::vector<EnvVar> environment = environment_for(plan, policy);
  return {std::move(topology), std::move(plan), std::move(environment)};
}

Topology topology_option(const std::string& spec) {
  if (spec.empty() || spec == "host") return Topology::host();
  try {
    return Topology::load(spec);
  } catch (const Error& e) {
    // Another machine's description is the user's value: one that does not load is a bad
    // argument, not a fault of this machine.
    if (e.kind() != ErrorKind::topology) throw;
    throw Error(ErrorKind::invalid_request, e.what());
  }
}

}  // namespace tfpin::cli
