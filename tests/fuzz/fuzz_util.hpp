// Shared by the fuzz targets: an invariant that does not hold aborts (libFuzzer reports it with the
// input), and inputs are split into fields at NUL bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                \
      std::abort();                                                          \
    }                                                                        \
  } while (false)

inline std::vector<std::string> split_fields(const std::uint8_t* data, std::size_t size,
                                             std::size_t count) {
  std::vector<std::string> fields(count);
  std::size_t field = 0;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      if (++field == count) break;
      continue;
    }
    fields[field] += static_cast<char>(data[i]);
  }
  return fields;
}
