// Softmax over axis 1: the classes of N, C, or the channels of N, C, H, W at each pixel.
#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_softmax(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  const Value& x = value_of(ir, node_of(ir, node).inputs[0]);
  if (x.dims.size() != 2 && x.dims.size() != 4) {
    return graph_error(ir, node,
                       fmt::format("input '{}' has dimensions {}, expected N, C or N, C, H, W",
                                   x.name, dims_string(x.dims)));
  }
  out = x.dims;
  return {};
}

static void lower_softmax(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const dnnl::softmax_forward::primitive_desc pd =
      onednn::softmax_forward(l.engine, x_md, 1, l.attributes(n));
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::softmax_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

// No backward: training differentiates the classifier's softmax together with its loss.
TFPIN_REGISTER_OP(softmax, .infer = infer_softmax, .lower = lower_softmax);

}  // namespace tfpin::engine::detail
