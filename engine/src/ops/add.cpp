// Elementwise addition of two tensors of the same shape (residual connections; usually fused into
// the convolution before it as a sum post-op), optional fused ReLU.
#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_add(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 2, 2, "2"));
  Node& n = node_of(ir, node);
  const Value& a = value_of(ir, n.inputs[0]);
  const Value& b = value_of(ir, n.inputs[1]);
  if (a.dims != b.dims) {
    return graph_error(ir, node,
                       fmt::format("shape mismatch: '{}' is {} but '{}' is {} (no broadcasting)",
                                   a.name, dims_string(a.dims), b.name, dims_string(b.dims)));
  }
  if (a.dims.size() != 4 && a.dims.size() != 2) {
    return graph_error(
        ir, node, fmt::format("inputs have dimensions {}, expected 4 or 2", dims_string(a.dims)));
  }
  if (a.kind == ValueKind::constant || b.kind == ValueKind::constant) {
    return graph_error(ir, node, "adding a constant tensor is not supported");
  }
  out = a.dims;
  return {};
}

static void lower_add(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int a = n.inputs[0];
  const int b = n.inputs[1];
  const md_t& a_md = l.value_md[static_cast<std::size_t>(a)];
  const md_t& b_md = l.value_md[static_cast<std::size_t>(b)];
  const md_t target = is_plain(a_md) && !is_plain(b_md) ? b_md : a_md;
  const dnnl::binary::primitive_desc pd =
      onednn::binary_add(l.engine, target, target, target, l.attributes(n));
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::binary(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC_0, l.read_as(a, pd.src0_desc()), pd.src0_desc()));
  step.args.push_back(Arg::in(DNNL_ARG_SRC_1, l.read_as(b, pd.src1_desc()), pd.src1_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

// The sum's gradient flows unchanged to both operands (one buffer, read by both).
static void backward_add(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const md_t y_md = l.value_md[static_cast<std::size_t>(n.output)];
  const int dy = l.gradient_before_relu(node, y_md);
  for (int x : n.inputs) {
    if (l.wants_gradient(x)) l.add_gradient(x, dy, y_md);
  }
}

TFPIN_REGISTER_OP(add, .infer = infer_add, .lower = lower_add, .backward = backward_add);

}  // namespace tfpin::engine::detail
