// Small helpers shared by the operator files.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "../ir.hpp"
#include "../lowering.hpp"
#include "../op_registry.hpp"

namespace tfpin::engine::detail {

inline Value& value_of(Ir& ir, int v) { return ir.values[static_cast<std::size_t>(v)]; }
inline Node& node_of(Ir& ir, int n) { return ir.nodes[static_cast<std::size_t>(n)]; }

inline Status expect_inputs(Ir& ir, int node, std::size_t min, std::size_t max, const char* what) {
  std::size_t n = node_of(ir, node).inputs.size();
  if (n < min || n > max) {
    return graph_error(ir, node, fmt::format("has {} inputs, expected {}", n, what));
  }
  return {};
}

inline Status expect_rank(Ir& ir, int node, int input, std::size_t rank, const char* role) {
  const Value& v = value_of(ir, node_of(ir, node).inputs[static_cast<std::size_t>(input)]);
  if (v.dims.size() != rank) {
    return graph_error(ir, node,
                       fmt::format("{} '{}' has dimensions {}, expected {} dimensions", role,
                                   v.name, dims_string(v.dims), rank));
  }
  return {};
}

// An image (N, C, H, W) or a matrix (N, C): what the elementwise operators take.
inline Status expect_image_or_matrix(Ir& ir, int node, int input, const char* role) {
  const Value& v = value_of(ir, node_of(ir, node).inputs[static_cast<std::size_t>(input)]);
  if (v.dims.size() != 4 && v.dims.size() != 2) {
    return graph_error(ir, node,
                       fmt::format("{} '{}' has dimensions {}, expected 4 or 2", role, v.name,
                                   dims_string(v.dims)));
  }
  return {};
}

inline Status expect_constant(Ir& ir, int node, int input, const char* role) {
  const Value& v = value_of(ir, node_of(ir, node).inputs[static_cast<std::size_t>(input)]);
  if (v.kind != ValueKind::constant) {
    return graph_error(ir, node, fmt::format("{} '{}' must be a constant", role, v.name));
  }
  return {};
}

inline Status expect_vector(Ir& ir, int node, int input, std::int64_t length, const char* role) {
  const Value& v = value_of(ir, node_of(ir, node).inputs[static_cast<std::size_t>(input)]);
  if (v.dims.size() != 1 || v.dims[0] != length) {
    return graph_error(ir, node,
                       fmt::format("{} '{}' has dimensions {}, expected [{}]", role, v.name,
                                   dims_string(v.dims), length));
  }
  return {};
}

#define TFPIN_TRY(expr)                  \
  do {                                   \
    ::tfpin::engine::Status s_ = (expr); \
    if (!s_.ok()) return s_;             \
  } while (false)

}  // namespace tfpin::engine::detail
