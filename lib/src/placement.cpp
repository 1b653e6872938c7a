#include "tfpin/placement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"

namespace tfpin {
namespace {

// One slot a compute thread can occupy: a core (one_per_core) or a hardware thread (all).
struct Slot {
  unsigned pu;
  unsigned numa;
  std::size_t core;  // position of its core in the topology
};

// Slots of one NUMA node, in the topology's logical order.
struct Domain {
  unsigned numa = 0;
  unsigned package = 0;
  std::vector<Slot> slots;
  std::size_t next = 0;  // slots before this are taken
  unsigned lanes = 0;
  [[nodiscard]] std::size_t remaining() const { return slots.size() - next; }

  // Moves `count` slots to `out`. With `whole_cores`, the rest of the last core's hardware threads
  // are skipped, so that no other lane shares that core.
  void take(std::size_t count, bool whole_cores, std::vector<Slot>& out) {
    for (std::size_t i = 0; i < count; ++i) out.push_back(slots[next++]);
    if (whole_cores && count > 0) {
      while (next < slots.size() && slots[next].core == out.back().core) ++next;
    }
  }
};

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorKind::invalid_request, message);
}

// Multiples of `interop` up to `available`; with no bound, the first three.
std::string valid_multiples(unsigned interop, std::optional<unsigned> available) {
  if (!available) return fmt::format("{}, {}, {}, ...", interop, 2 * interop, 3 * interop);
  std::vector<unsigned> values;
  for (unsigned n = interop; n <= *available; n += interop) values.push_back(n);
  if (values.empty()) return "none";
  if (values.size() <= 6) return fmt::format("{}", fmt::join(values, ", "));
  return fmt::format("{}, {}, {}, ..., {}", values[0], values[1], values[2], values.back());
}

std::vector<Domain> collect_domains(const Topology& topology, HyperthreadPolicy hyperthreads,
                                    const std::set<unsigned>& allowed) {
  std::vector<Domain> domains;
  std::map<unsigned, std::size_t> by_numa;
  for (std::size_t position = 0; position < topology.cores().size(); ++position) {
    const Core& core = topology.cores()[position];
    std::vector<unsigned> pus;
    for (unsigned pu : core.pus) {
      if (allowed.contains(pu)) pus.push_back(pu);
    }
    if (pus.empty()) continue;
    // One thread per core: use the core's first allowed hardware thread, so a partially allowed
    // core (only its second sibling in the cpuset) still counts.
    // (erase, not resize(1): GCC 16 warns -Warray-bounds on resize's growing path, dead here.)
    if (hyperthreads == HyperthreadPolicy::one_per_core) pus.erase(pus.begin() + 1, pus.end());
    auto [it, inserted] = by_numa.try_emplace(core.numa, domains.size());
    if (inserted) domains.push_back(Domain{core.numa, core.package, {}, 0, 0});
    for (unsigned pu : pus) domains[it->second].slots.push_back({pu, core.numa, position});
  }
  return domains;
}

// The domain a fitting lane goes to: fewest lanes first (spread over nodes), then the package with
// fewest lanes (spread over sockets), then the most room left, then machine order.
Domain* pick_domain(std::vector<Domain>& domains, std::size_t lane_size) {
  std::map<unsigned, unsigned> lanes_per_package;
  for (const Domain& d : domains) lanes_per_package[d.package] += d.lanes;
  Domain* best = nullptr;
  auto key = [&](const Domain& d) {
    return std::make_tuple(d.lanes, lanes_per_package[d.package],
                           -static_cast<long>(d.remaining()));
  };
  for (Domain& d : domains) {
    if (d.remaining() < lane_size) continue;
    if (best == nullptr || key(d) < key(*best)) best = &d;
  }
  return best;
}

