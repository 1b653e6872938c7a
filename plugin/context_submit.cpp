// Allocator (sbatch, salloc) and local (srun) contexts.
#include "contexts.hpp"
#include "log.hpp"
#include "tfpin/error.hpp"

namespace tfpin::plugin {

int check_at_submit(const SiteConfig& site, JobOptions options) {
  try {
    apply_environment(options, process_getenv);
    check_options(options, site);
  } catch (const Error& e) {
    report_error(e.what());
    return -1;
  }
  return 0;
}

}  // namespace tfpin::plugin
