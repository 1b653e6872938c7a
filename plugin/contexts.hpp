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

// slurmstepd, once per step on each node, before it forks the tasks (as root): when the step's
// tasks will be planned, loads the node's topology (from the node's topology cache when valid,
// else from hwloc, then cached) so that every task inherits it instead of loading its own. Never
// fails the step: a topology that cannot be loaded here is loaded, and reported, by each task.
void prepare_step(spank_t spank, const SiteConfig& site, const JobOptions& options);

// Forgets the topology prepare_step loaded (the plugin is initialised again).
void forget_step();

// slurmstepd, in the forked task just before exec: plan, bind, export, preload the shim.
// Returns 0, or -1 (the task fails, also for options.refused) after printing why on the task's
// stderr.
int setup_task(spank_t spank, const SiteConfig& site, JobOptions options);

}  // namespace tfpin::plugin
