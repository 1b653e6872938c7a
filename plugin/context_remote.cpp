// Remote context: slurmstepd, in each task's process after fork and before exec (batch step too).
#include <fmt/format.h>
#include <slurm/slurm.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <vector>

#include "contexts.hpp"
#include "log.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/error.hpp"
#include "tfpin/report.hpp"
#include "tfpin/topology_cache.hpp"

namespace tfpin::plugin {
namespace {

std::optional<std::string> task_getenv(spank_t spank, const std::string& name) {
  std::vector<char> buffer(4096);
  while (true) {
    const spank_err_t rc =
        spank_getenv(spank, name.c_str(), buffer.data(), static_cast<int>(buffer.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buffer.data());
    if (rc != ESPANK_NOSPACE || buffer.size() >= (1U << 20)) return std::nullopt;
    buffer.resize(buffer.size() * 4);
  }
}

void task_setenv(spank_t spank, const std::string& name, const std::string& value) {
  if (spank_setenv(spank, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
    throw Error(ErrorKind::system, fmt::format("could not set {} in the task environment", name));
  }
}

EnvAccess task_environment(spank_t spank) {
  return {[spank](const std::string& name) { return task_getenv(spank, name); },
          [spank](const std::string& name, const std::string& value) {
            task_setenv(spank, name, value);
          },
          [spank](const std::string& name) { spank_unsetenv(spank, name.c_str()); }};
}

// "job 42 step 0" (batch, extern, interactive for Slurm's special steps).
std::string step_label(spank_t spank) {
  uint32_t job = 0;
  uint32_t step = 0;
  spank_get_item(spank, S_JOB_ID, &job);
  spank_get_item(spank, S_JOB_STEPID, &step);
  std::string step_name = std::to_string(step);
  if (step == SLURM_BATCH_SCRIPT) step_name = "batch";
  if (step == SLURM_EXTERN_CONT) step_name = "extern";
  if (step == SLURM_INTERACTIVE_STEP) step_name = "interactive";
  return fmt::format("job {} step {}", job, step_name);
}

std::string task_label(spank_t spank) {
  uint32_t task = 0;
  spank_get_item(spank, S_TASK_GLOBAL_ID, &task);
  return fmt::format("{} task {}", step_label(spank), task);
}

// Slurm 22.05 writes an OCI container's environment before the plugins' task_init: what tfpin
// sets there never reaches it. Later releases (checked: 26.05) write it from the task's.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
constexpr bool oci_container_gets_task_environment = true;
#else
constexpr bool oci_container_gets_task_environment = false;
#endif

// The topology prepare_step loaded in slurmstepd; each forked task has its own copy.
std::optional<Topology> step_topology;

// The node's topology through its cache (site key topology_cache). Written only as root: tasks
// run as the job's user and only read.
Topology node_topology(const SiteConfig& site, const std::string& label) {
  TopologyCacheOptions cache;
  cache.directory = site.topology_cache;
  CachedTopology loaded = load_host_topology(cache);
  if (!loaded.warning.empty()) report_warning(label + ": " + loaded.warning);
  return std::move(loaded.topology);
}

}  // namespace

void forget_step() { step_topology.reset(); }

void prepare_step(spank_t spank, const SiteConfig& site, const JobOptions& options) {
  step_topology.reset();
  if (options.off || options.refused) return;
  const bool planned = site.activation == Activation::always || options.requested() ||
                       task_getenv(spank, std::string(env_threads)) ||
                       task_getenv(spank, std::string(env_interop));
  if (!planned) return;
  try {
    step_topology = node_topology(site, step_label(spank));
  } catch (const std::exception&) {
    // Only a shortcut: each task loads it again and reports a failure under the site's on_error.
  }
}

int setup_task(spank_t spank, const SiteConfig& site, JobOptions options) {
  const EnvAccess env = task_environment(spank);
  const std::string label = task_label(spank);
  // The task fails; in a task slurm_error reaches both the slurmd log and the task's stderr.
  auto fail = [&label](const std::string& message) {
    report_error(label + ": " + message);
    return -1;
  };

  if (options.refused) return fail(*options.refused);
  try {
    apply_environment(options, env.get);
    check_options(options, site);
  } catch (const Error& e) {
    return fail(e.what());
  }
  if (options.off || (site.activation == Activation::on_request && !options.requested())) {
    // Inside a tfpin'd job (a step of a batch script that has a plan) the parent's plan must not
    // leak in: its cpus are not this step's, and its shim would enforce them.
    try {
      withdraw_environment(env);
    } catch (const Error& e) {
      return fail(e.what());
    }
    return 0;
  }

  // A fault of the machine rather than of the request (hwloc cannot load, hwloc and the kernel
  // disagree, binding fails): under on_error=warn the task runs as if tfpin were off. Whatever an
  // outer plan left in its environment goes too, or its shim would pin it to that plan's CPUs.
  auto run_unbound = [&](const std::string& why) {
    if (site.on_error == OnError::fail) return fail(why);
    try {
      withdraw_environment(env);
    } catch (const Error& e) {
      return fail(e.what());
    }
    report_warning(fmt::format("{}: {}; the task runs unbound, without tfpin", label, why));
    return 0;
  };

  // srun --container (Slurm's OCI support): the program runs in the bundle's root (see
  // task_settings for the shim). The pinning still reaches the container, and the variables do
  // where Slurm gives it the task's environment (see oci_container_gets_task_environment).
  const bool oci_container = task_getenv(spank, "SLURM_CONTAINER").has_value();
  const TaskSettings settings = task_settings(options, site, oci_container);

  std::optional<Topology> own_topology;  // when slurmstepd did not load the step's
  const Topology* topology = step_topology ? &*step_topology : nullptr;
  Plan plan;
  try {
    if (topology == nullptr) topology = &own_topology.emplace(node_topology(site, label));
    PlacementRequest request = settings.request;
    request.allowed = current_affinity();
    plan = compute_plan(*topology, request);
  } catch (const Error& e) {
    // Only the user's own request (too many threads, not a multiple) fails the task.
    if (e.kind() == ErrorKind::invalid_request) return fail(e.what());
    return run_unbound(e.what());
  }
  for (const std::string& warning : plan.warnings) report_warning(label + ": " + warning);

  const std::vector<EnvVar> environment = environment_for(plan, settings.environment);
  const ApplyOptions& how = settings.apply;
  AppliedPlan applied;
  try {
    applied = apply_plan(plan, environment, env, how);
  } catch (const Error& e) {
    return fail(e.what());
  }
  for (const std::string& warning : applied.warnings) {
    report_warning(fmt::format("{}: {}", label, warning));
  }
  uint32_t task_id = 0;
  spank_get_item(spank, S_TASK_GLOBAL_ID, &task_id);
  if (site.shim && oci_container && !site.oci_shim && applied.bound && task_id == 0) {
    // Once per step, not per task: every task of the step is in the same container image.
    report_warning(fmt::format(
        "{}: srun --container: the shim is not preloaded, its path {} is the host's (site key "
        "oci_shim=yes when the site's bundles bind its directory); {} apply inside",
        label, site.shim_path, oci_container_gets_task_environment ? "cores and thread variables"
                                                                   : "only the cores"));
  }

  if (applied.bound && (options.verbose || site.verbose)) {
    const std::string text =
        describe_plan(*topology, plan, environment, applied.kept_memory_policy);
    std::fprintf(stderr, "tfpin: %s\n%s", label.c_str(), text.c_str());
    std::fflush(stderr);
  }
  return 0;
}

}  // namespace tfpin::plugin
