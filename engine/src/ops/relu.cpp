// ReLU (usually a post-op of the operator before it; this is the standalone form).
#include "common.hpp"

namespace tfpin::engine::detail {

Status infer_relu(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  out = value_of(ir, node_of(ir, node).inputs[0]).dims;
  if (out.size() != 4 && out.size() != 2) {
    return graph_error(ir, node,
                       fmt::format("input has dimensions {}, expected 4 or 2", dims_string(out)));
  }
  return {};
}

void lower_relu(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                   dnnl::algorithm::eltwise_relu, x_md, 0.0f, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(desc, l.attributes(n), l.engine);
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::eltwise_forward(pd);
  step.args.push_back(Arg{DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc(), true, false});
  step.args.push_back(Arg{DNNL_ARG_DST, dst, pd.dst_desc(), false, true});
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

}  // namespace tfpin::engine::detail
