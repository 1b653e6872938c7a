// Max and average pooling (kernel, stride, padding, ceil mode; average with or without padding
// counted). Ceil mode adds padding at the bottom/right as PyTorch does (a window that would start
// in the padding only is dropped). Training: max pooling keeps the arg-max workspace for its
// backward. Inference's max pooling also carries tfpin's vector kernel as a timed alternative
// (add_max_pool_kernel).
#include <algorithm>
#include <memory>

#include "batch_norm_pool.hpp"
#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_pooling(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  TFPIN_TRY(expect_rank(ir, node, 0, 4, "input"));
  Node& n = node_of(ir, node);
  const auto& a = std::get<Pool2D>(n.attrs);
  const Dims& x = value_of(ir, n.inputs[0]).dims;
  for (int d = 0; d < 2; ++d) {
    if (a.kernel[static_cast<std::size_t>(d)] < 1 || a.stride[static_cast<std::size_t>(d)] < 1) {
      return graph_error(
          ir, node,
          fmt::format("kernel {}x{} stride {}x{} is invalid: both must be at least 1", a.kernel[0],
                      a.kernel[1], a.stride[0], a.stride[1]));
    }
  }
  for (std::size_t k = 0; k < 4; ++k) {
    if (a.padding[k] < 0 || a.padding[k] >= a.kernel[k % 2]) {
      return graph_error(ir, node,
                         fmt::format("padding [{}] is invalid with kernel {}x{}: each side must be "
                                     "0 or more and smaller than the kernel",
                                     fmt::join(a.padding, ", "), a.kernel[0], a.kernel[1]));
    }
  }
  n.padding = a.padding;
  Dims o = {x[0], x[1], 0, 0};
  for (std::size_t d = 0; d < 2; ++d) {
    const std::int64_t size = x[d + 2];
    const std::int64_t lo = a.padding[d];
    const std::int64_t hi = a.padding[d + 2];
    const std::int64_t span = size + lo + hi - a.kernel[d];
    if (span < 0) {
      return graph_error(
          ir, node,
          fmt::format("kernel {}x{} does not fit the padded input {}x{}", a.kernel[0], a.kernel[1],
                      x[2] + a.padding[0] + a.padding[2], x[3] + a.padding[1] + a.padding[3]));
    }
    std::int64_t count = span / a.stride[d] + 1;
    if (a.ceil_mode) {
      count = (span + a.stride[d] - 1) / a.stride[d] + 1;
      if ((count - 1) * a.stride[d] >= size + lo) --count;  // last window must start inside
      n.padding[d + 2] = std::max(hi, (count - 1) * a.stride[d] + a.kernel[d] - size - lo);
    }
    o[d + 2] = count;
  }
  out = o;
  return {};
}

namespace {

// The node's padding: the attribute's plus what ceil mode adds at the bottom/right.
static onednn::Window pooling_window(const Node& n) {
  const auto& a = std::get<Pool2D>(n.attrs);
  return {{a.stride[0], a.stride[1]},
          {0, 0},
          {n.padding[0], n.padding[1]},
          {n.padding[2], n.padding[3]}};
}

// Inference's max pooling by tfpin's separable kernel (batch_norm_pool_kernels.hpp), planes of
// one image and one block of channels, each split into row ranges when there are too few planes
// for the threads (batch 1).
struct MaxPoolPlan {
  const BatchNormPoolKernels* kernels = nullptr;
  BatchNormPoolPlane plane;
  ChannelPlanes x;
  ChannelPlanes y;
  std::int64_t batch = 0;
  std::int64_t blocks = 0;
  std::int64_t row_parts = 1;

  void run(const float* src, float* dst) const {
    const std::int64_t items = batch * blocks * row_parts;
#pragma omp parallel for schedule(static)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t part = item % row_parts;
      const std::int64_t b = item / row_parts % blocks;
      const std::int64_t image = item / row_parts / blocks;
      const std::int64_t rows = plane.out_height;
      kernels->max_pool(plane, src + image * x.image + b * x.block,
                        dst + image * y.image + b * y.block, rows * part / row_parts,
                        rows * (part + 1) / row_parts);
    }
  }
};