// No node has room for a whole lane, so it straddles; touch as few nodes as possible: take whole
// leftovers, largest first, and finish from the node whose leftover fits the rest most tightly.
std::vector<Slot> take_straddling(std::vector<Domain>& domains, std::size_t lane_size,
                                  bool whole_cores) {
  std::vector<Slot> slots;
  while (slots.size() < lane_size) {
    const std::size_t need = lane_size - slots.size();
    Domain* best_fit = nullptr;
    Domain* largest = nullptr;
    for (Domain& d : domains) {
      if (d.remaining() >= need && (best_fit == nullptr || d.remaining() < best_fit->remaining())) {
        best_fit = &d;
      }
      if (d.remaining() > 0 && (largest == nullptr || d.remaining() > largest->remaining())) {
        largest = &d;
      }
    }
    Domain& from = best_fit != nullptr ? *best_fit : *largest;  // callers checked total capacity
    from.take(std::min(need, from.remaining()), whole_cores, slots);
  }
  return slots;
}

Lane make_lane(const std::vector<Slot>& slots) {
  Lane lane;
  std::map<unsigned, unsigned> count;
  for (const Slot& slot : slots) {
    lane.cpus.push_back(slot.pu);
    if (count[slot.numa]++ == 0) lane.numa_nodes.push_back(slot.numa);
  }
  lane.numa = lane.numa_nodes.front();
  for (unsigned node : lane.numa_nodes) {
    if (count[node] > count[lane.numa]) lane.numa = node;
  }
  return lane;
}

// Lanes of `lane_size` slots, or nullopt when they do not all fit. With `whole_cores` lanes never
// share a core (hardware threads left over on a lane's last core stay idle).
std::optional<std::vector<Lane>> assign_lanes(std::vector<Domain> domains, unsigned interop,
                                              std::size_t lane_size, bool whole_cores) {
  std::vector<Lane> lanes;
  for (unsigned i = 0; i < interop; ++i) {
    std::size_t total = 0;
    for (const Domain& d : domains) total += d.remaining();
    if (total < lane_size) return std::nullopt;
    std::vector<Slot> slots;
    if (Domain* domain = pick_domain(domains, lane_size)) {
      domain->take(lane_size, whole_cores, slots);
      ++domain->lanes;
    } else {
      slots = take_straddling(domains, lane_size, whole_cores);
    }
    lanes.push_back(make_lane(slots));
  }
  return lanes;
}

}  // namespace

std::vector<unsigned> Plan::cpus() const {
  std::vector<unsigned> all;
  for (const Lane& lane : lanes) all.insert(all.end(), lane.cpus.begin(), lane.cpus.end());
  return all;
}

const char* to_string(HyperthreadPolicy policy) {
  return policy == HyperthreadPolicy::all ? "all" : "one-per-core";
}

const char* to_string(MemoryPolicyKind kind) {
  return kind == MemoryPolicyKind::preferred ? "preferred" : "local";
}

void check_multiple(const OptionNames& names, unsigned threads, unsigned interop,
                    std::optional<unsigned> available, std::string_view unit) {
  if (threads % interop == 0) return;
  invalid(
      fmt::format("{}={} is not a multiple of {}={}: every inter-op lane gets the same number "
                  "of {} (valid {} with {}={}: {})",
                  names.threads, threads, names.interop, interop, unit, names.threads,
                  names.interop, interop, valid_multiples(interop, available)));
}

