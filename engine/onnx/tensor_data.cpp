// Initializer and Constant contents: float32 and int64 TensorProtos, inline (typed fields or
// raw_data, little-endian) or in an external data file next to the model. External files must stay
// inside the model's folder: a model is data, and must not read whatever file its author names.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "importer.hpp"
#include "tfpin/file_descriptor.hpp"

namespace tfpin::engine::onnx_import {

namespace fs = std::filesystem;

namespace {

// The largest tensor the importer reads (elements): far above any real network's weights, far
// below what a hostile dimension list could ask to allocate.
constexpr std::int64_t max_elements = std::int64_t{1} << 36;

[[noreturn]] void fail(const std::string& message) {
  throw ImportError(StatusCode::invalid_argument, message);
}



// `location` opened for reading beneath the model's folder, one component at a time from the
// folder's descriptor with O_NOFOLLOW: nothing swapped in while the model loads (a link to
// another file, a FIFO) is followed or waited on. Links are read and walked the same way: only
// relative ones that stay inside the folder. Hidden names (".ssh/id_rsa" for a model in a home
// folder) are refused: no exporter writes weights there, and a model is data from elsewhere.
FileDescriptor open_beneath(const std::string& model_dir, const std::string& location,
                            const std::string& what) {
  std::vector<FileDescriptor> chain;  // the folder, then each directory walked into
  chain.emplace_back(::open(model_dir.empty() ? "." : model_dir.c_str(),
                            O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (chain.back().get() < 0) {
    fail(fmt::format("{}: cannot open the model's folder: {}", what, std::strerror(errno)));
  }
  std::vector<std::string> todo;
  push_path_components(location, todo);
  int links = 0;
  while (!todo.empty()) {
    const std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      if (chain.size() == 1) {
        fail(fmt::format("{}: external data location '{}' leads outside the model's folder "
                         "through a link",
                         what, location));
      }
      chain.pop_back();
      continue;
    }
    if (part.front() == '.') {
      fail(fmt::format("{}: external data location '{}' names a hidden file or folder ('{}'); "
                       "tfpin reads no hidden file for a model",
                       what, location, part));
    }
    const int at = chain.back().get();
    struct stat st {};
    if (::fstatat(at, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      fail(fmt::format("{}: external data file '{}' cannot be opened: {}", what, location,
                       std::strerror(errno)));
    }
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlinkat(at, part.c_str(), target, sizeof target);
      if (++links > 40 || n <= 0 || static_cast<std::size_t>(n) == sizeof target) {
        fail(fmt::format("{}: external data location '{}': too many or too long links", what,
                         location));
      }
      const std::string_view to(target, static_cast<std::size_t>(n));
      if (to.front() == '/') {
        fail(fmt::format("{}: external data location '{}' goes through a link to {}: links are "
                         "followed only when relative and inside the model's folder",
                         what, location, to));
      }
      push_path_components(to, todo);
      continue;
    }
    if (todo.empty()) {
      // O_NONBLOCK: a FIFO swapped in after the check above is opened without waiting, then
      // refused by its type.
      FileDescriptor file(::openat(at, part.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (file.get() < 0 || ::fstat(file.get(), &st) != 0) {
        fail(fmt::format("{}: external data file '{}' cannot be opened: {}", what, location,
                         std::strerror(errno)));
      }
      if (!S_ISREG(st.st_mode)) {
        fail(fmt::format("{}: external data '{}' is not a regular file", what, location));
      }
      return file;
    }
    FileDescriptor next(::openat(at, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      fail(fmt::format("{}: external data file '{}' cannot be opened: {}", what, location,
                       std::strerror(errno)));
    }
    chain.push_back(std::move(next));
  }
  fail(fmt::format("{}: external data '{}' is not a regular file", what, location));
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
  if (location.find('\0') != std::string::npos) {
    // Shown whole: the message travels as a C string (what()), which would end at the NUL.
    std::string shown;
    for (const char c : location) shown += c == '\0' ? std::string("\\x00") : std::string(1, c);
    fail(fmt::format("{}: external data location '{}' holds a NUL byte", what, shown));
  }
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
  const FileDescriptor file = open_beneath(model_dir, location, what);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    fail(fmt::format("{}: external data '{}': {}", what, location, std::strerror(errno)));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t bytes = length.value_or(size >= offset ? size - offset : 0);
  if (bytes != expected_bytes) {
    fail(fmt::format("{}: external data holds {} bytes where its shape needs {}", what, bytes,
                     expected_bytes));
  }
  if (offset > size || bytes > size - offset) {
    fail(fmt::format("{}: external data [{}, +{}) is beyond the end of '{}' ({} bytes)", what,
                     offset, bytes, location, size));
  }
  // From the descriptor that was checked: what is read is what was opened.
  std::string data(bytes, '\0');
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(file.get(), data.data() + done, bytes - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(fmt::format("{}: reading external data '{}' failed", what, location));
    done += static_cast<std::uint64_t>(n);
  }
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
