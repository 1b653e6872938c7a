// Dropout: the identity at inference. The compiler removes it (consumers read its input).
#include <cmath>

#include "common.hpp"

namespace tfpin::engine::detail {

Status infer_dropout(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  Node& n = node_of(ir, node);
  const float rate = std::get<Dropout>(n.attrs).rate;
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return graph_error(ir, node, fmt::format("rate={} is invalid: expected 0 <= rate < 1", rate));
  }
  out = value_of(ir, n.inputs[0]).dims;
  return {};
}

}  // namespace tfpin::engine::detail
