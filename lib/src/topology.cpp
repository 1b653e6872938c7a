#include "tfpin/topology.hpp"

#include <fmt/format.h>
#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "tfpin/error.hpp"

namespace tfpin {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using BitmapHandle = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorKind::topology, what); }

TopologyHandle make_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) fail("hwloc_topology_init failed");
  TopologyHandle topo(raw);
  // Placement decides from the whole machine; the allowed set is applied separately, so a cgroup
  // (Slurm's task cpuset) must not hide cores from the description.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  // Placement reads packages, cores, hardware threads and NUMA nodes only: caches, I/O devices
  // and misc objects are not discovered (a one-off measurement of a live load of a 2-core host:
  // 1.2-1.6 ms -> 1.0 ms; logical core order does not depend on them).
  hwloc_topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
  return topo;
}

// High-bandwidth memory (KNL MCDRAM, HBM) is never a core's "local" default node.
bool is_special_memory(hwloc_obj_t numa) {
  return numa->subtype != nullptr &&
         (std::strcmp(numa->subtype, "MCDRAM") == 0 || std::strcmp(numa->subtype, "HBM") == 0);
}

unsigned local_numa_of(hwloc_topology_t topo, hwloc_obj_t core) {
  hwloc_obj_t fallback = nullptr;
  for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
       numa != nullptr; numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, numa)) {
    if (!hwloc_bitmap_isincluded(core->cpuset, numa->cpuset)) continue;
    if (!is_special_memory(numa)) return numa->os_index;
    if (fallback == nullptr) fallback = numa;
  }
  return fallback != nullptr ? fallback->os_index : 0;
}

// Linear in PUs: one pass over the cores, one over the PUs (a per-core search of its PUs is
// quadratic, minutes on a synthetic 64x64x16 machine).
Topology from_hwloc(hwloc_topology_t topo, std::string source) {
  hwloc_const_bitmap_t online = hwloc_topology_get_topology_cpuset(topo);
  const int core_count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  // Some machines (and VMs) report no cores; each PU is then its own core.
  const hwloc_obj_type_t unit = core_count > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  std::vector<Core> all_cores(static_cast<std::size_t>(hwloc_get_nbobjs_by_type(topo, unit)));
  for (hwloc_obj_t obj = hwloc_get_next_obj_by_type(topo, unit, nullptr); obj != nullptr;
       obj = hwloc_get_next_obj_by_type(topo, unit, obj)) {
    Core& core = all_cores.at(obj->logical_index);
    core.index = obj->logical_index;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
    core.package = package != nullptr ? package->logical_index : 0;
    core.numa = local_numa_of(topo, obj);
  }
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) {
    if (!hwloc_bitmap_isset(online, pu->os_index)) continue;
    hwloc_obj_t owner = unit == HWLOC_OBJ_PU ? pu : hwloc_get_ancestor_obj_by_type(topo, unit, pu);
    if (owner == nullptr) continue;  // a PU outside any core: not schedulable as one
    all_cores.at(owner->logical_index).pus.push_back(pu->os_index);
  }
  std::vector<Core> cores;
  for (Core& core : all_cores) {
    if (!core.pus.empty()) cores.push_back(std::move(core));
  }
  if (cores.empty()) fail(fmt::format("{}: the topology has no online processing units", source));

  std::vector<NumaNode> numa_nodes;
  for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
       numa != nullptr; numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, numa)) {
    numa_nodes.push_back(
        {numa->os_index, numa->attr != nullptr ? numa->attr->numanode.local_memory : 0});
  }
  const int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  return Topology(std::move(cores), std::move(numa_nodes), packages > 0 ? unsigned(packages) : 1U,
                  std::move(source));
}

// Processing units of a synthetic description, and the work hwloc needs to build it: each object is
// inserted among its siblings by comparing CPU sets, about objects x siblings x CPU-set words steps
// per level. "core:8192 pu:1" takes 20 s, "package:16 core:4096 pu:1" more than 2 minutes, and
// "core:99999999" never ends, so such descriptions are refused before hwloc sees them. An estimate:
// only "type:N" and "N" levels count; attributes and attached memory ("[numa]") are skipped.
struct SyntheticSize {
  double pus = 1;
  double work = 0;
};

