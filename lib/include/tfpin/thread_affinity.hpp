// The one way tfpin hands a CPU list to the kernel: a CPU_ALLOC mask sized to the highest id, so
// CPUs past CPU_SETSIZE (1024; plans allow ids up to TFPIN_MAX_CPUS - 1, 4095) pin exactly
// rather than fail or vanish. Header-only: the engine (which does not link lib) pins its lanes
// with it too.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <span>

namespace tfpin {

// Restricts `thread` to `cpus`. Returns 0, or an errno value (EINVAL for an empty list or CPUs
// none of which exist, ENOMEM).
inline int set_thread_affinity(pthread_t thread, std::span<const unsigned> cpus) {
  if (cpus.empty()) return EINVAL;
  const int count = static_cast<int>(*std::max_element(cpus.begin(), cpus.end())) + 1;
  cpu_set_t* set = CPU_ALLOC(count);
  if (set == nullptr) return ENOMEM;
  const std::size_t size = CPU_ALLOC_SIZE(count);
  CPU_ZERO_S(size, set);
  for (unsigned cpu : cpus) CPU_SET_S(cpu, size, set);
  const int rc = pthread_setaffinity_np(thread, size, set);
  CPU_FREE(set);
  return rc;
}

}  // namespace tfpin
