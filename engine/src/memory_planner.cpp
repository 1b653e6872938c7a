#include "memory_planner.hpp"

#include <algorithm>
#include <numeric>

namespace tfpin::engine::detail {

namespace {

std::uint64_t align_up(std::uint64_t n) {
  return (n + arena_alignment - 1) / arena_alignment * arena_alignment;
}

}  // namespace

MemoryPlan plan_memory(std::vector<Buffer>& buffers, const std::vector<std::vector<int>>& accessors,
                       const std::function<bool(int, int)>& before) {
  MemoryPlan plan;
  std::vector<int> order;
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].kind == BufferKind::arena && buffers[b].alias_of < 0 && !accessors[b].empty()) {
      order.push_back(static_cast<int>(b));
      plan.unshared_bytes += align_up(buffers[b].bytes);
    }
  }
  // Biggest first (the classic greedy-by-size arena placement).
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return buffers[static_cast<std::size_t>(a)].bytes > buffers[static_cast<std::size_t>(b)].bytes;
  });
  auto all_before = [&](int a, int b) {
    for (int x : accessors[static_cast<std::size_t>(a)]) {
      for (int y : accessors[static_cast<std::size_t>(b)]) {
        if (!before(x, y)) return false;
      }
    }
    return true;
  };
  std::vector<int> placed;
  for (int b : order) {
    Buffer& buf = buffers[static_cast<std::size_t>(b)];
    const std::uint64_t size = align_up(buf.bytes);
    // Intervals of placed buffers whose lifetimes may overlap this one's.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (int p : placed) {
      if (all_before(p, b) || all_before(b, p)) continue;
      const Buffer& other = buffers[static_cast<std::size_t>(p)];
      busy.emplace_back(other.offset, other.offset + align_up(other.bytes));
    }
    std::sort(busy.begin(), busy.end());
    std::uint64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + size <= lo) break;
      offset = std::max(offset, hi);
    }
    buf.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace tfpin::engine::detail
