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

namespace tfpin {

void bind_current_process(std::span<const unsigned> cpus) {
  if (cpus.empty()) throw Error(ErrorKind::system, "cannot bind to an empty CPU set");
  const unsigned highest = *std::max_element(cpus.begin(), cpus.end());
  const int ncpus = static_cast<int>(highest) + 1;
  auto free_set = [](cpu_set_t* s) { CPU_FREE(s); };
  std::unique_ptr<cpu_set_t, decltype(free_set)> set(CPU_ALLOC(ncpus), free_set);
  const std::size_t size = CPU_ALLOC_SIZE(ncpus);
  CPU_ZERO_S(size, set.get());
  for (unsigned cpu : cpus) CPU_SET_S(cpu, size, set.get());
  if (sched_setaffinity(0, size, set.get()) != 0) {
    throw Error(ErrorKind::system, fmt::format("binding to CPUs {} failed: {}", format_cpulist(cpus),
                                               std::strerror(errno)));
  }
}

void apply_memory_policy(const MemoryPolicy& policy) {
  if (numa_available() < 0) return;
  if (policy.kind == MemoryPolicyKind::local || policy.nodes.empty()) {
    if (set_mempolicy(MPOL_DEFAULT, nullptr, 0) != 0) {
      throw Error(ErrorKind::system,
                  fmt::format("resetting the memory policy failed: {}", std::strerror(errno)));
    }
    return;
  }
  std::unique_ptr<bitmask, void (*)(bitmask*)> nodes(numa_allocate_nodemask(), numa_bitmask_free);
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
}

std::vector<std::string> apply_plan(const Plan& plan, const std::vector<EnvVar>& environment,
                                    const EnvAccess& env, const ApplyOptions& options) {
  std::vector<std::string> warnings;
  try {
    // The whole task's cpus: threads that are not OpenMP workers may run on any of them.
    bind_current_process(plan.cpus());
    apply_memory_policy(plan.memory);
  } catch (const Error& e) {
    if (!options.tolerate_binding_failure) throw;
    warnings.push_back(fmt::format("{}; the task runs unbound", e.what()));
  }
  export_environment(environment, options.enforce, env);
  if (options.shim) {
    const std::string& shim = *options.shim;
    std::error_code ec;
    if (shim.empty() || !std::filesystem::is_regular_file(shim, ec)) {
      warnings.push_back(fmt::format("{} not found; threads are not enforced inside the program",
                                     shim.empty() ? std::string(shim_file_name) : "shim " + shim));
    } else {
      const std::string existing = env.get("LD_PRELOAD").value_or("");
      const std::string preload = preload_with_shim(existing, shim);
      if (preload != existing) env.set("LD_PRELOAD", preload);
    }
  }
  return warnings;
}

}  // namespace tfpin
