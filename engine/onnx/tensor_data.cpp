// Initializer and Constant contents: float32 and int64 TensorProtos, inline (typed fields or
// raw_data, little-endian) or in an external data file next to the model. External files must stay
// inside the model's folder: a model is data, and must not read whatever file its author names.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "importer.hpp"

namespace tfpin::engine::onnx_import {

namespace fs = std::filesystem;

namespace {

// The largest tensor the importer reads (elements): far above any real network's weights, far
// below what a hostile dimension list could ask to allocate.
constexpr std::int64_t max_elements = std::int64_t{1} << 36;

[[noreturn]] void fail(const std::string& message) {
  throw ImportError(StatusCode::invalid_argument, message);
}

// The external file's bytes [offset, offset + length) for `what`.
std::string read_external(const onnx::TensorProto& tensor, const std::string& model_dir,
                          const std::string& what, std::uint64_t expected_bytes) {
  std::string location;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;
  for (const auto& entry : tensor.external_data()) {
    const auto number = [&](const std::string& text) {
      std::uint64_t n = 0;
      const auto* end = text.data() + text.size();
      const auto [ptr, ec] = std::from_chars(text.data(), end, n);
      if (ec != std::errc() || ptr != end || text.empty()) {
        fail(fmt::format("{}: external data {}='{}' is not a byte count", what, entry.key(), text));
      }
      return n;
    };
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      offset = number(entry.value());
    } else if (entry.key() == "length") {
      length = number(entry.value());
    }
  }
  if (location.empty()) fail(fmt::format("{}: external data without a location", what));
  const fs::path relative(location);
  if (relative.is_absolute()) {
    fail(fmt::format("{}: external data location '{}' is absolute; it must be a file inside the "
                     "model's folder",
                     what, location));
  }
  for (const fs::path& part : relative) {
    if (part == "..") {
      fail(fmt::format("{}: external data location '{}' leaves the model's folder", what,
                       location));
    }
  }
  std::error_code ec;
  const fs::path folder = fs::canonical(model_dir.empty() ? "." : model_dir, ec);
  if (ec) fail(fmt::format("{}: cannot resolve the model's folder: {}", what, ec.message()));
  const fs::path file = fs::canonical(folder / relative, ec);
  if (ec) {
    fail(fmt::format("{}: external data file '{}' cannot be opened: {}", what, location,
                     ec.message()));
  }
  // A symbolic link may not lead outside either.
  const auto [folder_end, file_it] = std::mismatch(folder.begin(), folder.end(), file.begin(),
                                                   file.end());
  (void)file_it;
  if (folder_end != folder.end()) {
    fail(fmt::format("{}: external data location '{}' resolves to {}, outside the model's folder",
                     what, location, file.string()));
  }
  if (!fs::is_regular_file(file, ec)) {
    fail(fmt::format("{}: external data '{}' is not a regular file", what, location));
  }
  const std::uint64_t size = fs::file_size(file, ec);
  if (ec) fail(fmt::format("{}: external data '{}': {}", what, location, ec.message()));
  const std::uint64_t bytes = length.value_or(size >= offset ? size - offset : 0);
  if (bytes != expected_bytes) {
    fail(fmt::format("{}: external data holds {} bytes where its shape needs {}", what, bytes,
                     expected_bytes));
  }
  if (offset > size || bytes > size - offset) {
    fail(fmt::format("{}: external data [{}, +{}) is beyond the end of '{}' ({} bytes)", what,
                     offset, bytes, location, size));
  }
  std::ifstream in(file, std::ios::binary);
  std::string data(bytes, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(bytes));
  if (!in) fail(fmt::format("{}: reading external data '{}' failed", what, location));
  return data;
}

template <typename T>
std::vector<T> from_bytes(const std::string& bytes) {
  static_assert(std::endian::native == std::endian::little, "ONNX raw data is little-endian");
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

// Without descriptors: Debian unstable's libonnx is built on protobuf-lite, which has none.
std::string data_type_name(int type) {
  if (!onnx::TensorProto_DataType_IsValid(type)) return fmt::format("data type {}", type);
  return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type));
}

std::int64_t ConstantData::elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::string dims_text(const Dims& dims) {
  if (dims.empty()) return "scalar";
  return fmt::format("{}", fmt::join(dims, "x"));
}

std::int64_t checked_elements(const Dims& dims, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) fail(fmt::format("{}: dimension {} is negative ({})", what, d, dims_text(dims)));
    if (d != 0 && n > max_elements / d) {
      fail(fmt::format("{}: shape {} has more than 2^36 elements", what, dims_text(dims)));
    }
    n *= d;
  }
  return n;
}

ConstantData read_tensor(const onnx::TensorProto& tensor, const std::string& model_dir,
                         const std::string& what) {
  ConstantData out;
  out.dims.assign(tensor.dims().begin(), tensor.dims().end());
  const std::int64_t n = checked_elements(out.dims, what);
  if (tensor.has_segment()) fail(fmt::format("{}: segmented tensors are not supported", what));
  const int type = tensor.data_type();
  const bool is_bool = type == onnx::TensorProto::BOOL;  // flags such as Dropout's training_mode
  if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::INT64 && !is_bool) {
    throw ImportError(StatusCode::unsupported,
                      fmt::format("{} is {}; the engine computes in float32 (int64 only for "
                                  "shapes, axes and pads)",
                                  what, data_type_name(type)));
  }
  out.is_int = type == onnx::TensorProto::INT64 || is_bool;
  const std::uint64_t element_bytes = is_bool ? 1 : out.is_int ? 8 : 4;
  const auto expected = static_cast<std::uint64_t>(n) * element_bytes;
  const bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  std::int64_t got = 0;
  if (external || tensor.has_raw_data()) {
    const std::string bytes =
        external ? read_external(tensor, model_dir, what, expected) : tensor.raw_data();
    if (bytes.size() != expected) {
      fail(fmt::format("{}: raw data holds {} bytes where shape {} needs {}", what, bytes.size(),
                       dims_text(out.dims), expected));
    }
    if (is_bool) {
      out.ints.assign(bytes.begin(), bytes.end());
    } else if (out.is_int) {
      out.ints = from_bytes<std::int64_t>(bytes);
    } else {
      out.floats = from_bytes<float>(bytes);
    }
    return out;
  }
  if (is_bool) {
    out.ints.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    got = static_cast<std::int64_t>(out.ints.size());
  } else if (out.is_int) {
    out.ints.assign(tensor.int64_data().begin(), tensor.int64_data().end());
    got = static_cast<std::int64_t>(out.ints.size());
  } else {
    out.floats.assign(tensor.float_data().begin(), tensor.float_data().end());
    got = static_cast<std::int64_t>(out.floats.size());
  }
  if (got != n) {
    fail(fmt::format("{}: holds {} values where shape {} needs {}", what, got,
                     dims_text(out.dims), n));
  }
  return out;
}

}  // namespace tfpin::engine::onnx_import
