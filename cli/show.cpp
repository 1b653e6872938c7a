#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tfpin/report.hpp"

namespace tfpin::cli {

namespace {

// What `tfpin run` would leave a program here: the user's own values kept, a variable that would
// contradict the user's settings (or is only set to replace one, with --enforce) left out.
std::vector<EnvVar> as_run_would_export(const std::vector<EnvVar>& planned) {
  std::map<std::string, std::string> env;
  const EnvAccess copy{
      [&env](const std::string& name) -> std::optional<std::string> {
        if (const auto it = env.find(name); it != env.end()) return it->second;
        return process_getenv(name);
      },
      [&env](const std::string& name, const std::string& value) { env[name] = value; },
      [&env](const std::string& name) { env.erase(name); }};
  std::vector<EnvVar> shown;
  for (const EnvOutcome& outcome : export_environment(planned, false, copy)) {
    const auto var = std::find_if(planned.begin(), planned.end(),
                                  [&](const EnvVar& v) { return v.name == outcome.name; });
    if (outcome.kept_user) {
      shown.push_back({outcome.name,
                       outcome.value,
                       "your own value, kept (tfpin run --enforce replaces it)",
                       false,
                       {}});
    } else if (outcome.withheld_for.empty() && outcome.value == var->value &&
               copy.get(outcome.name) == outcome.value) {
      shown.push_back(*var);
    }
  }
  return shown;
}

}  // namespace

int ShowCommand::operator()() const {
  const bool dry_run = !topology.empty() && topology != "host";
  // On another machine's description this process's affinity means nothing: default to all its
  // CPUs.
  std::optional<std::vector<unsigned>> allowed;
  if (!dry_run) allowed = current_affinity();
  ComputedPlan computed = compute(plan, topology_option(topology), std::move(allowed));
  if (!dry_run) computed.environment = as_run_would_export(computed.environment);
  if (json) {
    std::cout << json_text(plan_to_json(computed.topology, computed.plan, computed.environment), 2)
              << '\n';
  } else {
    std::cout << describe_plan(computed.topology, computed.plan, computed.environment);
  }
  return 0;
}

}  // namespace tfpin::cli
