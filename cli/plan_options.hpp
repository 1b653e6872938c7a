// Options that `tfpin show` and `tfpin run` share, and turning them into a plan.
#pragma once

#include <optional>
#include <string>

#include "cli_fwd.hpp"
#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin::cli {

struct PlanOptions {
  // Kept as text: parse_count gives the project's own messages, and "given but empty" is an error.
  std::string threads;
  std::string interop;
  std::string cpuset;
  std::string blocktime;
  bool hyperthreads = false;
  bool no_cpu_files = false;  // the shim leaves /sys/devices/system/cpu and /proc/cpuinfo alone
  CLI::Option* threads_option = nullptr;
  CLI::Option* interop_option = nullptr;
  CLI::Option* cpuset_option = nullptr;
  CLI::Option* blocktime_option = nullptr;

  void add_to(CLI::App& app);
};

struct ComputedPlan {
  Topology topology;
  Plan plan;
  std::vector<EnvVar> environment;
};

// --cpuset=`cpuset` checked against `allowed` (this process's affinity; nullopt for another
// machine's description, where any CPU goes). Throws Error(invalid_request) when it would widen it.
std::vector<unsigned> narrow_allowed(const std::string& cpuset,
                                     const std::optional<std::vector<unsigned>>& allowed);

// --topology=`spec`: this host when empty or "host", else another machine's hwloc XML file or
// synthetic description. Throws Error(invalid_request) naming the value when that does not load.
Topology topology_option(const std::string& spec);

// `allowed` is the process's affinity on this host, nullopt for another machine's description
// (every online CPU). --cpuset narrows it; on this host it may not widen it.
ComputedPlan compute(const PlanOptions& options, Topology topology,
                     std::optional<std::vector<unsigned>> allowed);

}  // namespace tfpin::cli
