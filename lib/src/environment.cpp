#include "tfpin/environment.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace tfpin {
namespace {

// libgomp spins GOMP_SPINCOUNT times before sleeping; one spin (a pause instruction plus a load)
// takes roughly 10-50 ns on current x86, so this many spins is about one millisecond.
constexpr unsigned long gomp_spins_per_ms = 40000;

}  // namespace

std::vector<EnvVar> environment_for(const Plan& plan, const EnvironmentPolicy& policy) {
  const std::string intra = std::to_string(plan.intra);
  const std::string blocktime = std::to_string(policy.blocktime_ms);
  std::vector<EnvVar> vars = {
      {"OMP_NUM_THREADS", intra, "OpenMP team of each inter-op lane = intra-op threads", false},
      {"TF_NUM_INTRAOP_THREADS",
       policy.tf_intra_is_all_threads ? std::to_string(plan.threads) : intra,
       policy.tf_intra_is_all_threads
           ? "TensorFlow intra-op pool = all threads (site: thread-pool builds)"
           : "TensorFlow intra-op pool = intra, never oversubscribes OpenMP builds (NeSI)",
       false},
      {"TF_NUM_INTEROP_THREADS", std::to_string(plan.interop),
       "TensorFlow inter-op pool = inter-op lanes", false},
      {"MKL_NUM_THREADS", intra, "MKL calls run inside one lane", false},
      {"ORT_INTRA_OP_NUM_THREADS", intra,
       "ONNX Runtime's intra-op pool = one lane (unset, it takes the host's physical cores)",
       false},
      {"ORT_INTER_OP_NUM_THREADS", std::to_string(plan.interop),
       "ONNX Runtime's inter-op pool (parallel execution mode) = inter-op lanes", false},
      {"OPENBLAS_NUM_THREADS", intra, "OpenBLAS pool sized to one lane, not the node", false},
      {"KMP_BLOCKTIME", blocktime, "short spin after a parallel region (ms): idle lanes free cores",
       false},
      {"KMP_AFFINITY", "none",
       "Intel OpenMP must not bind: binding the initial thread collapses later threads onto one "
       "core; tfpin and its shim pin instead",
       false},
      // Not beside KMP_AFFINITY by default: LLVM's libomp ignores it then and says so per team,
      // and libgomp binds only when asked. With --enforce it replaces a user's GNU binding.
      {"OMP_PROC_BIND",
       "false",
       "GNU/LLVM OpenMP must not bind the initial thread (same collapse); tfpin pins instead",
       false,
       {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}},
      {"GOMP_SPINCOUNT", std::to_string(policy.blocktime_ms * gomp_spins_per_ms),
       "GNU OpenMP spin before sleeping, the KMP_BLOCKTIME equivalent", false},
  };
  if (plan.hyperthreads == HyperthreadPolicy::one_per_core) {
    vars.push_back({"KMP_HW_SUBSET", "1T", "Intel OpenMP: one hardware thread per core", false});
  }
  if (policy.blocktime_ms == 0) {
    vars.push_back(
        {"OMP_WAIT_POLICY", "PASSIVE", "blocktime 0: OpenMP threads sleep at once", false});
  }
  for (EnvVar& var : encode_plan(plan)) vars.push_back(std::move(var));
  vars.push_back({TFPIN_VAR_CPU_FILES, policy.cpu_files ? "1" : "0",
                  policy.cpu_files ? "the shim shows programs reading /sys/devices/system/cpu, "
                                     "/proc/cpuinfo or /proc/stat the plan's CPUs"
                                   : "the shim leaves the CPU files alone (--no-cpu-files)",
                  true});
  return vars;
}

namespace {

using Recorded = std::map<std::string, std::string, std::less<>>;

// The non-empty pieces of `text` between any of `separators`.
std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    const auto end = std::min(text.find_first_of(separators), text.size());
    if (end > 0) pieces.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return pieces;
}

// LD_PRELOAD's entries: glibc splits it on spaces and colons.
std::vector<std::string_view> preload_entries(std::string_view preload) {
  return split(preload, " :");
}

// TFPIN_ENV: "NAME=VALUE;..." of what an outer tfpin set.
Recorded recorded_exports(const EnvGetter& get) {
  Recorded recorded;
  const auto text = get(std::string(env_exported));
  if (!text) return recorded;
  for (const std::string_view item : split(*text, ";")) {
    if (const auto eq = item.find('='); eq != std::string_view::npos) {
      recorded.emplace(item.substr(0, eq), item.substr(eq + 1));
    }
  }
  return recorded;
}

