#include "plan_options.hpp"

#include "tfpin/cpulist.hpp"
#include "tfpin/options.hpp"

namespace tfpin::cli {

void PlanOptions::add_to(CLI::App& app) {
  app.add_option("--threads", threads,
                 "compute threads in total, inter-op x intra-op (default: one per allowed core)")
      ->envname("TFPIN_THREADS")
      ->type_name("N");
  app.add_option("--interop", interop, "inter-op lanes; each gets threads/interop cores (default 1)")
      ->envname("TFPIN_INTEROP")
      ->type_name("M");
  app.add_option("--cpuset", cpuset,
                 "allowed CPUs as a cpulist, e.g. 0-3,8-11 (default: this process's affinity)")
      ->type_name("LIST");
  app.add_option("--blocktime", blocktime, "OpenMP spin time after a parallel region, ms (default 1)")
      ->type_name("MS");
  app.add_flag("--hyperthreads", hyperthreads,
               "count every hardware thread as a slot (default: one thread per core)");
}

ComputedPlan compute(const PlanOptions& options, Topology topology,
                     std::optional<std::vector<unsigned>> allowed_default) {
  PlacementRequest request;
  if (!options.threads.empty()) request.threads = parse_count("--threads", options.threads);
  if (!options.interop.empty()) request.interop = parse_count("--interop", options.interop);
  request.hyperthreads =
      options.hyperthreads ? HyperthreadPolicy::all : HyperthreadPolicy::one_per_core;
  request.allowed = options.cpuset.empty() ? std::move(allowed_default)
                                           : std::optional(parse_cpulist(options.cpuset, "--cpuset"));
  EnvironmentPolicy policy;
  if (!options.blocktime.empty()) {
    policy.blocktime_ms = parse_non_negative("--blocktime", options.blocktime, 1000);
  }
  Plan plan = compute_plan(topology, request);
  std::vector<EnvVar> environment = environment_for(plan, policy);
  return {std::move(topology), std::move(plan), std::move(environment)};
}

}  // namespace tfpin::cli
