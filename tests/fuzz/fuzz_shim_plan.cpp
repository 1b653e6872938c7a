// The shim's own plan parser (shim/plan_parser.c, C without malloc) against lib's decode_plan,
// which writes and reads the same hand-over: for TFPIN_CPUS, TFPIN_INTEROP and TFPIN_INTRA as
// NUL-separated fields, both accept or both refuse, and an accepted plan is the same plan (CPU
// order, lanes) with a mask that holds exactly its CPUs. A disagreement is a plan tfpin hands over
// that the shim silently ignores, or one the shim enforces that tfpin would refuse.
#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "fuzz_util.hpp"
#include "plan_parser.h"
#include "tfpin/environment.hpp"
#include "tfpin/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> fields = split_fields(data, size, 3);
  // An empty field stands for an unset variable, so both "missing" paths are reached.
  auto value = [&](std::size_t i) { return fields[i].empty() ? nullptr : fields[i].c_str(); };

  auto shim = std::make_unique<shim_plan>();  // 8 KB of CPU ids: off the fuzzer's stack
  const char* why = shim_parse_plan(value(0), value(1), value(2), shim.get());

  std::map<std::string, std::string> env;
  const char* names[] = {"TFPIN_CPUS", "TFPIN_INTEROP", "TFPIN_INTRA"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (value(i) != nullptr) env[names[i]] = fields[i];
  }
  std::optional<tfpin::Plan> lib;
  try {
    lib = tfpin::decode_plan([&env](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      return it == env.end() ? std::nullopt : std::optional(it->second);
    });
  } catch (const tfpin::Error&) {
    lib.reset();
  }

  FUZZ_CHECK((why == nullptr) == lib.has_value());
  if (why != nullptr) {
    FUZZ_CHECK(std::string_view(why).size() < 128);  // one short line in the shim's report
    return 0;
  }
  FUZZ_CHECK(shim->ncpus == shim->interop * shim->intra);
  FUZZ_CHECK(lib->interop == shim->interop && lib->intra == shim->intra);
  const std::vector<unsigned> cpus = lib->cpus();
  FUZZ_CHECK(cpus.size() == shim->ncpus);
  unsigned highest = 0;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    FUZZ_CHECK(shim->cpus[i] == cpus[i]);
    FUZZ_CHECK(cpus[i] < TFPIN_MAX_CPUS && mask_has(&shim->mask, cpus[i]));
    highest = std::max(highest, cpus[i]);
  }
  FUZZ_CHECK(shim->max_cpu == highest);
  std::size_t in_mask = 0;
  for (std::uint64_t word : shim->mask.w) in_mask += static_cast<std::size_t>(std::popcount(word));
  FUZZ_CHECK(in_mask == cpus.size());  // distinct CPUs, nothing else set
  return 0;
}
