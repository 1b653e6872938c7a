// What the plugin does in each Slurm context. The extern "C" hooks in spank_plugin.cpp dispatch here
// and catch everything; these functions may throw.
#pragma once

#include "spank.hpp"

#include "job_options.hpp"
#include "site_config.hpp"

namespace tfpin::plugin {

// sbatch/salloc (allocator) and srun (local): refuse bad values before anything is queued.
// Returns 0, or -1 after printing why.
int check_at_submit(const SiteConfig& site, JobOptions options);

// slurmstepd, in the forked task just before exec: plan, bind, export, preload the shim.
// Returns 0, or -1 (the task fails, also for options.refused) after printing why on the task's
// stderr.
int setup_task(spank_t spank, const SiteConfig& site, JobOptions options);

}  // namespace tfpin::plugin
