// The option value parsers: a value within the bounds asked for, or tfpin::Error naming the option.
#include "fuzz_util.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> fields = split_fields(data, size, 2);
  const unsigned max = fields[1].empty() ? tfpin::max_count
                                         : static_cast<unsigned>(fields[1].size() * 37 + 1);
  try {
    const unsigned n = tfpin::parse_count("--tf-threads", fields[0], max);
    FUZZ_CHECK(n >= 1 && n <= max);
  } catch (const tfpin::Error& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with("--tf-threads"));
    FUZZ_CHECK(std::string_view(e.what()).find('\n') == std::string_view::npos);
  }
  try {
    const unsigned n = tfpin::parse_non_negative("--blocktime", fields[0], max);
    FUZZ_CHECK(n <= max);
  } catch (const tfpin::Error& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with("--blocktime"));
  }
  return 0;
}
