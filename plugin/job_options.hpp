// The user's --tf-* options (and their TFPIN_* environment forms), checked the same way at submit
// and at task launch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "site_config.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"

namespace tfpin::plugin {

enum class OptionId : int { threads = 1, interop, verbose, off, hyperthreads };

inline constexpr const char* threads_option = "--tf-threads";
inline constexpr const char* interop_option = "--tf-interop";

struct JobOptions {
  std::optional<unsigned> threads;
  std::optional<unsigned> interop;
  bool verbose = false;
  bool off = false;
  bool hyperthreads = false;
  // What messages call N and M: the options, or the variables they came from (TFPIN_THREADS).
  OptionNames names = {threads_option, interop_option};
  // The first value slurmstepd passed that apply_option refused: Slurm only logs a failed remote
  // option callback and runs the job anyway, so the task is failed with this message instead.
  std::optional<std::string> refused;

  // Any option that asks for tfpin (on-request activation).
  [[nodiscard]] bool requested() const { return threads || interop || verbose || hyperthreads; }
};

// Applies one option as the user typed it. Throws tfpin::Error naming the option and value.
void apply_option(JobOptions& options, OptionId id, const char* optarg);

// TFPIN_THREADS / TFPIN_INTEROP fill what the command line left unset.
void apply_environment(JobOptions& options, const EnvGetter& get);

// What can be checked before knowing the cores: N multiple of M, site limits, hyperthread policy.
// Throws tfpin::Error.
void check_options(const JobOptions& options, const SiteConfig& site);

// What the site config and the job's options mean for lib, in one place: the placement request
// (allowed CPUs still to fill in), the environment policy and how the plan is applied. A task of
// `srun --container` (Slurm's OCI support) gets the shim only where the site binds it (oci_shim),
// and passes no plan on to further containers.
struct TaskSettings {
  PlacementRequest request;
  EnvironmentPolicy environment;
  ApplyOptions apply;
};
TaskSettings task_settings(const JobOptions& options, const SiteConfig& site, bool oci_container);

}  // namespace tfpin::plugin
