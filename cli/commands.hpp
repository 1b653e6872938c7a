#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "plan_options.hpp"
#include "tfpin/error.hpp"

namespace tfpin::cli {

// Exit codes: the program's own for `run`; these for tfpin itself.
inline constexpr int exit_usage = 2;      // bad arguments, impossible plan
inline constexpr int exit_failure = 1;    // the system refused (binding, topology)
inline constexpr int exit_cannot_exec = 126;
inline constexpr int exit_not_found = 127;

// A bad argument: main() prints the message and exits with exit_usage.
[[noreturn]] inline void usage_error(const std::string& message) {
  throw Error(ErrorKind::invalid_request, message);
}

struct ShowCommand {
  PlanOptions plan;
  std::string topology;
  bool json = false;
  int operator()() const;
};

struct RunCommand {
  PlanOptions plan;
  bool verbose = false;
  bool enforce = false;
  bool no_shim = false;
  std::vector<std::string> program;
  int operator()() const;
};

// `tfpin --version`: tfpin's version and the Slurm, oneDNN and hwloc versions it was built with.
std::string version_text();

}  // namespace tfpin::cli