// Gives an inference max pooling step tfpin's kernel as a timed alternative (Step::alternatives)
// when its input and output are in layouts the kernel reads (nChw16c, nChw8c, channels last) and
// this CPU has it. oneDNN 2.6's kernel took 75-100 us for GoogLeNet's 28x28 pools at batch 1,
// about a tenth of the network's time.
void add_max_pool_kernel(Lowering& l, const Node& n, Step& step, const md_t& x_md,
                         const md_t& y_md) {
  const auto& a = std::get<Pool2D>(n.attrs);
  if (l.training() || n.kind != OpKind::max_pool || a.kernel[1] > max_pool_widest) return;
  const std::optional<ChannelPlanes> xp = channel_planes_of(x_md, onednn::native_channel_block());
  if (!xp) return;
  const std::optional<ChannelPlanes> yp = channel_planes_of(y_md, xp->lanes);
  const BatchNormPoolKernels* kernels = pool_kernels_for(xp->lanes);
  if (!yp || yp->lanes != xp->lanes || kernels == nullptr) return;
  const Dims& xd = value_of(l.ir, n.inputs[0]).dims;
  const Dims& yd = value_of(l.ir, n.output).dims;
  auto plan = std::make_shared<MaxPoolPlan>();
  plan->kernels = kernels;
  plan->x = *xp;
  plan->y = *yp;
  plan->batch = xd[0];
  plan->blocks = xd[1] / xp->lanes;
  plan->plane = pool_plane(xd, yd, a, n.padding, *xp, *yp);
  const BatchNormPoolPlane& p = plan->plane;
  // Four items per thread at least, so that no thread waits long for the last.
  const std::int64_t planes = plan->batch * plan->blocks;
  const std::int64_t wanted = 4 * static_cast<std::int64_t>(std::max(1u, l.step_threads));
  plan->row_parts = std::clamp<std::int64_t>((wanted + planes - 1) / planes, 1, p.out_height);
  Alternative alt;
  alt.args = step.args;
  alt.impl = xp->lanes == 16 ? "tfpin_max_pool:avx512" : "tfpin_max_pool:avx2";
  alt.kernel = [plan](const KernelCall& call) {
    plan->run(static_cast<const float*>(call.data[0]), static_cast<float*>(call.data[1]));
  };
  step.alternatives.push_back(std::move(alt));
}

}  // namespace

static void lower_pooling(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const auto& a = std::get<Pool2D>(n.attrs);
  const int x = n.inputs[0];
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if (n.kind == OpKind::avg_pool) {
    alg = a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  auto make = [&](const md_t& src) {
    return onednn::pooling_forward(l.engine, l.forward_kind(), alg, src,
                                   any_md(value_of(l.ir, n.output).dims),
                                   {a.kernel[0], a.kernel[1]}, pooling_window(n), l.attributes(n));
  };
  dnnl::pooling_forward::primitive_desc pd = make(x_md);
  // A plain input (AlexNet's first convolution runs gemm on NCHW where oneDNN has no blocked
  // AVX2 kernel for it) gets oneDNN's unvectorised pooling: 42 ms of a 266 ms batch of 32 on
  // AVX2 with oneDNN 2.6. Reordered into the blocked layout first, the pooling is a jit kernel
  // and its output is in the layout the next convolution wants anyway.
  const Dims& xd = value_of(l.ir, x).dims;
  const std::int64_t block = onednn::native_channel_block();
  const std::string impl = pd.impl_info_str();
  if (l.options.blocked_layouts && is_plain(x_md) && xd.size() == 4 && xd[1] % block == 0 &&
      (impl.find("simple") != std::string::npos || impl.find("ref") != std::string::npos)) {
    try {
      auto blocked = make(md_t(to_dnnl(xd), dnnl::memory::data_type::f32,
                               block == 16 ? tag::nChw16c : tag::nChw8c));
      if (std::string(blocked.impl_info_str()).find("jit") != std::string::npos) pd = blocked;
    } catch (const dnnl::error&) {
      // keep the plain one
    }
  }
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::pooling_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  add_max_pool_kernel(l, n, step, pd.src_desc(), pd.dst_desc());
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.pd = pd;
  if (l.training() && n.kind == OpKind::max_pool) {
    r.workspace_md = pd.workspace_desc();
    r.workspace = l.new_arena_buffer(r.workspace_md, n.name + ":workspace");
    step.args.push_back(Arg::out(DNNL_ARG_WORKSPACE, r.workspace, r.workspace_md));
  }
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

static void backward_pooling(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  if (!l.wants_gradient(x)) return;
  const auto& a = std::get<Pool2D>(n.attrs);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto fwd = std::any_cast<dnnl::pooling_forward::primitive_desc>(r.pd);
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if (n.kind == OpKind::avg_pool) {
    alg = a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  const md_t dst_md = fwd.dst_desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::pooling_backward::primitive_desc pd =
      onednn::pooling_backward(l.engine, alg, fwd.src_desc(), dst_md, {a.kernel[0], a.kernel[1]},
                               pooling_window(n), fwd, attr);
  Step step;
  step.name = n.name + ":backward";
  step.op = std::string(to_string(n.kind)) + "_backward";
  step.primitive = dnnl::pooling_backward(pd);
  step.args.push_back(
      Arg::in(DNNL_ARG_DIFF_DST, l.gradient_as(n.output, pd.diff_dst_desc()), pd.diff_dst_desc()));
  if (r.workspace >= 0) {
    step.args.push_back(Arg::in(DNNL_ARG_WORKSPACE, r.workspace, r.workspace_md));
  }
  const int dx = l.new_arena_buffer(pd.diff_src_desc(), n.name + ":diff_src");
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SRC, dx, pd.diff_src_desc()));
  l.add_step(std::move(step), pd);
  l.add_gradient(x, dx, pd.diff_src_desc());
}

TFPIN_REGISTER_OP(max_pool, .infer = infer_pooling, .lower = lower_pooling,
                  .backward = backward_pooling);
TFPIN_REGISTER_OP(avg_pool, .infer = infer_pooling, .lower = lower_pooling,
                  .backward = backward_pooling);

}  // namespace tfpin::engine::detail
