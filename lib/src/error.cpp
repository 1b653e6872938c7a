#include "tfpin/error.hpp"

#include <fmt/format.h>

namespace tfpin {

std::string shown_value(std::string_view value, std::size_t max_bytes) {
  std::string out;
  const std::size_t shown = value.size() <= max_bytes ? value.size() : max_bytes;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < value.size()) out += fmt::format("...({} bytes)", value.size());
  return out;
}

}  // namespace tfpin
