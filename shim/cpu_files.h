// The plan's view of the files programs count CPUs from (lxcfs's idea, inside the process): with a
// plan active, /sys/devices/system/cpu/{online,present,offline}, the cpuN directories, the CPU
// lists and masks of topology, cache and NUMA node files, /proc/cpuinfo and /proc/stat's per-CPU
// lines show only the plan's CPUs, under their real ids (so sched_setaffinity with them works and
// sysfs, /proc/cpuinfo and the kernel keep agreeing). `possible` stays the machine's: it bounds
// CPU ids, and arrays indexed by them are sized from it. A CPU outside the plan looks offline:
// its cpuN/online reads "0" (lscpu and others read it for every possible CPU, and take a missing
// one, as cpu0's, for "online") and listings of /sys/devices/system/cpu leave its directory out
// (what sizers that count cpuN entries see); its other files stay readable, as access() and stat(),
// which the shim does not intercept, find them. Each open builds its view from the real file into
// a sealed memfd, reopened read-only: no malloc, no stdio, no lock, no temporary file.
#ifndef TFPIN_SHIM_CPU_FILES_H
#define TFPIN_SHIM_CPU_FILES_H

#include <stdbool.h>

#include "plan_parser.h"

#ifdef __cplusplus
extern "C" {
#endif

// cpu_view_open's "not a file of the view": the caller opens the real file. CPU_VIEW_FALLBACK: a
// file of the view whose view could not be built; the caller opens the real file too (and counts).
enum { CPU_VIEW_PASS = -2, CPU_VIEW_FALLBACK = -3 };

// For openat(dirfd, path, flags) (AT_FDCWD for open): a new read-only descriptor serving the view
// (with the caller's O_CLOEXEC and O_NONBLOCK), -1 with errno set, CPU_VIEW_PASS, or
// CPU_VIEW_FALLBACK. The path is matched as the kernel resolves it ("//", "..", links such as
// /proc/self/root); O_PATH opens always pass.
// The view is built from the files under `fsroot` ("" = this machine; like hwloc's HWLOC_FSROOT,
// a copy of another machine's /sys and /proc for tests).
int cpu_view_open(const shim_plan* plan, const char* fsroot, int dirfd, const char* path,
                  int flags);

// Whether a directory listing read through `dirfd` must skip entry `name`: the cpuN directories of
// CPUs outside the plan, listed by /sys/devices/system/cpu.
bool cpu_view_hides_entry(const shim_plan* plan, int dirfd, const char* name);

#ifdef __cplusplus
}
#endif

#endif  // TFPIN_SHIM_CPU_FILES_H
