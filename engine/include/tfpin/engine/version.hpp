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

}  // namespace tfpin::engine
