// The TFPIN_* hand-over (TFPIN_CPUS, TFPIN_INTEROP, TFPIN_INTRA as NUL-separated fields):
// decode_plan refuses with tfpin::Error or returns a consistent plan that encodes and decodes to
// itself.
#include <map>
#include <optional>

#include "fuzz_util.hpp"
#include "tfpin/environment.hpp"
#include "tfpin/error.hpp"

namespace {

tfpin::EnvGetter getter(const std::map<std::string, std::string>& env) {
  return [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> fields = split_fields(data, size, 3);
  std::map<std::string, std::string> env = {
      {"TFPIN_CPUS", fields[0]}, {"TFPIN_INTEROP", fields[1]}, {"TFPIN_INTRA", fields[2]}};
  std::optional<tfpin::Plan> plan;
  try {
    plan = tfpin::decode_plan(getter(env));
  } catch (const tfpin::Error& e) {
    FUZZ_CHECK(std::string_view(e.what()).size() < 1024);
    return 0;
  }
  FUZZ_CHECK(plan.has_value());
  FUZZ_CHECK(plan->lanes.size() == plan->interop);
  FUZZ_CHECK(plan->cpus().size() == static_cast<std::size_t>(plan->interop) * plan->intra);
  std::map<std::string, std::string> encoded;
  for (const tfpin::EnvVar& var : tfpin::encode_plan(*plan)) encoded[var.name] = var.value;
  const std::optional<tfpin::Plan> again = tfpin::decode_plan(getter(encoded));
  FUZZ_CHECK(again && again->cpus() == plan->cpus() && again->interop == plan->interop &&
             again->intra == plan->intra);
  return 0;
}
