// Linux cpulist text ("0-3,8,10-11"), kept in the order written: the plan uses the order to say which
// CPUs belong to which inter-op lane, so parsing never sorts.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/plan_contract.h"

namespace tfpin {

// Largest CPU index accepted anywhere: the shim's (tfpin/plan_contract.h), so that no plan names a
// CPU it cannot take.
inline constexpr unsigned max_cpu_index = TFPIN_MAX_CPUS - 1;

// Parses "0-3,8,10-11" into {0,1,2,3,8,10,11}. Ranges may also descend ("3-0"). Throws tfpin::Error
// naming `what` (e.g. "--cpuset") on malformed text, indices above max_cpu_index, or duplicates.
std::vector<unsigned> parse_cpulist(std::string_view text, std::string_view what = "cpulist");

// Inverse of parse_cpulist: consecutive ascending runs of 3 or more become "a-b"; order is kept.
std::string format_cpulist(std::span<const unsigned> cpus);

}  // namespace tfpin
