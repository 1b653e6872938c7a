// The CPUs tfpin was started with, before libgomp's initializer bound it (initial_affinity.cpp).
#pragma once

namespace tfpin::cli {

// Puts back the CPU mask the process had before any library initializer ran; true if it had
// been narrowed (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY) and is now restored.
bool restore_initial_affinity();

}  // namespace tfpin::cli
