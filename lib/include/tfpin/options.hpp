// Parsing of user-typed counts, shared by `tfpin` and the SPANK plugin so both refuse the same
// values with the same words.
#pragma once

#include <string_view>

namespace tfpin {

// Upper bound for --threads / --interop before the topology is even looked at.
inline constexpr unsigned max_count = 65536;

// Parses a whole number in 1..max. Throws tfpin::Error(invalid_request) naming `option` and `text`:
// "--tf-threads=abc is not a whole number: expected 1..65536".
unsigned parse_count(std::string_view option, std::string_view text, unsigned max = max_count);

// Like parse_count, but 0 is accepted (blocktime and similar).
unsigned parse_non_negative(std::string_view option, std::string_view text, unsigned max);

}  // namespace tfpin
