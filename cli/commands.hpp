#pragma once

#include <string>
#include <vector>

#include "cli_fwd.hpp"
#include "exit_codes.hpp"
#include "plan_options.hpp"
#include "tfpin/error.hpp"

namespace tfpin::cli {

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
  std::string containers = "apptainer";  // apptainer|singularity|no: see forward_to_containers
  std::vector<std::string> program;
  int operator()() const;
};

// `tfpin --version`: tfpin's version and the Slurm, oneDNN and hwloc versions it was built with.
std::string version_text();

}  // namespace tfpin::cli
