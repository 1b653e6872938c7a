#include "tfpin/cpulist.hpp"

#include <fmt/format.h>

#include <charconv>
#include <unordered_set>

#include "tfpin/error.hpp"

namespace tfpin {
namespace {

unsigned parse_index(std::string_view token, std::string_view text, std::string_view what) {
  unsigned value = 0;
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, value);
  if (token.empty() || ec != std::errc{} || ptr != end) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}='{}': '{}' is not a CPU index; expected a list like 0-3,8,10-11",
                            what, shown_value(text), shown_value(token)));
  }
  if (value > max_cpu_index) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={}: CPU {} is outside the CPU ids tfpin's shim can pin to (valid: "
                            "0..{})",
                            what, shown_value(text), value, max_cpu_index));
  }
  return value;
}

}  // namespace

std::vector<unsigned> parse_cpulist(std::string_view text, std::string_view what) {
  std::vector<unsigned> cpus;
  std::unordered_set<unsigned> seen;
  if (text.empty()) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{} is empty; expected a list like 0-3,8,10-11", what));
  }
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto dash = item.find('-');
    const unsigned first = parse_index(item.substr(0, dash), text, what);
    const unsigned last =
        dash == std::string_view::npos ? first : parse_index(item.substr(dash + 1), text, what);
    const int step = last >= first ? 1 : -1;
    for (long cpu = first;; cpu += step) {
      if (!seen.insert(static_cast<unsigned>(cpu)).second) {
        throw Error(ErrorKind::invalid_request,
                    fmt::format("{}='{}': CPU {} is listed twice; expected each CPU once, in a "
                                "list like 0-3,8,10-11",
                                what, shown_value(text), cpu));
      }
      cpus.push_back(static_cast<unsigned>(cpu));
      if (cpu == static_cast<long>(last)) break;
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return cpus;
}

std::string format_cpulist(std::span<const unsigned> cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += fmt::format("{}-{}", cpus[i], cpus[j]);
      i = j + 1;
    } else {
      out += fmt::format("{}", cpus[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace tfpin
