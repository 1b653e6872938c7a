// The CPUs this process was started with, taken back from OpenMP's start-up binding.
//
// The engine links libgomp, and libgomp's initializer binds the initial thread to its first
// place when the environment sets OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY (job scripts
// do, following the HPC guides): by main(), tfpin ran on one CPU and planned for one. Those
// variables are meant for the user's program, not for the planner. An executable's
// .preinit_array runs before any shared library's initializer, so the mask is read there, and
// main() puts it back before anything plans or starts a thread.
// The same hook drops empty OpenMP variables (OMP_NUM_THREADS= in a job script): libgomp's
// initializer would print "Invalid value for environment variable OMP_NUM_THREADS", and tfpin
// treats an empty value as unset anyway (its own export replaces it for the program it runs).
#include "initial_affinity.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace tfpin::cli {

namespace {

// 8192 CPUs; a larger machine's mask does not fit and is left alone (no restore). Static: before
// libc's own initializers, nothing may allocate.
unsigned long initial_mask[8192 / (8 * sizeof(unsigned long))];
long initial_mask_bytes = 0;  // as the kernel returned it; 0: not captured

// "NAME=" with NAME one of the OpenMP runtimes' (OMP_*, GOMP_*, KMP_*). No libc: too early.
bool empty_openmp_variable(const char* entry) {
  const auto starts_with = [entry](const char* prefix) {
    std::size_t i = 0;
    for (; prefix[i] != '\0'; ++i) {
      if (entry[i] != prefix[i]) return false;
    }
    return true;
  };
  if (!starts_with("OMP_") && !starts_with("GOMP_") && !starts_with("KMP_")) return false;
  const char* c = entry;
  while (*c != '\0' && *c != '=') ++c;
  return *c == '=' && c[1] == '\0';
}

void capture_initial_affinity(int /*argc*/, char** /*argv*/, char** envp) {
  if (envp != nullptr) {
    char** kept = envp;
    for (char** e = envp; *e != nullptr; ++e) {
      if (!empty_openmp_variable(*e)) *kept++ = *e;
    }
    *kept = nullptr;
  }
  // The raw system call: glibc's wrapper may not be usable this early, and the kernel's answer
  // (bytes copied) is all that is needed.
  const long copied = syscall(SYS_sched_getaffinity, 0, sizeof initial_mask, initial_mask);
  initial_mask_bytes = copied > 0 ? copied : 0;
}

}  // namespace

bool restore_initial_affinity() {
  if (initial_mask_bytes <= 0) return false;
  unsigned long now[sizeof initial_mask / sizeof initial_mask[0]] = {};
  const long copied = syscall(SYS_sched_getaffinity, 0, sizeof now, now);
  if (copied == initial_mask_bytes &&
      std::memcmp(now, initial_mask, static_cast<std::size_t>(copied)) == 0) {
    return false;
  }
  // Fails only if the CPUs were taken away since (a cpuset changed): then the current mask is
  // the truth, and it stays.
  return syscall(SYS_sched_setaffinity, 0, initial_mask_bytes, initial_mask) == 0;
}

}  // namespace tfpin::cli

// Outside the namespace: the section entry must be an object the linker keeps.
extern "C" {
__attribute__((section(".preinit_array"),
               used)) static void (*const tfpin_capture_initial_affinity)(int, char**, char**) =
    tfpin::cli::capture_initial_affinity;
}
