// Human and JSON renderings of a plan, shared by `tfpin show`, `tfpin run --verbose` and the
// plugin's verbose mode.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin {

nlohmann::json plan_to_json(const Topology& topology, const Plan& plan,
                            const std::vector<EnvVar>& environment);

// JSON text that never throws on a user's bytes (a file name that is not UTF-8): invalid bytes
// become U+FFFD.
std::string json_text(const nlohmann::json& value, int indent = -1);

std::string describe_topology(const Topology& topology);
// `kept_memory_policy`: the process's own policy, kept instead of the plan's (apply_plan).
std::string describe_plan(const Topology& topology, const Plan& plan,
                          const std::vector<EnvVar>& environment,
                          const std::optional<std::string>& kept_memory_policy = std::nullopt);

}  // namespace tfpin
