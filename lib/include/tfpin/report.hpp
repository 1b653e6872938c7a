// Human and JSON renderings of a plan, shared by `tfpin show`, `tfpin run --verbose` and the
// plugin's verbose mode.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin {

nlohmann::json plan_to_json(const Topology& topology, const Plan& plan,
                            const std::vector<EnvVar>& environment);

std::string describe_topology(const Topology& topology);
std::string describe_plan(const Topology& topology, const Plan& plan,
                          const std::vector<EnvVar>& environment);

}  // namespace tfpin
