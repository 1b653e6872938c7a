// Inner product (fully connected) with optional bias and fused ReLU. Reads an image input directly
// (after the flatten is folded) with its weights reshaped to O, C, H, W.
#include "common.hpp"
#include "matrix_vector.hpp"

namespace tfpin::engine::detail {

static Status infer_inner_product(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 2, 3, "2 or 3 (input, weights[, bias])"));
  TFPIN_TRY(expect_rank(ir, node, 1, 2, "weights"));
  TFPIN_TRY(expect_constant(ir, node, 1, "weights"));
  Node& n = node_of(ir, node);
  const Value& x = value_of(ir, n.inputs[0]);
  const Value& w = value_of(ir, n.inputs[1]);
  if (x.dims.size() != 2 && x.dims.size() != 4) {
    return graph_error(ir, node,
                       fmt::format("input '{}' has dimensions {}, expected N, I or N, C, H, W",
                                   x.name, dims_string(x.dims)));
  }
  std::int64_t features = 1;
  for (std::size_t d = 1; d < x.dims.size(); ++d) features *= x.dims[d];
  if (w.dims[1] != features) {
    return graph_error(
        ir, node,
        fmt::format("input '{}' {} has {} features but weights '{}' {} expect {}", x.name,
                    dims_string(x.dims), features, w.name, dims_string(w.dims), w.dims[1]));
  }
  if (n.inputs.size() == 3) {
    TFPIN_TRY(expect_constant(ir, node, 2, "bias"));
    TFPIN_TRY(expect_vector(ir, node, 2, w.dims[0], "bias"));
  }
  out = {x.dims[0], w.dims[0]};
  return {};
}

static void lower_inner_product(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& wd = value_of(l.ir, n.inputs[1]).dims;
  const Dims& od = value_of(l.ir, n.output).dims;
  if (l.options.matrix_vector && matrix_vector_applies(l, n, xd, wd)) {
    lower_matrix_vector(l, node);
    return;
  }
  Dims wdims = xd;
  wdims[0] = wd[0];
  md_t w_user = plain_md(wdims, Layout::nchw);  // O, I == O, C, H, W row-major
  md_t w_any = any_md(wdims);
  const bool has_bias = n.inputs.size() > 2;
  md_t b_md = has_bias ? md_t({wd[0]}, dnnl::memory::data_type::f32, tag::x) : md_t();
  const dnnl::primitive_attr attr = l.attributes(n);
  auto make = [&](const md_t& s) {
    return onednn::inner_product_forward(l.engine, l.forward_kind(), s, w_any, b_md, any_md(od),
                                         attr);
  };
  dnnl::inner_product_forward::primitive_desc pd;
  try {
    pd = make(l.value_md[static_cast<std::size_t>(x)]);
  } catch (const dnnl::error&) {
    pd = make(any_md(xd));
  }
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::inner_product_forward(pd);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.pd = pd;
  r.src = l.read_as(x, pd.src_desc());
  r.src_md = pd.src_desc();
  r.weights = l.parameter_as(n.inputs[1], w_user, pd.weights_desc());
  r.weights_md = pd.weights_desc();
  step.args.push_back(Arg::in(DNNL_ARG_SRC, r.src, r.src_md));
  step.args.push_back(Arg::in(DNNL_ARG_WEIGHTS, r.weights, r.weights_md));
  if (has_bias) {
    r.bias = l.parameter_as(n.inputs[2], b_md, pd.bias_desc());
    step.args.push_back(Arg::in(DNNL_ARG_BIAS, r.bias, pd.bias_desc()));
  }
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
  l.report.flops += 2.0 * static_cast<double>(od[0] * od[1]) * static_cast<double>(wd[1]);
}

static void backward_inner_product(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto fwd = std::any_cast<dnnl::inner_product_forward::primitive_desc>(r.pd);
  const md_t dst_md = fwd.dst_desc();
  const int dy = l.gradient_before_relu(node, dst_md);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const int x = n.inputs[0];
  if (l.wants_gradient(x)) {
    const dnnl::inner_product_backward_data::primitive_desc pd =
        onednn::inner_product_backward_data(l.engine, fwd.src_desc(), fwd.weights_desc(), dst_md,
                                            fwd, attr);
    Step step;
    step.name = n.name + ":backward_data";
    step.op = "inner_product_backward_data";
    step.primitive = dnnl::inner_product_backward_data(pd);
    add_data_gradient(l, node, std::move(step), pd, dy, dst_md, pd.diff_dst_desc(),
                      pd.weights_desc(), pd.diff_src_desc());
  }
  const bool has_bias = r.bias >= 0;
  const md_t b_md = has_bias ? fwd.bias_desc() : md_t();
  const dnnl::inner_product_backward_weights::primitive_desc pd =
      onednn::inner_product_backward_weights(l.engine, fwd.src_desc(), fwd.weights_desc(), b_md,
                                             dst_md, fwd, attr);
  Step step;
  step.name = n.name + ":backward_weights";
  step.op = "inner_product_backward_weights";
  step.primitive = dnnl::inner_product_backward_weights(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, r.src, r.src_md));
  step.args.push_back(Arg::in(DNNL_ARG_DIFF_DST, dy, dst_md));
  add_weight_gradients(l, node, std::move(step), pd, pd.diff_weights_desc(),
                       has_bias ? pd.diff_bias_desc() : md_t());
}

TFPIN_REGISTER_OP(inner_product, .infer = infer_inner_product, .lower = lower_inner_product,
                  .backward = backward_inner_product, .has_parameters = true);

}  // namespace tfpin::engine::detail
