#include "log.hpp"

#include <cstdio>

#include "spank.hpp"
#include "tfpin/error.hpp"

namespace tfpin::plugin {

std::string log_safe(std::string_view text) { return shown_value(text, text.size()); }

void report_error(const std::string& message) {
  // The format is fixed so that no user text is ever interpreted as one.
  slurm_error("tfpin: %s", log_safe(message).c_str());
}

void report_warning(const std::string& message) {
  const std::string line = log_safe(message);
  // slurm_info only reaches the log: the task's user sees the warning through its stderr.
  slurm_info("tfpin: warning: %s", line.c_str());
  if (spank_context() == S_CTX_REMOTE) std::fprintf(stderr, "tfpin: warning: %s\n", line.c_str());
}

}  // namespace tfpin::plugin
