// parse_cpulist on any bytes: either tfpin::Error, or distinct ids within the shim's limit that
// format_cpulist writes back as a list parsing to the same set.
#include <algorithm>
#include <set>

#include "fuzz_util.hpp"
#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/plan_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<unsigned> cpus;
  try {
    cpus = tfpin::parse_cpulist(text, "--cpuset");
  } catch (const tfpin::Error& e) {
    FUZZ_CHECK(std::string_view(e.what()).size() < 1024);  // echoed values are truncated
    return 0;
  }
  FUZZ_CHECK(!cpus.empty());
  FUZZ_CHECK(std::set<unsigned>(cpus.begin(), cpus.end()).size() == cpus.size());
  FUZZ_CHECK(*std::max_element(cpus.begin(), cpus.end()) < TFPIN_MAX_CPUS);
  std::vector<unsigned> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  std::vector<unsigned> again = tfpin::parse_cpulist(tfpin::format_cpulist(sorted));
  FUZZ_CHECK(again == sorted);
  return 0;
}
