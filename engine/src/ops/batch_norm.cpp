// Inference batch normalisation with running statistics (usually folded into the convolution
// before it; this is the standalone form), optional fused ReLU.
#include <cmath>

#include "common.hpp"

namespace tfpin::engine::detail {

Status infer_batch_norm(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 5, 5, "5 (input, scale, shift, mean, variance)"));
  Node& n = node_of(ir, node);
  const Value& x = value_of(ir, n.inputs[0]);
  if (x.dims.size() != 4 && x.dims.size() != 2) {
    return graph_error(
        ir, node,
        fmt::format("input '{}' has dimensions {}, expected 4 or 2", x.name, dims_string(x.dims)));
  }
  const char* roles[] = {"scale", "shift", "mean", "variance"};
  for (int k = 1; k < 5; ++k) {
    TFPIN_TRY(expect_constant(ir, node, k, roles[k - 1]));
    TFPIN_TRY(expect_vector(ir, node, k, x.dims[1], roles[k - 1]));
  }
  const float eps = std::get<BatchNorm>(n.attrs).epsilon;
  if (!(eps > 0.0f) || !std::isfinite(eps)) {
    return graph_error(ir, node, fmt::format("epsilon={} is invalid: it must be positive", eps));
  }
  for (float v : *value_of(ir, n.inputs[4]).data) {
    if (!(v >= 0.0f)) {
      return graph_error(ir, node,
                         fmt::format("variance '{}' holds {}: variances cannot be negative",
                                     value_of(ir, n.inputs[4]).name, v));
    }
  }
  out = x.dims;
  return {};
}

void lower_batch_norm(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const std::int64_t c = value_of(l.ir, x).dims[1];
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  if (!n.post_ops.empty()) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, x_md,
                                               std::get<BatchNorm>(n.attrs).epsilon, flags);
  dnnl::batch_normalization_forward::primitive_desc pd(desc, l.attributes(n), l.engine);
  md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::batch_normalization_forward(pd);
  step.args.push_back(Arg{DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc(), true, false});
  const int args[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
  for (int k = 0; k < 4; ++k) {
    step.args.push_back(Arg{args[k],
                            l.constant_as(n.inputs[static_cast<std::size_t>(k + 1)], vec, vec), vec,
                            true, false});
  }
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  step.args.push_back(Arg{DNNL_ARG_DST, dst, pd.dst_desc(), false, true});
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

}  // namespace tfpin::engine::detail
