// Places the arena buffers of a compiled graph in one block, reusing memory by liveness: two
// buffers may overlap only when every step that touches one is guaranteed to finish before any step
// touches the other. "Guaranteed before" is the program order with one lane, and reachability in
// the step dependency graph with several lanes (independent branches may run in any order).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lowering.hpp"

namespace tfpin::engine::detail {

struct MemoryPlan {
  std::uint64_t arena_bytes = 0;     // peak: the block's size
  std::uint64_t unshared_bytes = 0;  // the sum of all arena buffers (no reuse)
};

inline constexpr std::uint64_t arena_alignment = 4096;

// accessors[b]: the steps reading or writing buffer b (only arena buffers are placed).
// before(a, b): step a certainly finishes before step b starts.
MemoryPlan plan_memory(std::vector<Buffer>& buffers, const std::vector<std::vector<int>>& accessors,
                       const std::function<bool(int, int)>& before);

}  // namespace tfpin::engine::detail
