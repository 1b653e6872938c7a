#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/options.hpp"
#include "tfpin/report.hpp"

#ifndef TFPIN_SHIM_PATH
#define TFPIN_SHIM_PATH ""
#endif

namespace tfpin::cli {
namespace {

// TFPIN_SHIM if set; else the build tree's shim next to this tfpin (build/cli/tfpin ->
// build/shim/); else the shim of the install this tfpin belongs to (also when relocated, e.g.
// under rpm --root); else where the package installs it. Empty when none exists.
std::string find_shim() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* explicit_path = std::getenv("TFPIN_SHIM"); explicit_path != nullptr) {
    if (fs::is_regular_file(explicit_path, ec)) return explicit_path;
    fmt::print(stderr, "tfpin run: warning: TFPIN_SHIM={} does not exist\n", explicit_path);
    return "";
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path build_tree = exe.parent_path().parent_path() / "shim" / "libtfpin-shim.so";
    if (fs::is_regular_file(build_tree, ec)) return build_tree.string();
#ifdef TFPIN_SHIM_FROM_BINDIR
    const fs::path installed = (exe.parent_path() / TFPIN_SHIM_FROM_BINDIR).lexically_normal();
    if (fs::is_regular_file(installed, ec)) return installed.string();
#endif
  }
  if (fs::is_regular_file(TFPIN_SHIM_PATH, ec)) return TFPIN_SHIM_PATH;
  return "";
}

ContainerRuntime containers_option(const std::string& text) {
  if (text == "apptainer") return ContainerRuntime::apptainer;
  if (text == "singularity") return ContainerRuntime::singularity;
  if (text == "no") return ContainerRuntime::none;
  usage_error(fmt::format("--containers={} is not a container runtime (valid: apptainer, "
                          "singularity, no)",
                          shown_value(text)));
}

}  // namespace

int RunCommand::operator()() const {
  const ContainerRuntime runtime = containers_option(containers);
  const ComputedPlan computed = compute(plan, Topology::host(), current_affinity());
  for (const std::string& warning : computed.plan.warnings) {
    fmt::print(stderr, "tfpin: warning: {}\n", warning);
  }
  ApplyOptions how;
  how.enforce = enforce;
  if (!no_shim) how.shim = find_shim();
  how.containers = runtime;
  // Binding failures are not tolerated here, so a warning is about the shim.
  const AppliedPlan applied =
      apply_plan(computed.plan, computed.environment, process_env_access(), how);
  for (const std::string& warning : applied.warnings) {
    fmt::print(stderr, "tfpin run: warning: {} (--no-shim silences this)\n", warning);
  }
  if (verbose) {
    std::cerr << describe_plan(computed.topology, computed.plan, computed.environment,
                               applied.kept_memory_policy);
  }

  std::vector<char*> argv;
  argv.reserve(program.size() + 1);
  for (const std::string& arg : program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int err = errno;
  fmt::print(stderr, "tfpin run: cannot execute '{}': {}\n", program[0], std::strerror(err));
  return err == ENOENT ? exit_not_found : exit_cannot_exec;
}

}  // namespace tfpin::cli
