// Flatten N, C, H, W to N, C*H*W in C, H, W order. A view when the input is already plain NCHW;
// otherwise one reorder into plain NCHW. (Before an inner product the compiler folds it away.)
#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_flatten(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  const Dims& x = value_of(ir, node_of(ir, node).inputs[0]).dims;
  if (x.size() == 2) {
    out = x;
    return {};
  }
  TFPIN_TRY(expect_rank(ir, node, 0, 4, "input"));
  out = {x[0], x[1] * x[2] * x[3]};
  return {};
}

static void lower_flatten(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& od = value_of(l.ir, n.output).dims;
  const md_t out_md = plain_md(od, Layout::nc);
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  if (xd.size() == 2) {
    l.define(n.output, x_md, l.value_buffer[static_cast<std::size_t>(x)]);
    return;
  }
  const md_t nchw = plain_md(xd, Layout::nchw);
  if (x_md == nchw) {
    l.define(n.output, out_md, l.value_buffer[static_cast<std::size_t>(x)]);
    return;
  }
  const int dst = l.new_arena_buffer(nchw, n.name);
  l.add_reorder(n.name, l.value_buffer[static_cast<std::size_t>(x)], x_md, dst, nchw);
  l.define(n.output, out_md, dst);
}

// The gradient of N, C*H*W (plain) is the gradient of N, C, H, W in plain NCHW: a view.
static void backward_flatten(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  if (!l.wants_gradient(x)) return;
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& od = value_of(l.ir, n.output).dims;
  const int dy = l.gradient_as(n.output, plain_md(od, Layout::nc));
  l.add_gradient(x, dy, xd.size() == 2 ? plain_md(xd, Layout::nc) : plain_md(xd, Layout::nchw));
}

TFPIN_REGISTER_OP(flatten, .infer = infer_flatten, .lower = lower_flatten,
                  .backward = backward_flatten);

}  // namespace tfpin::engine::detail
