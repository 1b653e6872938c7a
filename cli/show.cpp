#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "tfpin/report.hpp"

namespace tfpin::cli {

int ShowCommand::operator()() const {
  const bool dry_run = !topology.empty() && topology != "host";
  // On another machine's description this process's affinity means nothing: default to all its
  // CPUs.
  std::optional<std::vector<unsigned>> allowed;
  if (!dry_run) allowed = current_affinity();
  const ComputedPlan computed = compute(plan, topology_option(topology), std::move(allowed));
  if (json) {
    std::cout << json_text(plan_to_json(computed.topology, computed.plan, computed.environment), 2)
              << '\n';
  } else {
    std::cout << describe_plan(computed.topology, computed.plan, computed.environment);
  }
  return 0;
}

}  // namespace tfpin::cli
