// compute_plan on generated machines (packages x NUMA nodes x cores x hardware threads, some CPUs
// allowed) and requests: a refusal (tfpin::Error of the request's kind, or of the topology's when
// the allowed set is not the user's), or a plan whose lanes are M groups of N/M
// distinct allowed CPUs, one per core unless hyperthreads were asked for.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "fuzz_util.hpp"
#include "tfpin/error.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/plan_contract.h"
#include "tfpin/topology.hpp"

namespace {

std::map<std::string, tfpin::Topology>& machines() {
  static std::map<std::string, tfpin::Topology> cache;  // hwloc loads are the slow part
  return cache;
}

const tfpin::Topology& machine(unsigned packages, unsigned numa, unsigned cores, unsigned pus) {
  const std::string description =
      fmt::format("package:{} numa:{} core:{} pu:{}", packages, numa, cores, pus);
  auto it = machines().find(description);
  if (it == machines().end()) {
    it = machines().emplace(description, tfpin::Topology::synthetic(description)).first;
  }
  return it->second;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  const tfpin::Topology& topology =
      machine(1 + data[0] % 4, 1 + data[1] % 4, 1 + data[2] % 16, 1 + data[3] % 4);
  tfpin::PlacementRequest request;
  if (data[4] % 4 != 0) request.threads = data[4] % 80;
  request.interop = 1 + data[5] % 8;
  request.hyperthreads =
      data[6] % 2 == 0 ? tfpin::HyperthreadPolicy::one_per_core : tfpin::HyperthreadPolicy::all;
  request.clamp = (data[7] & 1) != 0;
  request.interop_is_default = (data[7] & 2) != 0;
  request.allowed_by_user = (data[7] & 4) != 0;
  if (size > 8) {  // the remaining bytes: a bitmap of allowed PUs
    std::vector<unsigned> allowed;
    for (std::size_t i = 8; i < size; ++i) {
      for (unsigned bit = 0; bit < 8; ++bit) {
        if ((data[i] >> bit) & 1u) allowed.push_back(static_cast<unsigned>((i - 8) * 8 + bit));
      }
    }
    request.allowed = allowed;
  }
  tfpin::Plan plan;
  try {
    plan = tfpin::compute_plan(topology, request);
  } catch (const tfpin::Error& e) {
    // The allowed set from the kernel not fitting hwloc's topology is the machine's fault; every
    // other refusal is the request's.
    FUZZ_CHECK(e.kind() == tfpin::ErrorKind::invalid_request ||
               (e.kind() == tfpin::ErrorKind::topology && !request.allowed_by_user));
    return 0;
  }
  FUZZ_CHECK(plan.interop >= 1 && plan.lanes.size() == plan.interop);
  FUZZ_CHECK(plan.threads == plan.interop * plan.intra);
  const std::vector<unsigned> cpus = plan.cpus();
  FUZZ_CHECK(cpus.size() == plan.threads);
  FUZZ_CHECK(std::set<unsigned>(cpus.begin(), cpus.end()).size() == cpus.size());
  for (const tfpin::Lane& lane : plan.lanes) FUZZ_CHECK(lane.cpus.size() == plan.intra);
  for (unsigned cpu : cpus) {
    FUZZ_CHECK(cpu < TFPIN_MAX_CPUS);
    FUZZ_CHECK(std::find(plan.allowed.begin(), plan.allowed.end(), cpu) != plan.allowed.end());
    if (request.allowed) {
      FUZZ_CHECK(std::find(request.allowed->begin(), request.allowed->end(), cpu) !=
                 request.allowed->end());
    }
  }
  if (request.hyperthreads == tfpin::HyperthreadPolicy::one_per_core) {
    std::set<unsigned> cores_used;
    for (const tfpin::Core& core : topology.cores()) {
      for (unsigned pu : core.pus) {
        if (std::find(cpus.begin(), cpus.end(), pu) != cpus.end()) {
          FUZZ_CHECK(cores_used.insert(core.index).second);  // one thread per core
        }
      }
    }
  }
  return 0;
}
