// The host's topology loaded once per node rather than once per task: the plain data placement
// needs (cores, their hardware threads, NUMA nodes, packages), kept in a small text file that the
// node's job steps read instead of asking hwloc again.
//
// Why not hwloc's own XML export: in a fresh process hwloc_topology_init alone costs 2.4 ms here
// (it loads hwloc's plugins: pci, gl, opencl, libxml) and loading the XML of a 2x96-core machine
// 7.1 ms in all; this file is decoded in 65 us for that machine, without touching hwloc
// (bench/plugin_task_cost.cpp).
//
// Trust: the file is used only when it and its directory belong to the trusted owner (root), are
// not writable by group or others, every directory on the way from "/" is root's (or the owner's)
// and writable by nobody else (the path is walked with *at calls on descriptors, links followed
// only from such directories: no one else can swap an entry between a check and a write), parse completely, carry a matching checksum and were written for
// this very machine state: the key names the cache format, the hwloc version, the kernel (release,
// version, architecture), the node name, the boot (/proc/sys/kernel/random/boot_id) and the
// possible/present/online CPUs and NUMA nodes. Anything else is ignored with one warning and the
// topology is loaded live (then written again). Written to a temporary file and renamed, mode 0644.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tfpin/topology.hpp"

namespace tfpin {

// The file's name inside the cache directory.
inline constexpr std::string_view topology_cache_file = "topology.cache";

// What identifies this machine's current state (see above); nullopt when a part of it cannot be
// read (no boot id): the cache is then not used at all.
std::optional<std::string> host_topology_key();

// The file's text: a header, the key, the data, a checksum of all of it.
std::string encode_topology(const Topology& topology, std::string_view key);

// `body` (header, key and data lines, each ending in a newline) with its checksum line appended:
// what encode_topology does last, for tests and the fuzz target that build bodies of their own.
std::string seal_topology_text(std::string_view body);

// The topology in `text` if it is complete, consistent, its checksum right and its key `key`;
// otherwise nullopt and `why` says what is wrong (for a warning). Never throws on bad input.
std::optional<Topology> decode_topology(std::string_view text, std::string_view key,
                                        std::string& why);

struct TopologyCacheOptions {
  std::string directory;  // empty: no cache, every call loads live
  uid_t owner = 0;        // who must own the directory and the file (root)
  bool write = true;      // after a live load, (re)write the file (only when running as owner)
};

struct CachedTopology {
  Topology topology;
  bool from_cache = false;
  // One line when the cache was unusable (damaged, foreign, stale, unsafe) or could not be
  // written; empty when all went as expected (including a first, missing file).
  std::string warning;
};

// The host's topology, from the cache when it is valid, else from `live` (Topology::host), then
// written to the cache. Any HWLOC_* variable in the environment (HWLOC_XMLFILE, HWLOC_SYNTHETIC,
// HWLOC_FSROOT, ...) changes what hwloc would discover, so it bypasses the cache, silently.
// Throws what `live` throws (tfpin::Error) when the live load fails.
CachedTopology load_host_topology(const TopologyCacheOptions& options,
                                  const std::function<Topology()>& live = Topology::host);

// Writes `topology` as the cache file of `directory` for `key` (temporary file, fsync, rename;
// mode 0644), `directory` checked as above with this process's user as the owner. Returns an
// empty string, or why it failed.
std::string write_topology_cache(const std::string& directory, const Topology& topology,
                                 std::string_view key);

}  // namespace tfpin
