// Batch normalisation, optional fused ReLU. Inference: running statistics (usually folded into the
// convolution before it; this is the standalone form). Training: batch statistics, the running ones
// updated after each step, and the backward pass (scale and shift gradients; oneDNN's
// fuse_norm_relu keeps a bit mask for the ReLU's backward).
#include <cmath>

#include "batch_norm_pool.hpp"
#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_batch_norm(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 5, 5, "5 (input, scale, shift, mean, variance)"));
  Node& n = node_of(ir, node);
  const Value& x = value_of(ir, n.inputs[0]);
  TFPIN_TRY(expect_image_or_matrix(ir, node, 0, "input"));
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

namespace {

static void lower_batch_norm_training_step(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const std::int64_t c = xd[1];
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (!n.post_ops.empty()) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const dnnl::batch_normalization_forward::primitive_desc pd =
      onednn::batch_norm_forward(l.engine, dnnl::prop_kind::forward_training, x_md,
                                 std::get<BatchNorm>(n.attrs).epsilon, flags, l.attributes(n));
  const md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.pd = pd;
  r.src = l.read_as(x, pd.src_desc());
  r.src_md = pd.src_desc();
  r.weights = l.parameter_as(n.inputs[1], vec, vec);
  r.bias = l.parameter_as(n.inputs[2], vec, vec);
  r.mean = l.new_arena_buffer(vec, n.name + ":mean");
  r.variance = l.new_arena_buffer(vec, n.name + ":variance");
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::batch_normalization_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, r.src, r.src_md));
  step.args.push_back(Arg::in(DNNL_ARG_SCALE, r.weights, vec));
  step.args.push_back(Arg::in(DNNL_ARG_SHIFT, r.bias, vec));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_MEAN, r.mean, vec));
  step.args.push_back(Arg::out(DNNL_ARG_VARIANCE, r.variance, vec));
  if (!n.post_ops.empty()) {
    r.workspace_md = pd.workspace_desc();
    r.workspace = l.new_arena_buffer(r.workspace_md, n.name + ":workspace");
    step.args.push_back(Arg::out(DNNL_ARG_WORKSPACE, r.workspace, r.workspace_md));
  }
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

static void lower_batch_norm_training(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const std::int64_t c = xd[1];
  const md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  if (n.fused_max_pool) {
    lower_batch_norm_pool(l, node);
  } else {
    lower_batch_norm_training_step(l, node);
  }
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];

  // Running statistics as PyTorch keeps them: unbiased variance, exponential average.
  Step update;
  update.name = n.name + ":running_statistics";
  update.op = "running_statistics";
  const int running_mean = l.running_statistic(n.inputs[3], vec);
  const int running_variance = l.running_statistic(n.inputs[4], vec);
  update.args.push_back(Arg::in(0, r.mean, vec));
  update.args.push_back(Arg::in(0, r.variance, vec));
  update.args.push_back(Arg::in_out(0, running_mean, vec));
  update.args.push_back(Arg::in_out(0, running_variance, vec));
  const double count = static_cast<double>(element_count(xd) / c);
  const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
  const float m = l.options.training->bn_momentum;
  update.kernel = [c, unbias, m](const KernelCall& call) {
    const auto* mean = static_cast<const float*>(call.data[0]);
    const auto* var = static_cast<const float*>(call.data[1]);
    auto* mean_out = static_cast<float*>(call.data[2]);
    auto* var_out = static_cast<float*>(call.data[3]);
    for (std::int64_t k = 0; k < c; ++k) {
      mean_out[k] = (1 - m) * mean_out[k] + m * mean[k];
      var_out[k] = (1 - m) * var_out[k] + m * unbias * var[k];
    }
  };
  l.add_kernel_step(std::move(update));
}

}  // namespace

static void lower_batch_norm(Lowering& l, int node) {
  if (l.training()) {
    lower_batch_norm_training(l, node);
    return;
  }
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const std::int64_t c = value_of(l.ir, x).dims[1];
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  if (!n.post_ops.empty()) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const dnnl::batch_normalization_forward::primitive_desc pd =
      onednn::batch_norm_forward(l.engine, dnnl::prop_kind::forward_inference, x_md,
                                 std::get<BatchNorm>(n.attrs).epsilon, flags, l.attributes(n));
  md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::batch_normalization_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  const int args[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
  for (int k = 0; k < 4; ++k) {
    step.args.push_back(
        Arg::in(args[k], l.constant_as(n.inputs[static_cast<std::size_t>(k + 1)], vec, vec), vec));
  }
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

static void backward_batch_norm(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  if (n.fused_max_pool) {
    backward_batch_norm_pool(l, node);
    return;
  }
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto fwd = std::any_cast<dnnl::batch_normalization_forward::primitive_desc>(r.pd);
  const std::int64_t c = value_of(l.ir, n.inputs[0]).dims[1];
  const md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (r.workspace >= 0) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  const md_t y_md = fwd.dst_desc();
  const int dy = l.gradient_as(n.output, y_md);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::batch_normalization_backward::primitive_desc pd = onednn::batch_norm_backward(
      l.engine, y_md, r.src_md, std::get<BatchNorm>(n.attrs).epsilon, flags, fwd, attr);
  Step step;
  step.name = n.name + ":backward";
  step.op = r.workspace >= 0 ? "batch_norm+relu_backward" : "batch_norm_backward";
  step.primitive = dnnl::batch_normalization_backward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, r.src, r.src_md));
  step.args.push_back(Arg::in(DNNL_ARG_MEAN, r.mean, vec));
  step.args.push_back(Arg::in(DNNL_ARG_VARIANCE, r.variance, vec));
  step.args.push_back(Arg::in(DNNL_ARG_DIFF_DST, dy, y_md));
  step.args.push_back(Arg::in(DNNL_ARG_SCALE, r.weights, vec));
  if (onednn::batch_norm_backward_reads_shift) {
    step.args.push_back(Arg::in(DNNL_ARG_SHIFT, r.bias, vec));
  }
  if (r.workspace >= 0) {
    step.args.push_back(Arg::in(DNNL_ARG_WORKSPACE, r.workspace, r.workspace_md));
  }
  // The input's gradient is needed even when the input itself needs none: oneDNN computes both.
  const int dx = l.new_arena_buffer(pd.diff_src_desc(), n.name + ":diff_src");
  const int dscale = l.new_arena_buffer(vec, n.name + ":diff_scale");
  const int dshift = l.new_arena_buffer(vec, n.name + ":diff_shift");
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SRC, dx, pd.diff_src_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SCALE, dscale, vec));
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SHIFT, dshift, vec));
  l.add_step(std::move(step), pd);
  if (l.wants_gradient(n.inputs[0])) l.add_gradient(n.inputs[0], dx, pd.diff_src_desc());
  l.add_update(r.weights, dscale, vec, value_of(l.ir, n.inputs[1]).name);
  l.add_update(r.bias, dshift, vec, value_of(l.ir, n.inputs[2]).name);
}

TFPIN_REGISTER_OP(batch_norm, .infer = infer_batch_norm, .lower = lower_batch_norm,
                  .backward = backward_batch_norm, .has_parameters = true);

}  // namespace tfpin::engine::detail