SyntheticSize synthetic_size(std::string_view description) {
  std::vector<double> arities;
  int brackets = 0;
  std::size_t pos = 0;
  while (pos < description.size()) {
    const std::size_t start = description.find_first_not_of(" \t\n", pos);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(description.find_first_of(" \t\n", start), description.size());
    std::string_view token = description.substr(start, end - start);
    pos = end;
    const bool skipped = brackets > 0 || token.front() == '[' || token.front() == '(';
    for (char c : token) brackets += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (skipped) continue;
    token = token.substr(0, token.find('('));
    if (const auto colon = token.rfind(':'); colon != std::string_view::npos) {
      token.remove_prefix(colon + 1);
    }
    if (token.empty() || token.find_first_not_of("0123456789") != std::string_view::npos) continue;
    double arity = 0;
    for (char c : token) arity = arity * 10 + (c - '0');
    arities.push_back(arity);
  }
  SyntheticSize size;
  for (double arity : arities) size.pus *= arity;
  const double words = std::max(1.0, size.pus / 64);
  double objects = 1;
  for (double arity : arities) {
    objects *= arity;
    size.work += objects * arity * words;
  }
  return size;
}

// What this file loads in a few seconds (package:64 numa:1 core:64 pu:16 is 1.3e9).
constexpr double max_synthetic_pus = 65536;
constexpr double max_synthetic_work = 4e9;

}  // namespace

Topology::Topology(std::vector<Core> cores, std::vector<NumaNode> numa_nodes,
                   unsigned package_count, std::string source)
    : cores_(std::move(cores)),
      numa_nodes_(std::move(numa_nodes)),
      package_count_(package_count == 0 ? 1 : package_count),
      source_(std::move(source)) {
  if (numa_nodes_.empty()) numa_nodes_.push_back({0, 0});
}

std::size_t Topology::pu_count() const {
  std::size_t n = 0;
  for (const auto& core : cores_) n += core.pus.size();
  return n;
}

Topology Topology::host() {
  TopologyHandle topo = make_topology();
  if (hwloc_topology_load(topo.get()) != 0) {
    fail(fmt::format("hwloc could not load this machine's topology: {}", std::strerror(errno)));
  }
  return from_hwloc(topo.get(), "host");
}

Topology Topology::synthetic(const std::string& description) {
  TopologyHandle topo = make_topology();
  if (hwloc_topology_set_synthetic(topo.get(), description.c_str()) != 0) {
    fail(fmt::format(
        "--topology '{}' is neither an existing XML file nor a valid hwloc synthetic description "
        "(example: \"package:2 numa:1 core:18 pu:2\")",
        shown_value(description)));
  }
  if (const SyntheticSize size = synthetic_size(description);
      size.pus > max_synthetic_pus || size.work > max_synthetic_work) {
    fail(fmt::format(
        "--topology '{}' describes {:.0f} processing units{}: more than hwloc builds in a few "
        "seconds (valid: at most {:.0f} processing units, spread over levels, e.g. \"package:64 "
        "numa:1 core:64 pu:16\")",
        shown_value(description), size.pus,
        size.pus > max_synthetic_pus ? "" : " in too wide a level", max_synthetic_pus));
  }
  if (hwloc_topology_load(topo.get()) != 0) {
    fail(fmt::format("hwloc could not load synthetic topology '{}'", shown_value(description)));
  }
  Topology result = from_hwloc(topo.get(), "synthetic:" + description);
  result.synthetic_ = description;
  return result;
}

Topology Topology::xml_file(const std::string& path) {
  TopologyHandle topo = make_topology();
  if (hwloc_topology_set_xml(topo.get(), path.c_str()) != 0 ||
      hwloc_topology_load(topo.get()) != 0) {
    fail(fmt::format(
        "--topology '{}': not a readable hwloc XML topology (lstopo --of xml makes one)",
        shown_value(path)));
  }
  return from_hwloc(topo.get(), "xml:" + path);
}

Topology Topology::load(std::string_view spec) {
  if (spec.empty() || spec == "host") return host();
  const std::string text(spec);
  std::error_code ec;
  if (std::filesystem::is_regular_file(text, ec)) return xml_file(text);
  return synthetic(text);
}

std::vector<unsigned> current_affinity() {
  // Sized dynamically: machines with more than CPU_SETSIZE (1024) CPUs exist.
  for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    const std::size_t size = CPU_ALLOC_SIZE(ncpus);
    if (sched_getaffinity(0, size, set) == 0) {
      std::vector<unsigned> cpus;
      for (int cpu = 0; cpu < ncpus; ++cpu) {
        if (CPU_ISSET_S(cpu, size, set)) cpus.push_back(unsigned(cpu));
      }
      CPU_FREE(set);
      return cpus;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) {
      throw Error(ErrorKind::system,
                  fmt::format("sched_getaffinity failed: {}", std::strerror(err)));
    }
  }
  throw Error(ErrorKind::system, "sched_getaffinity failed: CPU mask too large");
}

}  // namespace tfpin
