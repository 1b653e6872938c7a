#include "tfpin/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tfpin/cpulist.hpp"

namespace tfpin {

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json plan_to_json(const Topology& topology, const Plan& plan,
                            const std::vector<EnvVar>& environment) {
  nlohmann::json lanes = nlohmann::json::array();
  for (const Lane& lane : plan.lanes) {
    lanes.push_back({{"cpus", lane.cpus}, {"numa", lane.numa}, {"numa_nodes", lane.numa_nodes}});
  }
  nlohmann::json env = nlohmann::json::object();
  for (const EnvVar& var : environment) {
    if (var.only_against.empty()) env[var.name] = var.value;  // the others: --enforce only
  }
  std::vector<unsigned> numa;
  for (const NumaNode& node : topology.numa_nodes()) numa.push_back(node.os_index);
  return {
      {"threads", plan.threads},
      {"interop", plan.interop},
      {"intra", plan.intra},
      {"hyperthreads", to_string(plan.hyperthreads)},
      {"allowed", format_cpulist(plan.allowed)},
      {"lanes", lanes},
      {"memory", {{"policy", to_string(plan.memory.kind)}, {"nodes", plan.memory.nodes}}},
      {"env", env},
      {"warnings", plan.warnings},
      {"topology",
       {{"source", topology.source()},
        {"packages", topology.package_count()},
        {"numa_nodes", numa},
        {"cores", topology.cores().size()},
        {"pus", topology.pu_count()}}},
  };
}

std::string describe_topology(const Topology& topology) {
  return fmt::format("{}: {} package(s), {} NUMA node(s), {} cores, {} hardware threads",
                     topology.source(), topology.package_count(), topology.numa_nodes().size(),
                     topology.cores().size(), topology.pu_count());
}

std::string describe_plan(const Topology& topology, const Plan& plan,
                          const std::vector<EnvVar>& environment,
                          const std::optional<std::string>& kept_memory_policy) {
  std::string out;
  out += fmt::format("topology  {}\n", describe_topology(topology));
  out += fmt::format("allowed   {}\n", format_cpulist(plan.allowed));
  out += fmt::format(
      "plan      {} threads = {} inter-op lane(s) x {} intra-op thread(s), {}\n", plan.threads,
      plan.interop, plan.intra,
      plan.hyperthreads == HyperthreadPolicy::all ? "hyperthreads used" : "one thread per core");
  for (std::size_t i = 0; i < plan.lanes.size(); ++i) {
    const Lane& lane = plan.lanes[i];
    out += fmt::format("lane {:<4} cpus {}  NUMA {}{}\n", i, format_cpulist(lane.cpus), lane.numa,
                       lane.numa_nodes.size() > 1
                           ? fmt::format(" (straddles nodes {})", fmt::join(lane.numa_nodes, ","))
                           : "");
  }
  const std::string planned = fmt::format(
      "{} on node(s) {}",
      plan.memory.kind == MemoryPolicyKind::preferred ? "preferred" : "first touch (local)",
      fmt::join(plan.memory.nodes, ","));
  if (kept_memory_policy) {
    out += fmt::format(
        "memory    {}, kept: set before tfpin (numactl, srun --mem-bind); the plan's "
        "would be {}\n",
        *kept_memory_policy, planned);
  } else {
    out += fmt::format("memory    {}\n", planned);
  }
  for (const std::string& warning : plan.warnings) out += fmt::format("warning   {}\n", warning);
  out += "environment\n";
  std::size_t width = 0;
  for (const EnvVar& var : environment)
    width = std::max(width, var.name.size() + var.value.size() + 1);
  for (const EnvVar& var : environment) {
    if (!var.only_against.empty()) continue;  // set only to replace a user's value (--enforce)
    out += fmt::format("  {:<{}}  # {}\n", var.name + "=" + var.value, width, var.reason);
  }
  return out;
}

}  // namespace tfpin