// True when `name` still holds the value an outer tfpin gave it.
bool still_tfpins(const Recorded& recorded, const std::string& name,
                  const std::optional<std::string>& current) {
  const auto it = recorded.find(name);
  return current && it != recorded.end() && it->second == *current;
}

}  // namespace

namespace {

// Variables of tfpin's whose export would contradict a variable the user set (the runtimes then
// ignore one of the two, and LLVM's libomp says so once per team: "OMP: Warning #182:
// OMP_PROC_BIND: ignored because KMP_AFFINITY has been defined"). The user's setting wins; tfpin
// exports nothing against it (the shim still pins).
const std::map<std::string_view, std::vector<std::string_view>>& contradicted_by() {
  static const std::map<std::string_view, std::vector<std::string_view>> table = {
      {"KMP_AFFINITY", {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}},
      {"GOMP_SPINCOUNT", {"OMP_WAIT_POLICY"}},
      {"KMP_BLOCKTIME", {"OMP_WAIT_POLICY"}},
      {"OMP_WAIT_POLICY", {"KMP_BLOCKTIME", "GOMP_SPINCOUNT"}},
  };
  return table;
}

}  // namespace

std::vector<EnvOutcome> export_environment(const std::vector<EnvVar>& vars, bool enforce,
                                           const EnvAccess& env) {
  const Recorded outer = recorded_exports(env.get);
  std::set<std::string, std::less<>> planned;
  std::set<std::string, std::less<>> set_here;  // tfpin's too, though not yet in TFPIN_ENV
  // The user's own value of `name`: set, not empty (an empty value is as good as unset, and
  // libgomp refuses an empty OMP_NUM_THREADS), and not what an outer tfpin exported.
  const auto users = [&](const std::string& name) -> std::optional<std::string> {
    auto value = env.get(name);
    if (!value || value->empty() || still_tfpins(outer, name, value) || set_here.contains(name)) {
      return std::nullopt;
    }
    return value;
  };
  std::vector<EnvOutcome> outcomes;
  outcomes.reserve(vars.size());
  std::string record;
  for (const EnvVar& var : vars) {
    planned.insert(var.name);
    const auto existing = users(var.name);
    if (!var.only_against.empty()) {
      const bool against_user =
          std::any_of(var.only_against.begin(), var.only_against.end(),
                      [&](const std::string& other) { return users(other).has_value(); });
      if (!enforce || !against_user) {
        if (existing) {
          outcomes.push_back({var.name, *existing, true, {}});
        } else if (env.get(var.name)) {
          env.unset(var.name);  // an outer tfpin's, or empty
        }
        continue;
      }
    }
    if (!var.handover && !enforce) {
      if (existing) {
        outcomes.push_back({var.name, *existing, true, {}});
        continue;
      }
      const auto conflicts = contradicted_by().find(var.name);
      std::string user_setting;
      if (conflicts != contradicted_by().end()) {
        for (const std::string_view other : conflicts->second) {
          if (users(std::string(other))) {
            user_setting = other;
            break;
          }
        }
      }
      if (!user_setting.empty()) {
        if (env.get(var.name)) env.unset(var.name);  // not the user's: an outer tfpin's, or empty
        outcomes.push_back({var.name, "", false, user_setting});
        continue;
      }
    }
    env.set(var.name, var.value);
    set_here.insert(var.name);
    outcomes.push_back({var.name, var.value, false, {}});
    record += fmt::format("{}{}={}", record.empty() ? "" : ";", var.name, var.value);
  }
  for (const auto& [name, value] : outer) {
    if (!planned.contains(name) && still_tfpins(outer, name, env.get(name))) env.unset(name);
  }
  env.set(std::string(env_exported), record);
  return outcomes;
}

