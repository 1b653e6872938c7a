// Options that `tfpin show` and `tfpin run` share, and turning them into a plan.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin::cli {

struct PlanOptions {
  std::string threads;   // kept as text: parse_count gives the project's own error messages
  std::string interop;
  std::string cpuset;
  std::string blocktime;
  bool hyperthreads = false;

  void add_to(CLI::App& app);
};

struct ComputedPlan {
  Topology topology;
  Plan plan;
  std::vector<EnvVar> environment;
};

// `allowed_default` is used when --cpuset is not given (nullopt = every online CPU).
ComputedPlan compute(const PlanOptions& options, Topology topology,
                     std::optional<std::vector<unsigned>> allowed_default);

}  // namespace tfpin::cli
