// The node's topology cache file (lib/src/topology_cache.cpp), whose body the fuzzer writes and
// this target seals with a right checksum, so that the parser itself is reached: decode_topology
// refuses or returns a consistent machine, which encodes and decodes to the same machine and
// plans without crashing.
#include <set>

#include "fuzz_util.hpp"
#include "tfpin/error.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const std::string key = "format=1;boot=fuzz";
  std::string why;
  const std::optional<tfpin::Topology> machine =
      tfpin::decode_topology(tfpin::seal_topology_text(body), key, why);
  if (!machine) {
    FUZZ_CHECK(!why.empty() && why.size() < 256);
    return 0;
  }
  FUZZ_CHECK(!machine->cores().empty());
  std::set<unsigned> pus;
  for (const tfpin::Core& core : machine->cores()) {
    FUZZ_CHECK(!core.pus.empty() && core.package < machine->package_count());
    for (unsigned pu : core.pus) FUZZ_CHECK(pus.insert(pu).second);
  }
  const std::optional<tfpin::Topology> again =
      tfpin::decode_topology(tfpin::encode_topology(*machine, key), key, why);
  FUZZ_CHECK(again && again->cores().size() == machine->cores().size() &&
             again->numa_nodes().size() == machine->numa_nodes().size() &&
             again->package_count() == machine->package_count());
  for (std::size_t i = 0; i < machine->cores().size(); ++i) {
    FUZZ_CHECK(again->cores()[i].pus == machine->cores()[i].pus &&
               again->cores()[i].numa == machine->cores()[i].numa);
  }
  FUZZ_CHECK(
      !tfpin::decode_topology(tfpin::encode_topology(*machine, key), "format=1;boot=2", why));
  if (pus.size() <= 4096) {
    try {
      tfpin::PlacementRequest request;
      request.interop = 2;
      request.interop_is_default = true;
      (void)tfpin::compute_plan(*machine, request);
    } catch (const tfpin::Error&) {  // e.g. CPU ids beyond the shim's limit: refused, not crashed
    }
  }
  return 0;
}
