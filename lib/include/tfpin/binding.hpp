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

// The memory policy the calling process already has, as /proc/PID/numa_maps writes it ("bind:0",
// "interleave:0-3", "preferred:1", "local"); nullopt for the default policy or without NUMA
// support.
std::optional<std::string> inherited_memory_policy();

// Sets the plan's memory policy with set_mempolicy, unless the process already has a policy of its
// own: one the user (numactl) or Slurm (srun --mem-bind) chose is kept, since the plan never needs
// to override it (the plan's policy is a preference, not a requirement). Returns the kept policy,
// nullopt when the plan's applies. A machine without NUMA support is left alone. Throws
// Error(system).
std::optional<std::string> apply_memory_policy(const MemoryPolicy& policy);

struct ApplyOptions {
  bool enforce =
      false;  // thread variables the user set lose (tfpin run --enforce, site override_env)
  std::optional<std::string>
      shim;  // put first in LD_PRELOAD; nullopt = do not preload; "" = none found
  // Binding failed: run as if tfpin were off, with a warning (site on_error=warn), instead of
  // failing.
  bool tolerate_binding_failure = false;
  // Containers the task may start: the plan is passed on to them (forward_to_containers).
  ContainerRuntime containers = ContainerRuntime::none;
};

struct AppliedPlan {
  bool bound = true;  // false: binding failed and was tolerated; nothing of the plan was applied
  std::vector<std::string> warnings;  // one line each: a tolerated failure, a missing shim
  std::optional<std::string> kept_memory_policy;  // see apply_memory_policy
};

// Everything a task gets from its plan before exec: binds the calling process to the plan's cpus,
// sets its memory policy, exports `environment` through `env` and preloads the shim. When binding
// fails and that is tolerated, the process keeps the CPUs it had and an outer plan it inherited
// (TFPIN_*, thread variables, the shim) is withdrawn, so it runs like a job without tfpin. Throws
// tfpin::Error.
AppliedPlan apply_plan(const Plan& plan, const std::vector<EnvVar>& environment,
                       const EnvAccess& env, const ApplyOptions& options);

}  // namespace tfpin
