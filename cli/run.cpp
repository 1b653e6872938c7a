#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/report.hpp"

namespace tfpin::cli {

int RunCommand::operator()() const {
  const ComputedPlan computed = compute(plan, Topology::host(), current_affinity());
  for (const std::string& warning : computed.plan.warnings) {
    fmt::print(stderr, "tfpin: warning: {}\n", warning);
  }
  // The whole task's cpus: threads that are not OpenMP workers may run on any of them.
  bind_current_process(computed.plan.cpus());
  apply_memory_policy(computed.plan.memory);
  export_environment(
      computed.environment, enforce,
      [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
      },
      [](const std::string& name, const std::string& value) {
        ::setenv(name.c_str(), value.c_str(), 1);
      });
  if (verbose) {
    std::cerr << describe_plan(computed.topology, computed.plan, computed.environment);
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
