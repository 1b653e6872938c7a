#include "tfpin/options.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdint>

#include "tfpin/error.hpp"

namespace tfpin {
namespace {

unsigned parse_bounded(std::string_view option, std::string_view text, unsigned min, unsigned max) {
  const auto range = fmt::format("expected a whole number from {} to {}", min, max);
  if (text.empty()) {
    throw Error(ErrorKind::invalid_request, fmt::format("{} needs a value: {}", option, range));
  }
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  const bool digits_only = std::isdigit(static_cast<unsigned char>(text.front())) != 0;
  if (!digits_only || ptr != end || (ec != std::errc{} && ec != std::errc::result_out_of_range)) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} is not a whole number: {}", option, shown_value(text), range));
  }
  if (ec == std::errc::result_out_of_range || value > max) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} is too large: {}", option, shown_value(text), range));
  }
  if (value < min) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} is too small: {}", option, shown_value(text), range));
  }
  return static_cast<unsigned>(value);
}

}  // namespace

unsigned parse_count(std::string_view option, std::string_view text, unsigned max) {
  return parse_bounded(option, text, 1, max);
}

unsigned parse_non_negative(std::string_view option, std::string_view text, unsigned max) {
  return parse_bounded(option, text, 0, max);
}

}  // namespace tfpin
