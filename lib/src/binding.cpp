#include "tfpin/binding.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/thread_affinity.hpp"
#include "tfpin/topology.hpp"

namespace tfpin {

void bind_current_process(std::span<const unsigned> cpus) {
  if (cpus.empty()) throw Error(ErrorKind::system, "cannot bind to an empty CPU set");
  // (The calling thread: tfpin binds before it starts any, and what it execs inherits the mask.)
  if (const int rc = set_thread_affinity(pthread_self(), cpus); rc != 0) {
    throw Error(ErrorKind::system, fmt::format("binding to CPUs {} failed: {}",
                                               format_cpulist(cpus), std::strerror(rc)));
  }
}

namespace {

using NodeMask = std::unique_ptr<bitmask, void (*)(bitmask*)>;

NodeMask allocate_nodemask() { return {numa_allocate_nodemask(), numa_bitmask_free}; }

// The CPUs the process may run on now, to put back when a tolerated binding failure leaves it
// unbound (the memory policy may fail after sched_setaffinity succeeded).
std::optional<std::vector<unsigned>> affinity_if_known() {
  try {
    return current_affinity();
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> inherited_memory_policy() {
  if (numa_available() < 0) return std::nullopt;
  NodeMask nodes = allocate_nodemask();
  int mode = MPOL_DEFAULT;
  if (get_mempolicy(&mode, nodes->maskp, nodes->size, nullptr, 0) != 0) {
    throw Error(ErrorKind::system,
                fmt::format("reading the memory policy failed: {}", std::strerror(errno)));
  }
  std::vector<unsigned> set;
  for (unsigned node = 0; node < nodes->size; ++node) {
    if (numa_bitmask_isbitset(nodes.get(), node) != 0) set.push_back(node);
  }
  // The mode flags (static/relative nodes, balancing) sit above the mode; the names are the
  // kernel's in numa_maps.
  switch (mode & 0xff) {
    case MPOL_DEFAULT:
      return std::nullopt;
    case MPOL_PREFERRED:
      return set.empty() ? "local" : "prefer:" + format_cpulist(set);
    case MPOL_BIND:
      return "bind:" + format_cpulist(set);
    case MPOL_INTERLEAVE:
      return "interleave:" + format_cpulist(set);
    case MPOL_LOCAL:
      return "local";
    default:  // newer modes (preferred-many, weighted interleave): kept all the same
      return fmt::format("mode {}:{}", mode & 0xff, format_cpulist(set));
  }
}

std::optional<std::string> apply_memory_policy(const MemoryPolicy& policy) {
  if (numa_available() < 0) return std::nullopt;
  if (auto kept = inherited_memory_policy()) return kept;
  // The default policy is first touch: nothing to set for a local plan.
  if (policy.kind == MemoryPolicyKind::local || policy.nodes.empty()) return std::nullopt;
  NodeMask nodes = allocate_nodemask();
  for (unsigned node : policy.nodes) {
    if (node >= nodes->size) {
      throw Error(ErrorKind::system, fmt::format("NUMA node {} does not exist here", node));
    }
    numa_bitmask_setbit(nodes.get(), node);
  }
  // set_mempolicy rather than numa_set_preferred: it reports failure instead of printing it.
  if (set_mempolicy(MPOL_PREFERRED, nodes->maskp, nodes->size + 1) != 0) {
    throw Error(ErrorKind::system, fmt::format("preferring memory on NUMA node {} failed: {}",
                                               fmt::join(policy.nodes, ","), std::strerror(errno)));
  }
  return std::nullopt;
}

AppliedPlan apply_plan(const Plan& plan, const std::vector<EnvVar>& environment,
                       const EnvAccess& env, const ApplyOptions& options) {
  AppliedPlan applied;
  const std::optional<std::vector<unsigned>> before = affinity_if_known();
  try {
    // The whole task's cpus: threads that are not OpenMP workers may run on any of them.
    bind_current_process(plan.cpus());
    applied.kept_memory_policy = apply_memory_policy(plan.memory);
  } catch (const Error& e) {
    if (!options.tolerate_binding_failure) throw;
    if (before) {
      try {
        bind_current_process(*before);
      } catch (const Error&) {  // the CPUs it had cannot be taken back: it keeps the plan's
      }
    }
    // An outer plan (a tfpin'd batch script, an outer tfpin run) would still cap and pin it.
    withdraw_environment(env);
    applied.bound = false;
    applied.warnings.push_back(fmt::format("{}; the task runs unbound, without tfpin", e.what()));
    return applied;
  }
  export_environment(environment, options.enforce, env);
  std::optional<std::string> preloaded;
  if (options.shim) {
    const std::string& shim = *options.shim;
    std::error_code ec;
    if (shim.empty() || !std::filesystem::is_regular_file(shim, ec)) {
      applied.warnings.push_back(
          fmt::format("{} not found; threads are not enforced inside the program",
                      shim.empty() ? std::string(shim_file_name) : "shim " + shim));
    } else {
      const std::string existing = env.get("LD_PRELOAD").value_or("");
      const std::string preload = preload_with_shim(existing, shim);
      if (preload != existing) env.set("LD_PRELOAD", preload);
      preloaded = shim;
    }
  }
  const std::string warning =
      forward_to_containers(options.containers, environment, preloaded, options.enforce, env);
  if (!warning.empty()) applied.warnings.push_back(warning);
  return applied;
}

}  // namespace tfpin
