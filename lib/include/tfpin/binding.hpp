// Applying a plan to the calling process before it execs the workload: CPU binding and NUMA memory
// policy, both inherited across fork and exec. Used by `tfpin run` and by the plugin in the task.
#pragma once

#include <span>

#include "tfpin/placement.hpp"

namespace tfpin {

// Restricts the calling (single-threaded, about to exec) process to `cpus`. Throws Error(system).
void bind_current_process(std::span<const unsigned> cpus);

// Sets the memory policy of the calling process with libnuma. A machine without NUMA support is
// left alone. Throws Error(system).
void apply_memory_policy(const MemoryPolicy& policy);

}  // namespace tfpin
