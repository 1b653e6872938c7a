// Placement policy: which cores each inter-op lane of a task uses, where its memory lives.
//
// Rules (docs/user-guide.md "What a task gets: placement"): threads N = interop M x intra; N must be a positive multiple of M
// that fits the allowed cores; a lane never straddles a NUMA node when it can fit in one; lanes are
// spread over NUMA nodes (then packages) before a node gets a second lane; cores inside a lane are
// compact in hwloc's logical order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/topology.hpp"

namespace tfpin {

enum class HyperthreadPolicy {
  one_per_core,  // one thread per physical core (KMP_HW_SUBSET=1T, --hint=nomultithread)
  all,           // every allowed hardware thread counts as a slot
};

// How the user spelled the two options, so errors name what they typed (--threads vs --tf-threads).
struct OptionNames {
  std::string threads = "--threads";
  std::string interop = "--interop";
};

struct PlacementRequest {
  std::optional<unsigned> threads;  // N; unset = one per usable core (or hardware thread)
  unsigned interop = 1;             // M
  HyperthreadPolicy hyperthreads = HyperthreadPolicy::one_per_core;
  std::optional<std::vector<unsigned>> allowed;  // OS PU indices; unset = every online PU
  // The allowed set is the user's (tfpin --cpuset) rather than the kernel's affinity (Slurm's, a
  // task's). An allowed set that does not fit the topology is then the user's error
  // (ErrorKind::invalid_request); otherwise hwloc and the kernel disagree (ErrorKind::topology),
  // which a site may tolerate (on_error=warn).
  bool allowed_by_user = false;
  bool clamp =
      false;  // N larger than what is allowed: shrink to fit (with a warning) instead of failing
  // M is a site default rather than the user's: it shrinks to the largest value that divides N and
  // fits the allowed cores instead of failing a request that never mentioned it.
  bool interop_is_default = false;
  OptionNames names;
};

enum class MemoryPolicyKind {
  local,      // first touch: the default, right when lanes sit on several nodes and touch their own
              // data
  preferred,  // the whole task sits on one node of a multi-node machine: allocate there, and spill
              // to other nodes (HBM, CXL, the other socket) rather than fail when it is full
};

struct MemoryPolicy {
  MemoryPolicyKind kind = MemoryPolicyKind::local;
  std::vector<unsigned> nodes;  // OS NUMA indices
};

struct Lane {
  std::vector<unsigned> cpus;        // OS PU indices, compact order
  unsigned numa = 0;                 // OS index of the node holding most of the lane's cpus
  std::vector<unsigned> numa_nodes;  // every node the lane touches (more than one = it straddles)
};

struct Plan {
  unsigned threads = 0;
  unsigned interop = 0;
  unsigned intra = 0;
  HyperthreadPolicy hyperthreads = HyperthreadPolicy::one_per_core;
  std::vector<Lane> lanes;
  MemoryPolicy memory;
  std::vector<unsigned> allowed;      // the usable allowed PUs the plan was computed from
  std::vector<std::string> warnings;  // clamping, ignored offline CPUs

  // All lanes' cpus, lane after lane (the order TFPIN_CPUS carries).
  [[nodiscard]] std::vector<unsigned> cpus() const;
};

// Throws tfpin::Error(invalid_request) with a message naming the option, the value and the valid
// choices when the request cannot be satisfied, or when the plan would use a CPU id the shim cannot
// take (TFPIN_MAX_CPUS).
Plan compute_plan(const Topology& topology, const PlacementRequest& request);

// Throws tfpin::Error(invalid_request) unless `threads` is a multiple of `interop` (>= 1):
// "--threads=3 is not a multiple of --interop=2: every inter-op lane gets the same number of cores
// (valid --threads with --interop=2: 2, 4, 6, ...)". The valid counts stop at `available` if known.
void check_multiple(const OptionNames& names, unsigned threads, unsigned interop,
                    std::optional<unsigned> available = std::nullopt,
                    std::string_view unit = "cores");

const char* to_string(HyperthreadPolicy policy);
const char* to_string(MemoryPolicyKind kind);

}  // namespace tfpin
