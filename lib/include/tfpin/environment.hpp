// The environment a task gets from its plan: thread counts for every runtime, wait policies, and the
// TFPIN_* hand-over that the shim (and the engine) decode. docs/user-guide.md "What a task gets: its environment" explains each value.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/placement.hpp"
#include "tfpin/plan_contract.h"

namespace tfpin {

struct EnvironmentPolicy {
  unsigned blocktime_ms = 1;           // KMP_BLOCKTIME; 0 = sleep at once (PASSIVE)
  bool tf_intra_is_all_threads = false;  // TF_NUM_INTRAOP_THREADS = N (thread-pool builds) instead of intra
  bool cpu_files = true;  // the shim serves the plan's view of the CPU files (TFPIN_CPU_FILES)
};

struct EnvVar {
  std::string name;
  std::string value;
  std::string reason;      // one line, for `tfpin show` and the README
  bool handover = false;   // TFPIN_* plan: always overwritten, user values never win
  // Non-empty: exported only with --enforce, to replace a value the user set in one of these.
  std::vector<std::string> only_against = {};
};

std::vector<EnvVar> environment_for(const Plan& plan, const EnvironmentPolicy& policy);

// What export did with one variable.
struct EnvOutcome {
  std::string name;
  std::string value;         // the value the task ends up with ("" when withheld)
  bool kept_user = false;    // the user's own value was kept (not enforced)
  std::string withheld_for;  // not exported: it would contradict this variable the user set
};

using EnvGetter = std::function<std::optional<std::string>(const std::string&)>;

// Access to the environment being prepared (the process's own for `tfpin run`, the task's in the
// plugin).
struct EnvAccess {
  EnvGetter get;
  std::function<void(const std::string&, const std::string&)> set;
  std::function<void(const std::string&)> unset;
};

// Exports `vars`. Values the user already has win unless `enforce`, except the TFPIN_* hand-over
// which always reflects the plan; an empty value counts as unset. Without `enforce`, a variable
// that would contradict another one the user set (OMP_PROC_BIND against KMP_AFFINITY, the spin
// settings against OMP_WAIT_POLICY, ...) is not exported. What tfpin sets is recorded in TFPIN_ENV, so that an inner tfpin
// (a narrower srun step, a nested `tfpin run`) knows those values are tfpin's and not the user's: it
// replaces them, and unsets those its own plan does not set (e.g. KMP_HW_SUBSET under
// --hyperthreads). A value the user changed in between stays the user's.
std::vector<EnvOutcome> export_environment(const std::vector<EnvVar>& vars, bool enforce,
                                           const EnvAccess& env);

// Removes what an outer tfpin exported (where the value is still tfpin's), its hand-over, the shim
// from LD_PRELOAD (and from the containers' <P>ENV_LD_PRELOAD and bind paths): for a step or
// program that runs without tfpin inside a tfpin'd task.
void withdraw_environment(const EnvAccess& env);

// Container runtimes that a task starts itself (`apptainer exec IMAGE PROGRAM` in a job script) and
// that read their settings from the task's environment.
enum class ContainerRuntime { none, apptainer, singularity };  // singularity: SingularityCE

// Makes the plan hold in the containers the task starts with `runtime`. The launcher binds the
// shim's directory read-only at the same path (<P>_BINDPATH: APPTAINER_BINDPATH or
// SINGULARITY_BINDPATH), and every variable of `vars` that the task has, LD_PRELOAD, TFPIN_ENV and
// TFPIN_REPORT are passed as <P>ENV_<name>, which the runtime sets inside over the image's own
// %environment and also under --cleanenv. A <P>ENV_ value the user set stays unless `enforce`
// (in <P>ENV_LD_PRELOAD the shim goes first); the TFPIN_* plan always reflects the plan. What is
// set here is added to TFPIN_ENV, so that withdraw_environment and an inner tfpin take it back.
// Returns a warning, or "" (a shim directory that a bind path cannot spell is not bound).
std::string forward_to_containers(ContainerRuntime runtime, const std::vector<EnvVar>& vars,
                                  const std::optional<std::string>& shim, bool enforce,
                                  const EnvAccess& env);

// This process's environment: getenv as an EnvGetter, and get/setenv/unsetenv together.
std::optional<std::string> process_getenv(const std::string& name);
EnvAccess process_env_access();

// The user's request in variable `name` (TFPIN_THREADS, TFPIN_INTEROP), or nullopt. TFPIN_INTEROP is
// also part of the hand-over; the value tfpin itself exported is not a request.
std::optional<std::string> requested_value(const EnvGetter& get, std::string_view name);

// A count the user asked for: `from_option` (the command line, already parsed) wins over its
// environment form `variable` (parsed here, errors name the variable); nullopt when neither.
std::optional<unsigned> requested_count(std::optional<unsigned> from_option, const EnvGetter& get,
                                        std::string_view variable);

// LD_PRELOAD with `shim` first, keeping the user's entries; unchanged when the shim is already in it.
std::string preload_with_shim(std::string_view existing, std::string_view shim);

// File name of the shim, as it appears in LD_PRELOAD.
inline constexpr std::string_view shim_file_name = "libtfpin-shim.so";

// The plan as TFPIN_* variables, and back. decode returns nullopt when no plan is present
// (no TFPIN_CPUS) and throws tfpin::Error when one is present but inconsistent or beyond the
// shim's limits; decoded lanes carry their cpus only (NUMA nodes are not handed over).
std::vector<EnvVar> encode_plan(const Plan& plan);
std::optional<Plan> decode_plan(const EnvGetter& get);

// The hand-over's names (tfpin/plan_contract.h, shared with the shim). The plan's N is
// TFPIN_INTEROP x TFPIN_INTRA; TFPIN_THREADS is only ever a request.
inline constexpr std::string_view env_cpus = TFPIN_VAR_CPUS;
inline constexpr std::string_view env_threads = TFPIN_VAR_THREADS;
inline constexpr std::string_view env_interop = TFPIN_VAR_INTEROP;
inline constexpr std::string_view env_intra = TFPIN_VAR_INTRA;
inline constexpr std::string_view env_exported = TFPIN_VAR_EXPORTED;

}  // namespace tfpin
