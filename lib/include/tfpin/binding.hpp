// Applying a plan to the calling process before it execs the workload: CPU binding and NUMA memory
// policy, both inherited across fork and exec. Used by `tfpin run` and by the plugin in the task.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"

namespace tfpin {

// Restricts the calling (single-threaded, about to exec) process to `cpus`. Throws Error(system).
void bind_current_process(std::span<const unsigned> cpus);

// Sets the memory policy of the calling process with libnuma. A machine without NUMA support is
// left alone. Throws Error(system).
void apply_memory_policy(const MemoryPolicy& policy);

struct ApplyOptions {
  bool enforce = false;  // thread variables the user set lose (tfpin run --enforce, site override_env)
  std::optional<std::string> shim;  // put first in LD_PRELOAD; nullopt = do not preload; "" = none found
  bool tolerate_binding_failure = false;  // run unbound with a warning (site on_error=warn)
};

// Everything a task gets from its plan before exec: binds the calling process to the plan's cpus,
// sets its memory policy, exports `environment` through `env` and preloads the shim. Returns
// warnings (a tolerated binding failure, a missing shim), one line each; throws tfpin::Error.
std::vector<std::string> apply_plan(const Plan& plan, const std::vector<EnvVar>& environment,
                                    const EnvAccess& env, const ApplyOptions& options);

}  // namespace tfpin
