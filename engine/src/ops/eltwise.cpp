// Activations other than ReLU (leaky ReLU, clip, sigmoid, hard sigmoid, hard swish, tanh) with
// ONNX's definitions; after a convolution or inner product the inference passes make them a
// post-op. Training: the backward from the input (kept by the forward step).
#include <cmath>

#include "common.hpp"

namespace tfpin::engine::detail {

std::vector<onednn::EltwiseStep> eltwise_steps(const Eltwise& a) {
  using dnnl::algorithm;
  switch (a.kind) {
    case EltwiseKind::leaky_relu:
      return {{algorithm::eltwise_relu, a.alpha, 0.0f}};
    case EltwiseKind::clip:
      // clip_v2: the same forward as clip; its backward is also defined from the output.
      return {{algorithm::eltwise_clip_v2, a.alpha, a.beta}};
    case EltwiseKind::sigmoid:
      return {{algorithm::eltwise_logistic, 0.0f, 0.0f}};
    case EltwiseKind::hard_sigmoid:
      return onednn::hard_sigmoid(a.alpha, a.beta);
    case EltwiseKind::hard_swish:
      return {onednn::hard_swish()};
    case EltwiseKind::tanh:
      return {{algorithm::eltwise_tanh, 0.0f, 0.0f}};
  }
  throw Unsupported(fmt::format("unknown activation {}", static_cast<int>(a.kind)));
}

static Status infer_eltwise(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  Node& n = node_of(ir, node);
  const Value& x = value_of(ir, n.inputs[0]);
  TFPIN_TRY(expect_image_or_matrix(ir, node, 0, "input"));
  if (x.kind == ValueKind::constant) {
    return graph_error(ir, node,
                       fmt::format("input '{}' is a constant: fold the activation into it "
                                   "before building the graph",
                                   x.name));
  }
  const auto& a = std::get<Eltwise>(n.attrs);
  const char* kind = to_string(a.kind);
  if (std::string_view(kind) == "?") {
    return graph_error(ir, node,
                       fmt::format("activation kind {} is unknown", static_cast<int>(a.kind)));
  }
  switch (a.kind) {
    case EltwiseKind::leaky_relu:
      if (!std::isfinite(a.alpha)) {
        return graph_error(
            ir, node, fmt::format("leaky_relu alpha={} is invalid: it must be finite", a.alpha));
      }
      break;
    case EltwiseKind::clip:
      // Infinite bounds are fine (a clip with one side open); NaN or min > max are not.
      if (std::isnan(a.alpha) || std::isnan(a.beta) || a.alpha > a.beta) {
        return graph_error(ir, node,
                           fmt::format("clip bounds min (alpha)={} max (beta)={} are invalid: "
                                       "expected min <= max",
                                       a.alpha, a.beta));
      }
      break;
    case EltwiseKind::hard_sigmoid:
      if (!std::isfinite(a.alpha) || !std::isfinite(a.beta)) {
        return graph_error(ir, node,
                           fmt::format("hard_sigmoid alpha={} beta={} are invalid: both must be "
                                       "finite",
                                       a.alpha, a.beta));
      }
      break;
    case EltwiseKind::sigmoid:
    case EltwiseKind::hard_swish:
    case EltwiseKind::tanh:
      break;  // no parameters (alpha and beta are ignored)
  }
  out = x.dims;
  return {};
}

// Each step of the activation (one but for 2.x's hard sigmoid) is one eltwise primitive: 2.x runs
// an eltwise with an eltwise post-op on its reference kernel only, two jit steps are faster.
static void lower_eltwise(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const auto& a = std::get<Eltwise>(n.attrs);
  const int x = n.inputs[0];
  const std::vector<onednn::EltwiseStep> steps = eltwise_steps(a);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  md_t md = l.value_md[static_cast<std::size_t>(x)];
  int src = -1;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const dnnl::eltwise_forward::primitive_desc pd =
        onednn::eltwise_forward(l.engine, l.forward_kind(), steps[k], md, l.attributes(n));
    if (k == 0) {
      src = l.read_as(x, pd.src_desc());
      r.pd = pd;
      r.src = src;
      r.src_md = pd.src_desc();
    }
    const bool last = k + 1 == steps.size();
    const int dst =
        l.new_arena_buffer(pd.dst_desc(), last ? n.name : fmt::format("{}:{}", n.name, k));
    Step step;
    step.name = last ? n.name : fmt::format("{}:{}", n.name, k);
    step.op = l.op_label(n);
    step.primitive = dnnl::eltwise_forward(pd);
    step.args.push_back(Arg::in(DNNL_ARG_SRC, src, pd.src_desc()));
    step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
    l.add_step(std::move(step), pd);
    src = dst;
    md = pd.dst_desc();
  }
  l.define(n.output, md, src);
}

namespace {

// d/dx max(0, min(1, alpha x + beta)) = alpha inside (0, 1), as oneDNN 3's hard sigmoid backward.
// For 2.x, whose hard sigmoid is two primitives.
static Kernel hard_sigmoid_backward(std::size_t n, float alpha, float beta) {
  return [=](const KernelCall& call) {
    const auto* x = static_cast<const float*>(call.data[0]);
    const auto* dy = static_cast<const float*>(call.data[1]);
    auto* dx = static_cast<float*>(call.data[2]);
    const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      const float v = alpha * x[i] + beta;
      dx[i] = v > 0.0f && v < 1.0f ? alpha * dy[i] : 0.0f;
    }
  };
}

}  // namespace

static void backward_eltwise(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  if (!l.wants_gradient(x)) return;
  const auto& a = std::get<Eltwise>(n.attrs);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const std::vector<onednn::EltwiseStep> steps = eltwise_steps(a);
  // Every step keeps the layout: the output's gradient, the input and its gradient share it.
  const md_t& md = r.src_md;
  const int dy = l.gradient_as(n.output, md);
  const int dx = l.new_arena_buffer(md, n.name + ":diff_src");
  Step step;
  step.name = n.name + ":backward";
  step.op = l.op_label(n) + "_backward";
  if (steps.size() == 1) {
    const auto fwd = std::any_cast<dnnl::eltwise_forward::primitive_desc>(r.pd);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::eltwise_backward::primitive_desc pd =
        onednn::eltwise_backward(l.engine, steps[0], md, md, fwd, attr);
    step.primitive = dnnl::eltwise_backward(pd);
    step.args.push_back(Arg::in(DNNL_ARG_SRC, r.src, md));
    step.args.push_back(Arg::in(DNNL_ARG_DIFF_DST, dy, md));
    step.args.push_back(Arg::out(DNNL_ARG_DIFF_SRC, dx, md));
    l.add_step(std::move(step), pd);
  } else {
    if (a.kind != EltwiseKind::hard_sigmoid) {
      throw Unsupported(fmt::format("{}: training has no backward for {}", l.ir.describe_node(node),
                                    to_string(a.kind)));
    }
    // Elementwise in any layout: x, dy and dx share one (padding included, where all are 0).
    step.args.push_back(Arg::in(0, r.src, md));
    step.args.push_back(Arg::in(0, dy, md));
    step.args.push_back(Arg::out(0, dx, md));
    step.kernel = hard_sigmoid_backward(md.get_size() / sizeof(float), a.alpha, a.beta);
    l.add_kernel_step(std::move(step));
  }
  l.add_gradient(x, dx, md);
}

TFPIN_REGISTER_OP(eltwise, .infer = infer_eltwise, .lower = lower_eltwise,
                  .backward = backward_eltwise);

}  // namespace tfpin::engine::detail