namespace {

// Any copy of the shim, whatever its directory.
bool is_shim_entry(std::string_view entry) {
  return entry == shim_file_name || entry.ends_with(fmt::format("/{}", shim_file_name));
}

struct ContainerNames {
  std::string_view bind_path;   // the launcher's list of binds, "src[:dest[:opts]],..."
  std::string_view env_prefix;  // <prefix>NAME=value sets NAME inside
};

constexpr std::array<ContainerNames, 2> container_names = {{
    {"APPTAINER_BINDPATH", "APPTAINERENV_"},
    {"SINGULARITY_BINDPATH", "SINGULARITYENV_"},
}};

// The bind of the shim's directory `dir`: read-only, at the same path, so that LD_PRELOAD's path
// resolves inside.
std::string shim_bind(std::string_view dir) { return fmt::format("{}:{}:ro", dir, dir); }

// "" for a bare file name.
std::string_view directory_of(std::string_view path) {
  const auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return {};
  return path.substr(0, std::max<std::size_t>(slash, 1));
}

// Drops the shim's entries from the preload list in `name`; unsets it when nothing else is left.
// Returns the directories of the dropped entries.
std::vector<std::string> strip_shim_from_preload(const EnvAccess& env, const std::string& name) {
  std::vector<std::string> dirs;
  const auto preload = env.get(name);
  if (!preload) return dirs;
  std::string kept;
  for (const std::string_view entry : preload_entries(*preload)) {
    if (is_shim_entry(entry)) {
      dirs.emplace_back(directory_of(entry));
    } else {
      kept += fmt::format("{}{}", kept.empty() ? "" : ":", entry);
    }
  }
  if (kept.empty()) {
    env.unset(name);
  } else if (kept != *preload) {
    env.set(name, kept);
  }
  return dirs;
}

}  // namespace

void withdraw_environment(const EnvAccess& env) {
  const Recorded outer = recorded_exports(env.get);
  for (const auto& [name, value] : outer) {
    if (still_tfpins(outer, name, env.get(name))) env.unset(name);
  }
  std::set<std::string> shim_binds;  // what forward_to_containers bound for each copy of the shim
  auto strip = [&](const std::string& name) {
    for (const std::string& dir : strip_shim_from_preload(env, name))
      shim_binds.insert(shim_bind(dir));
  };
  strip("LD_PRELOAD");
  for (const ContainerNames& names : container_names) {
    strip(fmt::format("{}LD_PRELOAD", names.env_prefix));
    env.unset(fmt::format("{}{}", names.env_prefix, env_exported));
  }
  for (const ContainerNames& names : container_names) {
    const std::string bind_path(names.bind_path);
    const auto binds = env.get(bind_path);
    if (!binds) continue;
    std::string kept;
    for (const std::string_view bind : split(*binds, ",")) {
      if (!shim_binds.contains(std::string(bind))) {
        kept += fmt::format("{}{}", kept.empty() ? "" : ",", bind);
      }
    }
    if (kept.empty()) {
      env.unset(bind_path);
    } else if (kept != *binds) {
      env.set(bind_path, kept);
    }
  }
  env.unset(std::string(env_exported));
}

std::string forward_to_containers(ContainerRuntime runtime, const std::vector<EnvVar>& vars,
                                  const std::optional<std::string>& shim, bool enforce,
                                  const EnvAccess& env) {
  if (runtime == ContainerRuntime::none) return "";
  const ContainerNames& names = container_names[runtime == ContainerRuntime::apptainer ? 0 : 1];
  std::string warning;
  const std::string exported = env.get(std::string(env_exported)).value_or("");
  const Recorded outer = recorded_exports(env.get);
  std::string record;
  auto forward = [&](const std::string& name, bool handover, bool recorded = true) {
    const auto value = env.get(name);
    if (!value || value->empty()) return;
    const std::string inside = fmt::format("{}{}", names.env_prefix, name);
    const auto users = env.get(inside);
    const bool user_set = users && !users->empty() && !still_tfpins(outer, inside, users);
    if (user_set && !enforce && !handover) return;
    env.set(inside, *value);
    if (recorded) record += fmt::format(";{}={}", inside, *value);
  };
  for (const EnvVar& var : vars) forward(var.name, var.handover);
  forward(std::string(TFPIN_VAR_REPORT), false);
  // Not in the record (its value is a record): withdraw_environment removes it by name.
  if (!exported.empty()) forward(std::string(env_exported), true, false);

  if (shim && !shim->empty()) {
    // The shim first in the container's LD_PRELOAD, the user's own entries kept; not recorded:
    // withdraw_environment takes the shim out of it and leaves the rest.
    const std::string inside = fmt::format("{}LD_PRELOAD", names.env_prefix);
    const auto users = env.get(inside);
    const std::string preload = (users && !users->empty() && !enforce)
                                    ? preload_with_shim(*users, *shim)
                                    : env.get("LD_PRELOAD").value_or(std::string(*shim));
    if (preload != users) env.set(inside, preload);

    const std::string dir(directory_of(*shim));
    const std::string bind_path(names.bind_path);
    if (dir.size() < 2 || dir.front() != '/' || dir.find_first_of(",:") != std::string::npos) {
      warning = fmt::format(
          "the shim's directory '{}' cannot be bound by {} (valid: an absolute directory other "
          "than / without ',' or ':'); containers the task starts get no shim unless the site "
          "binds it",
          dir, bind_path);
    } else {
      const std::string binds = env.get(bind_path).value_or("");
      const auto pieces = split(binds, ",");
      const bool bound = std::any_of(pieces.begin(), pieces.end(), [&](std::string_view bind) {
        return bind == dir || bind.starts_with(dir + ":");
      });
      if (!bound) env.set(bind_path, binds.empty() ? shim_bind(dir) : binds + "," + shim_bind(dir));
    }
  }
  if (!record.empty()) {
    env.set(std::string(env_exported), exported.empty() ? record.substr(1) : exported + record);
  }
  return warning;
}

