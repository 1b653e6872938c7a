// tfpin.so: the SPANK entry points. Every hook dispatches on spank_context() and catches everything:
// no C++ exception may unwind into slurmstepd, srun or sbatch.
#include "spank.hpp"

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contexts.hpp"
#include "job_options.hpp"
#include "log.hpp"
#include "site_config.hpp"
#include "tfpin/error.hpp"

// The loader looks these up by name. A const at namespace scope has internal linkage in C++, so
// they are declared extern before SPANK_PLUGIN defines them.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(tfpin, 1)  // NOLINT
#ifdef TFPIN_SPANK_FAILURE_MODE
// Slurm >= 25.05: a failing slurm_spank_init fails the job instead of draining the node (the
// default). Its failures are a bad plugstack.conf line or a job's own request: the node is fine.
extern int slurm_spank_init_failure_mode;  // NOLINT
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;  // NOLINT
#endif
}

namespace {

using tfpin::plugin::JobOptions;
using tfpin::plugin::OptionId;
using tfpin::plugin::report_error;
using tfpin::plugin::SiteConfig;

// One process runs one job's hooks: plain globals are the SPANK way (pyxis does the same).
// No site config: plugstack.conf is bad and tfpin is inactive (init said so once).
std::optional<SiteConfig> site;
JobOptions job;

void report_failure(const char* hook, const char* what) noexcept {
  try {
    report_error(std::string(hook) + ": " + what);
  } catch (...) {  // out of memory: nothing left to log with
  }
}

// 0 or -1, nothing else: since Slurm 25.05 any non-zero return is an error (before, only
// negative ones), so a positive value would mean different things on different releases.
template <typename Body>
int guarded(const char* hook, Body body) noexcept {
  try {
    return body() == 0 ? 0 : -1;
  } catch (const std::exception& e) {
    report_failure(hook, e.what());
  } catch (...) {
    report_failure(hook, "unexpected failure");
  }
  return -1;
}

int on_option(int val, const char* optarg, int remote) noexcept {
  return guarded("option", [&] {
    if (!site) return 0;  // inactive: accepted and ignored
    try {
      tfpin::plugin::apply_option(job, static_cast<OptionId>(val), optarg);
    } catch (const tfpin::Error& e) {
      if (remote == 0) {
        report_error(e.what());
        return -1;
      }
      // slurmstepd would only log a failure (echoing the raw value) and run the job with another
      // plan: task_init fails the task with this message instead.
      if (!job.refused) job.refused = e.what();
    }
    return 0;
  });
}

// spank_option wants mutable strings; these are never written.
char* text(const char* literal) { return const_cast<char*>(literal); }

std::vector<spank_option> options() {
  return {
      {text("tf-threads"), text("N"),
       text("tfpin: compute threads per task, inter-op x intra-op (default: all allocated cores)"), 1,
       static_cast<int>(OptionId::threads), on_option},
      {text("tf-interop"), text("M"),
       text("tfpin: inter-op lanes per task, each with N/M cores (default: site, else 1)"), 1,
       static_cast<int>(OptionId::interop), on_option},
      {text("tf-verbose"), nullptr, text("tfpin: print each task's plan to its stderr"), 0,
       static_cast<int>(OptionId::verbose), on_option},
      {text("tf-hyperthreads"), nullptr,
       text("tfpin: use every hardware thread (default: one thread per core)"), 0,
       static_cast<int>(OptionId::hyperthreads), on_option},
      {text("tf-off"), nullptr, text("tfpin: do not pin or configure this job"), 0,
       static_cast<int>(OptionId::off), on_option},
  };
}

bool user_context(spank_context_t context) {
  return context == S_CTX_LOCAL || context == S_CTX_REMOTE || context == S_CTX_ALLOCATOR;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t spank, int argc, char** argv) {
  return guarded("init", [&] {
    const spank_context_t context = spank_context();
    if (!user_context(context)) return 0;
    job = JobOptions{};
    site.reset();
    tfpin::plugin::forget_step();
    // Registered even when the config is bad: with "optional" in plugstack.conf the jobs then run
    // without tfpin, and sbatch must not refuse their --tf-* lines as unknown options.
    static std::vector<spank_option> table = options();
    for (spank_option& option : table) {
      if (spank_option_register(spank, &option) != ESPANK_SUCCESS) {
        report_error(std::string("could not register option --") + option.name);
        return -1;
      }
    }
    std::vector<std::string_view> args(argv, argv + argc);
    try {
      site = tfpin::plugin::parse_site_config(args);
    } catch (const tfpin::Error& e) {
      // Failing init is what makes "required" refuse jobs; "optional" ignores it.
      report_error(std::string(e.what()) + "; tfpin is inactive until this is fixed");
      return -1;
    }
    return 0;
  });
}

int slurm_spank_init_post_opt(spank_t spank, int /*argc*/, char** /*argv*/) {
  return guarded("init_post_opt", [&] {
    const spank_context_t context = spank_context();
    if (site && (context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR)) {
      return tfpin::plugin::check_at_submit(*site, job);
    }
    // slurmstepd, before the tasks are forked.
    if (site && context == S_CTX_REMOTE) tfpin::plugin::prepare_step(spank, *site, job);
    return 0;
  });
}

int slurm_spank_task_init(spank_t spank, int /*argc*/, char** /*argv*/) {
  return guarded("task_init", [&] {
    if (!site || spank_context() != S_CTX_REMOTE) return 0;
    return tfpin::plugin::setup_task(spank, *site, job);
  });
}

}  // extern "C"
