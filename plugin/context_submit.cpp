// Allocator (sbatch, salloc) and local (srun) contexts.
#include <cstdlib>

#include "contexts.hpp"
#include "tfpin/error.hpp"

namespace tfpin::plugin {

int check_at_submit(const SiteConfig& site, JobOptions options) {
  try {
    apply_environment(options, [](const std::string& name) -> std::optional<std::string> {
      const char* value = std::getenv(name.c_str());
      return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
    });
    check_options(options, site);
  } catch (const Error& e) {
    report_error(e.what());
    return -1;
  }
  return 0;
}

}  // namespace tfpin::plugin
