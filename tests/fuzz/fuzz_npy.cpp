// The .npy reader of `tfpin infer --input` (cli/npy.cpp): parse_npy returns an array whose values
// fill its shape exactly, or throws tfpin::Error(invalid_request) with one printable line that
// names the file. A float32 array written back by format_npy reads back the same, bit for bit.
#include <cstring>

#include "fuzz_util.hpp"
#include "npy.hpp"
#include "tfpin/error.hpp"

namespace {

bool printable_line(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tfpin::engine::HostTensor tensor;
  try {
    tensor = tfpin::cli::parse_npy(bytes, "fuzz.npy");
  } catch (const tfpin::Error& e) {
    const std::string_view message(e.what());
    FUZZ_CHECK(e.kind() == tfpin::ErrorKind::invalid_request);
    FUZZ_CHECK(message.starts_with("fuzz.npy: "));
    FUZZ_CHECK(printable_line(message));
    FUZZ_CHECK(message.size() < 2048);
    return 0;
  }
  std::int64_t elements = 1;
  for (const std::int64_t d : tensor.dims) {
    FUZZ_CHECK(d >= 0);
    FUZZ_CHECK(d == 0 || elements <= (std::int64_t{1} << 34) / d);
    elements *= d;
  }
  // The data follows the header and fills the shape: never more values than the input's bytes.
  if (tensor.integer) {
    FUZZ_CHECK(tensor.data.empty());
    FUZZ_CHECK(static_cast<std::int64_t>(tensor.ints.size()) == elements);
    FUZZ_CHECK(tensor.ints.size() <= size);
    return 0;
  }
  FUZZ_CHECK(tensor.ints.empty());
  FUZZ_CHECK(static_cast<std::int64_t>(tensor.data.size()) == elements);
  FUZZ_CHECK(tensor.data.size() * sizeof(float) <= size);
  // What tfpin writes, it reads back unchanged (NaN payloads included).
  const std::string written = tfpin::cli::format_npy(tensor.dims, tensor.data.data());
  const tfpin::engine::HostTensor again = tfpin::cli::parse_npy(written, "written.npy");
  FUZZ_CHECK(!again.integer);
  FUZZ_CHECK(again.dims == tensor.dims);
  FUZZ_CHECK(again.data.size() == tensor.data.size());
  FUZZ_CHECK(tensor.data.empty() || std::memcmp(again.data.data(), tensor.data.data(),
                                                tensor.data.size() * sizeof(float)) == 0);
  return 0;
}
