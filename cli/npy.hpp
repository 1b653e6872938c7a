// NumPy .npy files (format 1.0-3.0), C order: what `tfpin infer` reads (float32; int64 and bool
// for inputs that are shapes, axes or flags) and writes (float32). Every refusal names the file and what it holds ("x.npy: dtype '<f8' (float64); ...").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/engine/onnx.hpp"

namespace tfpin::cli {

// Parses a whole .npy file's bytes; `what` (the file name) prefixes errors.
// Throws tfpin::Error(invalid_request).
engine::HostTensor parse_npy(std::string_view bytes, const std::string& what);
engine::HostTensor read_npy(const std::string& path);

// A float32 array's whole file (written by infer through OutputFiles).
std::string format_npy(const std::vector<std::int64_t>& dims, const float* data);

}  // namespace tfpin::cli
