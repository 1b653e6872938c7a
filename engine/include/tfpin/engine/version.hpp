// Which oneDNN the engine was compiled against and which one it runs with (the shared library
// can be another patch release than the headers).
#pragma once

#include <string>

namespace tfpin::engine {

struct LibraryVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string runtime;  // oneDNN's CPU threading runtime: "OpenMP", "TBB", "sequential", ...
  [[nodiscard]] std::string text() const;  // "3.7.2"
};

// The oneDNN library loaded into this process (dnnl_version()).
LibraryVersion onednn_runtime_version();
// The oneDNN headers the engine was built with.
LibraryVersion onednn_build_version();
// Does this oneDNN offer a Winograd f32 convolution on this CPU (a 3x3 stride-1 layer, batch 4)?
// oneDNN 2.x has one for AVX-512; 3.x no longer does, so CompileOptions::winograd then changes
// nothing.
bool onednn_offers_winograd();
// The vector ISA family oneDNN runs its kernels with in this process: the CPU's, lowered by
// DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA. "avx512_core" (any AVX-512 server ISA), "avx2", "avx",
// "sse41" or "other". tfpin's own kernels and its layout choice follow it.
std::string onednn_effective_isa();
// Empty when the loaded oneDNN can run on this CPU, else why not (Runtime::create refuses with it).
// oneDNN 3.2 and later size their kernels from the caches an AMD CPU describes in CPUID leaf
// 0x8000001D, with no fallback: where a hypervisor zeroes that leaf (seen on a Firecracker VM of an
// AMD EPYC) every cache reads as 1 byte, and kernels then divide by zero (SIGFPE) or compute wrong
// results. oneDNN 2.x guesses cache sizes there instead and runs.
std::string onednn_unusable_reason();

}  // namespace tfpin::engine
