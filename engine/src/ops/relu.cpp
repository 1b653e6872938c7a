// ReLU (usually a post-op of the operator before it; this is the standalone form). Training uses
// the form whose backward reads the output (relu' = y > 0), so the input need not be kept.
#include "common.hpp"

namespace tfpin::engine::detail {

int add_relu_backward(Lowering& l, const std::string& name, int y, const md_t& y_md, int dy) {
  const auto algorithm = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  const dnnl::eltwise_forward::primitive_desc hint = onednn::eltwise_forward(
      l.engine, dnnl::prop_kind::forward_training, algorithm, y_md, dnnl::primitive_attr());
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::eltwise_backward::primitive_desc pd =
      onednn::eltwise_backward(l.engine, algorithm, y_md, y_md, hint, attr);
  const int dx = l.new_arena_buffer(pd.diff_src_desc(), name + ":diff_src");
  Step step;
  step.name = name + ":relu_backward";
  step.op = "relu_backward";
  step.primitive = dnnl::eltwise_backward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_DST, y, y_md));
  step.args.push_back(Arg::in(DNNL_ARG_DIFF_DST, dy, y_md));
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SRC, dx, pd.diff_src_desc()));
  l.add_step(std::move(step), pd);
  return dx;
}

static Status infer_relu(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  out = value_of(ir, node_of(ir, node).inputs[0]).dims;
  if (out.size() != 4 && out.size() != 2) {
    return graph_error(ir, node,
                       fmt::format("input has dimensions {}, expected 4 or 2", dims_string(out)));
  }
  return {};
}

static void lower_relu(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const auto algorithm =
      l.training() ? dnnl::algorithm::eltwise_relu_use_dst_for_bwd : dnnl::algorithm::eltwise_relu;
  const dnnl::eltwise_forward::primitive_desc pd =
      onednn::eltwise_forward(l.engine, l.forward_kind(), algorithm, x_md, l.attributes(n));
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::eltwise_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

static void backward_relu(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  if (!l.wants_gradient(x)) return;
  const auto out = static_cast<std::size_t>(n.output);
  const md_t& y_md = l.value_md[out];
  const int dy = l.gradient_as(n.output, y_md);
  l.add_gradient(x, add_relu_backward(l, n.name, l.value_buffer[out], y_md, dy), y_md);
}

TFPIN_REGISTER_OP(relu, .infer = infer_relu, .lower = lower_relu, .backward = backward_relu);

}  // namespace tfpin::engine::detail
