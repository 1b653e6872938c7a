// A fake of the spank_* / slurm_* functions slurmstepd, srun and sbatch give a plugin, so the hooks
// can be driven directly in unit tests. The real Slurm tests (test_slurm_plugin.py) cover the rest.
#pragma once

#include <sched.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spank.hpp"

namespace fake_spank {

struct State {
  spank_context_t context = S_CTX_REMOTE;
  std::map<std::string, std::string> task_env;
  std::vector<spank_option> options;
  std::vector<std::string> log;  // "error: ..." / "info: ..."
  uint32_t job_id = 42;
  uint32_t step_id = 0;
  uint32_t task_id = 0;
};

State& state();
void reset(spank_context_t context);
spank_t handle();
bool logged(const std::string& needle);

// Keeps the test process's own affinity across tests that bind it (task_init binds "the task":
// in these tests, this process).
class AffinityGuard {
 public:
  AffinityGuard() { sched_getaffinity(0, sizeof saved_, &saved_); }
  ~AffinityGuard() { sched_setaffinity(0, sizeof saved_, &saved_); }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;

 private:
  cpu_set_t saved_{};
};

}  // namespace fake_spank
