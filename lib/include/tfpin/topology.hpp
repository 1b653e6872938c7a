// The machine as placement sees it: cores in hwloc's logical (locality) order, each with its online
// hardware threads and the NUMA node whose memory is local to it. Loaded once from hwloc, then plain
// data, so placement is testable on any machine description.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfpin {

struct Core {
  unsigned index = 0;         // hwloc logical index: neighbours in this order share caches
  unsigned package = 0;       // logical index of the package (socket)
  unsigned numa = 0;          // OS index of the local NUMA node
  std::vector<unsigned> pus;  // OS indices of the online hardware threads, logical order
};

struct NumaNode {
  unsigned os_index = 0;
  std::uint64_t local_memory = 0;  // bytes
};

class Topology {
 public:
  // "host" or "" = this machine; a path to an existing file = hwloc XML; anything else = an hwloc
  // synthetic description such as "package:2 numa:1 core:18 pu:2". Throws tfpin::Error.
  static Topology load(std::string_view spec);
  static Topology host();
  static Topology synthetic(const std::string& description);
  static Topology xml_file(const std::string& path);

  [[nodiscard]] const std::vector<Core>& cores() const { return cores_; }
  [[nodiscard]] const std::vector<NumaNode>& numa_nodes() const { return numa_nodes_; }
  [[nodiscard]] unsigned package_count() const { return package_count_; }
  [[nodiscard]] std::size_t pu_count() const;
  // Where the description came from, for messages and `tfpin show`.
  [[nodiscard]] const std::string& source() const { return source_; }
  // The description in hwloc's synthetic syntax when it can be expressed so, else empty.
  [[nodiscard]] const std::string& synthetic_description() const { return synthetic_; }

  // Builds a topology from plain data (tests, and callers that already know the machine).
  Topology(std::vector<Core> cores, std::vector<NumaNode> numa_nodes, unsigned package_count,
           std::string source);

 private:
  std::vector<Core> cores_;
  std::vector<NumaNode> numa_nodes_;
  unsigned package_count_ = 1;
  std::string source_;
  std::string synthetic_;
};

// The calling process's CPU affinity (OS indices, ascending). Throws tfpin::Error on failure.
std::vector<unsigned> current_affinity();

}  // namespace tfpin