std::optional<std::string> process_getenv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

EnvAccess process_env_access() {
  return {process_getenv,
          [](const std::string& name, const std::string& value) {
            if (::setenv(name.c_str(), value.c_str(), 1) != 0) {
              throw Error(ErrorKind::system,
                          fmt::format("could not set {}: {}", name, std::strerror(errno)));
            }
          },
          [](const std::string& name) { ::unsetenv(name.c_str()); }};
}

std::optional<std::string> requested_value(const EnvGetter& get, std::string_view name) {
  const std::string key(name);
  auto value = get(key);
  if (still_tfpins(recorded_exports(get), key, value)) return std::nullopt;
  return value;
}

std::optional<unsigned> requested_count(std::optional<unsigned> from_option, const EnvGetter& get,
                                        std::string_view variable) {
  if (from_option) return from_option;
  if (auto text = requested_value(get, variable)) return parse_count(variable, *text);
  return std::nullopt;
}

std::string preload_with_shim(std::string_view existing, std::string_view shim) {
  // Another copy of the shim (an outer tfpin's, at another path) goes: two copies in one process
  // would both apply the plan.
  std::vector<std::string_view> kept;
  bool other_copy = false;
  for (const std::string_view entry : preload_entries(existing)) {
    if (entry != shim && is_shim_entry(entry)) {
      other_copy = true;
    } else {
      kept.push_back(entry);
    }
  }
  const std::string rest =
      other_copy ? fmt::format("{}", fmt::join(kept, ":")) : std::string(existing);
  if (std::find(kept.begin(), kept.end(), shim) != kept.end()) return rest;
  return rest.empty() ? std::string(shim) : fmt::format("{}:{}", shim, rest);
}

std::vector<EnvVar> encode_plan(const Plan& plan) {
  return {
      {std::string(env_cpus), format_cpulist(plan.cpus()),
       "plan for the shim: the task's cpus, lane after lane", true},
      {std::string(env_interop), std::to_string(plan.interop), "plan: inter-op lanes (M)", true},
      {std::string(env_intra), std::to_string(plan.intra), "plan: threads per lane (N/M)", true},
  };
}

std::optional<Plan> decode_plan(const EnvGetter& get) {
  const auto cpus_text = get(std::string(env_cpus));
  if (!cpus_text) return std::nullopt;
  auto required = [&](std::string_view name, unsigned max) {
    const auto text = get(std::string(name));
    if (!text) {
      throw Error(
          ErrorKind::invalid_request,
          fmt::format("{} is set but {} is missing: the plan is incomplete (valid: {}, {} and {} "
                      "together)",
                      env_cpus, name, env_cpus, env_interop, env_intra));
    }
    return parse_count(name, *text, max);
  };
  Plan plan;
  const std::vector<unsigned> cpus = parse_cpulist(*cpus_text, env_cpus);
  plan.interop = required(env_interop, TFPIN_MAX_LANES);
  plan.intra = required(env_intra, TFPIN_MAX_INTRA);
  plan.threads = plan.interop * plan.intra;
  if (cpus.size() != plan.threads) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} lists {} cpus but {}={} x {}={} needs {}", env_cpus,
                            shown_value(*cpus_text), cpus.size(), env_interop, plan.interop,
                            env_intra, plan.intra, plan.threads));
  }
  for (unsigned i = 0; i < plan.interop; ++i) {
    Lane lane;
    lane.cpus.assign(cpus.begin() + i * plan.intra, cpus.begin() + (i + 1) * plan.intra);
    plan.lanes.push_back(std::move(lane));
  }
  plan.allowed = cpus;
  return plan;
}

}  // namespace tfpin