Plan compute_plan(const Topology& topology, const PlacementRequest& request) {
  const OptionNames& names = request.names;
  Plan plan;
  plan.hyperthreads = request.hyperthreads;

  std::set<unsigned> online;
  for (const Core& core : topology.cores()) online.insert(core.pus.begin(), core.pus.end());
  std::set<unsigned> allowed;
  if (request.allowed) {
    std::vector<unsigned> ignored;
    for (unsigned cpu : *request.allowed) {
      if (online.contains(cpu)) {
        allowed.insert(cpu);
      } else {
        ignored.push_back(cpu);
      }
    }
    if (!ignored.empty()) {
      plan.warnings.push_back(
          fmt::format("CPUs {} of the allowed set are offline or not in the "
                      "topology; ignored",
                      format_cpulist(ignored)));
    }
    if (allowed.empty()) {
      const std::string online_list =
          format_cpulist(std::vector<unsigned>(online.begin(), online.end()));
      if (request.allowed_by_user) {
        // The only allowed set a user types is tfpin's --cpuset.
        invalid(
            fmt::format("--cpuset={}: the allowed CPU set contains no online CPU of this "
                        "topology (valid: CPUs within {})",
                        format_cpulist(*request.allowed), online_list));
      }
      throw Error(ErrorKind::topology,
                  fmt::format("hwloc and the kernel disagree: the CPUs this process may use ({}) "
                              "are not online in hwloc's topology (online: {})",
                              format_cpulist(*request.allowed), online_list));
    }
  } else {
    allowed = online;
  }
  plan.allowed.assign(allowed.begin(), allowed.end());

  std::vector<Domain> domains = collect_domains(topology, request.hyperthreads, allowed);
  unsigned available = 0;
  for (const Domain& d : domains) available += static_cast<unsigned>(d.slots.size());
  const char* unit = request.hyperthreads == HyperthreadPolicy::all ? "hardware threads" : "cores";

  unsigned interop = request.interop;
  if (request.interop_is_default) {
    while (interop > 1 &&
           (interop > available || (request.threads && *request.threads % interop != 0))) {
      --interop;
    }
  }
  if (interop == 0) {
    invalid(
        fmt::format("{}=0 is not valid: the number of inter-op lanes must be at least 1 "
                    "(valid: 1..{})",
                    names.interop, available));
  }
  // Arithmetic first: it is wrong on every machine, so say that rather than what this one lacks.
  unsigned threads = request.threads.value_or(interop);
  if (threads == 0) {
    invalid(fmt::format("{}=0 is not valid: use a positive multiple of {}={} up to {} (valid: {})",
                        names.threads, names.interop, interop, available,
                        valid_multiples(interop, available)));
  }
  check_multiple(names, threads, interop, available, unit);
  if (interop > available) {
    invalid(fmt::format(
        "{}={} needs at least {} {}, but only {} are allowed (CPUs {}); valid: 1..{}",
        names.interop, interop, interop, unit, available, format_cpulist(plan.allowed), available));
  }
  if (!request.threads) threads = available - available % interop;
  if (threads > available) {
    if (!request.clamp) {
      invalid(fmt::format("{}={} is more than the {} {} allowed (CPUs {}); valid with {}={}: {}",
                          names.threads, threads, available, unit, format_cpulist(plan.allowed),
                          names.interop, interop, valid_multiples(interop, available)));
    }
    const unsigned clamped = available - available % interop;
    plan.warnings.push_back(fmt::format("{}={} is more than the {} {} allowed; using {}",
                                        names.threads, threads, available, unit, clamped));
    threads = clamped;
  }

  plan.threads = threads;
  plan.interop = interop;
  plan.intra = threads / interop;

  // With hyperthreads, lanes get whole cores when there are enough; otherwise (e.g. every hardware
  // thread in lanes of odd size) they pack hardware threads. Without, every slot is a core anyway.
  auto lanes = assign_lanes(domains, interop, plan.intra, true);
  if (!lanes) lanes = assign_lanes(domains, interop, plan.intra, false);
  plan.lanes = std::move(*lanes);  // threads <= available: packing always fits

  std::vector<unsigned> beyond;
  for (unsigned cpu : plan.cpus()) {
    if (cpu > max_cpu_index) beyond.push_back(cpu);
  }
  if (!beyond.empty()) {
    std::sort(beyond.begin(), beyond.end());
    const std::string message = fmt::format(
        "{}={} would use CPUs {}, outside the CPU ids tfpin's shim can pin to "
        "(valid: allowed CPUs within 0-{})",
        names.threads, threads, format_cpulist(beyond), max_cpu_index);
    // Not the user's fault when the machine's CPUs are numbered beyond what tfpin can hold.
    if (request.allowed_by_user) invalid(message);
    throw Error(ErrorKind::topology, message);
  }

  std::set<unsigned> used_nodes;
  for (const Lane& lane : plan.lanes)
    used_nodes.insert(lane.numa_nodes.begin(), lane.numa_nodes.end());
  if (topology.numa_nodes().size() > 1 && used_nodes.size() == 1) {
    plan.memory = {MemoryPolicyKind::preferred, {*used_nodes.begin()}};
  } else {
    plan.memory = {MemoryPolicyKind::local, {used_nodes.begin(), used_nodes.end()}};
  }
  return plan;
}

}  // namespace tfpin
