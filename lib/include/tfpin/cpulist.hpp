// Linux cpulist text ("0-3,8,10-11"), kept in the order written: the plan uses the order to say which
// CPUs belong to which inter-op lane, so parsing never sorts.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tfpin {

// Largest CPU index accepted anywhere; far above any real machine, small enough to keep masks cheap.
inline constexpr unsigned max_cpu_index = 65535;

enum class Duplicates { reject, allow };

// Parses "0-3,8,10-11" into {0,1,2,3,8,10,11}. Ranges may also descend ("3-0"). Throws tfpin::Error
// naming `what` (e.g. "--cpuset") on malformed text, indices above max_cpu_index, or duplicates
// unless allowed (lists of NUMA nodes per lane repeat).
std::vector<unsigned> parse_cpulist(std::string_view text, std::string_view what = "cpulist",
                                    Duplicates duplicates = Duplicates::reject);

// Inverse of parse_cpulist: consecutive ascending runs of 3 or more become "a-b"; order is kept.
std::string format_cpulist(std::span<const unsigned> cpus);

}  // namespace tfpin
