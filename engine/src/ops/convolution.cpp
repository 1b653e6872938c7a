// Convolution (stride, padding, groups, dilation) with optional bias; post-ops ReLU, other
// activations and sum (residual add).
#include "../schedule.hpp"
#include "channels_last.hpp"
#include "common.hpp"
#include "pointwise.hpp"
#include "pointwise_siblings.hpp"
#include "winograd.hpp"

namespace tfpin::engine::detail {

static Status infer_convolution(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 2, 3, "2 or 3 (input, weights[, bias])"));
  TFPIN_TRY(expect_rank(ir, node, 0, 4, "input"));
  TFPIN_TRY(expect_rank(ir, node, 1, 4, "weights"));
  TFPIN_TRY(expect_constant(ir, node, 1, "weights"));
  Node& n = node_of(ir, node);
  const auto& a = std::get<Conv2D>(n.attrs);
  const Dims& x = value_of(ir, n.inputs[0]).dims;
  const Dims& w = value_of(ir, n.inputs[1]).dims;
  if (a.stride[0] < 1 || a.stride[1] < 1) {
    return graph_error(ir, node,
                       fmt::format("stride {}x{} is invalid: strides must be at least 1",
                                   a.stride[0], a.stride[1]));
  }
  if (a.dilation[0] < 1 || a.dilation[1] < 1) {
    return graph_error(ir, node,
                       fmt::format("dilation {}x{} is invalid: dilations must be at least 1 (1: a "
                                   "dense kernel)",
                                   a.dilation[0], a.dilation[1]));
  }
  for (std::int64_t p : a.padding) {
    if (p < 0) {
      return graph_error(ir, node,
                         fmt::format("padding [{}] is invalid: padding must be 0 or more",
                                     fmt::join(a.padding, ", ")));
    }
  }
  if (a.groups < 1 || x[1] % a.groups != 0 || w[0] % a.groups != 0) {
    return graph_error(
        ir, node,
        fmt::format("groups={} is invalid: it must be at least 1 and divide both the "
                    "input channels ({}) and the output channels ({})",
                    a.groups, x[1], w[0]));
  }
  if (w[1] * a.groups != x[1]) {
    return graph_error(
        ir, node,
        fmt::format("input '{}' has {} channels but weights '{}' {} expect {} "
                    "(weights are O, I/groups, KH, KW; groups={})",
                    value_of(ir, n.inputs[0]).name, x[1], value_of(ir, n.inputs[1]).name,
                    dims_string(w), w[1] * a.groups, a.groups));
  }
  if (n.inputs.size() == 3) {
    TFPIN_TRY(expect_constant(ir, node, 2, "bias"));
    TFPIN_TRY(expect_vector(ir, node, 2, w[0], "bias"));
  }
  const std::int64_t ph = x[2] + a.padding[0] + a.padding[2];
  const std::int64_t pw = x[3] + a.padding[1] + a.padding[3];
  // A dilated kernel spans (k - 1) d + 1 input pixels.
  const std::int64_t kh = (w[2] - 1) * a.dilation[0] + 1;
  const std::int64_t kw = (w[3] - 1) * a.dilation[1] + 1;
  if (kh > ph || kw > pw) {
    const bool dilated = a.dilation[0] > 1 || a.dilation[1] > 1;
    return graph_error(ir, node,
                       fmt::format("kernel {}x{}{} does not fit the padded input {}x{}", w[2], w[3],
                                   dilated ? fmt::format(" (dilation {}x{}: spans {}x{})",
                                                         a.dilation[0], a.dilation[1], kh, kw)
                                           : std::string(),
                                   ph, pw));
  }
  out = {x[0], w[0], (ph - kh) / a.stride[0] + 1, (pw - kw) / a.stride[1] + 1};
  return {};
}

namespace {

// oneDNN counts dilation from 0 (dense); ONNX and PyTorch from 1.
static onednn::Window convolution_window(const Conv2D& a) {
  return {{a.stride[0], a.stride[1]},
          {a.dilation[0] - 1, a.dilation[1] - 1},
          {a.padding[0], a.padding[1]},
          {a.padding[2], a.padding[3]}};
}

// Winograd is timed against the direct kernel when one run costs less than this (modelled):
// above it, on the large layers of batched inference, Winograd wins where oneDNN offers it, and
// the slower kernel's trial runs would cost more.
constexpr double timed_choice_max_us = 20000;

}  // namespace

static void lower_convolution(Lowering& l, int node) {
  if (lower_pointwise_siblings(l, node)) return;  // with its siblings, as one convolution
  Node& n = node_of(l.ir, node);
  const auto& a = std::get<Conv2D>(n.attrs);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& wd = value_of(l.ir, n.inputs[1]).dims;
  const Dims& od = value_of(l.ir, n.output).dims;
  const std::int64_t g = a.groups;
  const bool grouped = g > 1;
  dnnl::memory::dims wdims =
      grouped ? dnnl::memory::dims{g, wd[0] / g, wd[1], wd[2], wd[3]} : to_dnnl(wd);
  md_t w_user(wdims, dnnl::memory::data_type::f32, grouped ? tag::goihw : tag::oihw);
  md_t w_any(wdims, dnnl::memory::data_type::f32, tag::any);
  const bool has_bias = n.inputs.size() > 2;
  md_t b_md = has_bias ? md_t({wd[0]}, dnnl::memory::data_type::f32, tag::x) : md_t();

  int residual = -1;
  bool may_write_residual = false;
  for (const PostOp& p : n.post_ops) {
    if (p.kind == PostOp::Kind::sum) {
      residual = p.value;
      may_write_residual = p.in_place;
    }
  }
  // Layouts: keep the producer's blocked layout (no reorder between layers). Elsewhere ask for
  // the blocked layout oneDNN's direct kernels run on for the effective ISA (nChw16c with
  // AVX-512, nChw8c with AVX2), unless the options let oneDNN choose.
  const bool blocked_policy = l.options.blocked_layouts;
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const std::int64_t block = onednn::native_channel_block();
  auto blocked = [block](const Dims& d) {
    return md_t(to_dnnl(d), dnnl::memory::data_type::f32, block == 16 ? tag::nChw16c : tag::nChw8c);
  };
  md_t src_md = any_md(xd);
  if (!is_plain(x_md)) {
    src_md = x_md;
  } else if (blocked_policy && xd[1] % block == 0) {
    src_md = blocked(xd);
  }
  md_t dst_md = blocked_policy ? blocked(od) : any_md(od);
  if (residual >= 0 && !is_plain(l.value_md[static_cast<std::size_t>(residual)])) {
    dst_md = l.value_md[static_cast<std::size_t>(residual)];
  }
  const dnnl::algorithm algorithm = l.options.winograd && !l.training()
                                        ? dnnl::algorithm::convolution_auto
                                        : dnnl::algorithm::convolution_direct;
  const dnnl::primitive_attr attr = l.attributes(n);
  const onednn::Window window = convolution_window(a);
  auto make = [&](const md_t& s, const md_t& d) {
    return onednn::convolution_forward(l.engine, l.forward_kind(), algorithm, s, w_any, b_md, d,
                                       window, attr);
  };
  dnnl::convolution_forward::primitive_desc pd;
  // Winograd's timed alternatives: the direct kernel, oneDNN's other Winograd tile sizes.
  std::vector<dnnl::convolution_forward::primitive_desc> timed;
  // oneDNN's heuristics (convolution_auto) turn Winograd down below a batch of about 4, yet its
  // F(4x4, 3x3) kernel beats the direct one on every 3x3 stride-1 layer of ResNet-50 at batch 1
  // here (and picks it anyway at batch 32): ask for it explicitly where it applies. Not
  // everywhere: on AlexNet's conv3 at batch 1 (13x13, 192 -> 384 channels) it is 3.6x slower
  // than direct on 2 threads (on 1 it is faster; timed alone outside the executor it is as fast
  // as direct). So a small layer carries the direct kernel as an alternative, and the executor
  // keeps whichever ran faster in its first runs (Step::alternatives). oneDNN 2.6 has two
  // Winograd kernels, F(2x2, 3x3) and F(4x4, 3x3), and offers the first where it applies; neither
  // wins everywhere (standalone at batch 1 on 2 threads: 64 channels at 56x56, 4x4 tiles 18%
  // faster; 512 at 7x7, 2x2 tiles 1.6x faster), so both are timed.
  // (Training: oneDNN's direct kernels only, its Winograd backward is slower than them; tfpin's own
  // Winograd below.)
  if (l.options.winograd && !l.training() && winograd_shape(l.ir, node)) {
    std::vector<dnnl::convolution_forward::primitive_desc> winograd;
    try {
      winograd = onednn::convolution_forward_implementations(
          l.engine, dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
          src_md, w_any, b_md, dst_md, window, attr);
    } catch (const dnnl::error&) {
      // Not available for this shape or layout: direct (or oneDNN's choice) below.
      winograd.clear();
    }
    if (!winograd.empty()) pd = winograd.front();
    if (pd && modelled_microseconds(node_cost(l.ir, node), l.step_threads) < timed_choice_max_us) {
      // An alternative must read and write the same buffers in the same layouts.
      auto same_buffers = [&](const dnnl::convolution_forward::primitive_desc& other) {
        return other.src_desc() == pd.src_desc() && other.dst_desc() == pd.dst_desc();
      };
      try {
        auto direct = onednn::convolution_forward(l.engine, dnnl::prop_kind::forward_inference,
                                                  dnnl::algorithm::convolution_direct, src_md,
                                                  w_any, b_md, dst_md, window, attr);
        if (same_buffers(direct)) timed.push_back(direct);
      } catch (const dnnl::error&) {
        // no direct kernel for this layout
      }
      // oneDNN's other Winograd kernels (2.6 on AVX-512: F(4x4, 3x3) after F(2x2, 3x3)).
      for (std::size_t k = 1; k < winograd.size(); ++k) {
        if (same_buffers(winograd[k])) timed.push_back(winograd[k]);
      }
    }
  }
  try {
    if (!pd) pd = make(src_md, dst_md);
    if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) {
      pd = make(any_md(xd), any_md(od));  // a fixed layout only the reference supports: reorder
    }
  } catch (const dnnl::error&) {
    pd = make(any_md(xd), any_md(od));
  }

  const int src = l.read_as(x, pd.src_desc());
  const int weights = l.parameter_as(n.inputs[1], w_user, pd.weights_desc());
  int dst = -1;
  if (residual >= 0) {
    auto r = static_cast<std::size_t>(residual);
    // In place when the fusion pass found that every other reader of the residual runs before
    // this convolution, and the residual already is in the layout the convolution writes.
    const bool in_place =
        may_write_residual && l.value_md[r] == pd.dst_desc() &&
        l.buffers[static_cast<std::size_t>(l.value_buffer[r])].kind == BufferKind::arena;
    if (in_place) {
      dst = l.value_buffer[r];
      ++l.report.in_place_adds;
    } else {
      dst = l.new_arena_buffer(pd.dst_desc(), n.name);
      l.add_reorder(n.name + ":residual", l.value_buffer[r], l.value_md[r], dst, pd.dst_desc());
    }
  } else {
    dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  }

  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::convolution_forward(pd);
  if (std::string(pd.impl_info_str()).find("wino") != std::string::npos) {
    ++l.report.winograd_convolutions;
  }
  step.args.push_back(Arg::in(DNNL_ARG_SRC, src, pd.src_desc()));
  step.args.push_back(Arg::in(DNNL_ARG_WEIGHTS, weights, pd.weights_desc()));
  int bias = -1;
  if (has_bias) {
    bias = l.parameter_as(n.inputs[2], b_md, pd.bias_desc());
    step.args.push_back(Arg::in(DNNL_ARG_BIAS, bias, pd.bias_desc()));
  }
  // An in-place residual sum reads the destination before writing it.
  step.args.push_back(residual >= 0 ? Arg::in_out(DNNL_ARG_DST, dst, pd.dst_desc())
                                    : Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  for (const auto& other : timed) {
    Alternative alt;
    alt.primitive = dnnl::convolution_forward(other);
    alt.args = step.args;
    alt.args[1] =
        Arg::in(DNNL_ARG_WEIGHTS, l.parameter_as(n.inputs[1], w_user, other.weights_desc()),
                other.weights_desc());
    alt.scratchpad_bytes = other.scratchpad_desc().get_size();
    const char* impl = other.impl_info_str();
    alt.impl = impl != nullptr ? impl : "";
    step.alternatives.push_back(std::move(alt));
  }
  // tfpin's own Winograd kernel, timed in every case: it is what 3x3 layers have where oneDNN
  // offers no Winograd (AVX2, oneDNN 3), and beside oneDNN's otherwise.
  const bool own_winograd =
      add_winograd_alternative(l, node, step, pd.src_desc(), pd.weights_desc(), pd.dst_desc());
  // oneDNN's brgemm kernel in nhwc, on layers no square stride-1 Winograd candidate covers (7x7;
  // 1x7 and 7x1 and 3x3 at stride 2 time it beside tfpin's one-dimensional and polyphase
  // Winograd).
  const bool square_stride_one = wd[2] == wd[3] && a.stride[0] == 1 && a.stride[1] == 1;
  const bool winograd_layer = !timed.empty() || (own_winograd && square_stride_one) ||
                              std::string(pd.impl_info_str()).find("wino") != std::string::npos;
  const bool channels_last =
      !winograd_layer && add_channels_last_alternative(l, node, step, pd, window, attr, w_user);
  // tfpin's own 1x1 kernel (constant weights: inference).
  const auto& w_data = value_of(l.ir, n.inputs[1]).data;
  const bool own_pointwise =
      wd[2] == 1 && wd[3] == 1 && w_data != nullptr &&
      add_pointwise_alternative(l, n, n.name, step, *w_data, has_bias, pd.src_desc(),
                                pd.dst_desc());
  // Its direct convolution of larger kernels: at stride 2 (beside the polyphase Winograd and
  // oneDNN's direct kernels, which at one image stream the weights without fetching ahead:
  // ResNet-50's layer4.0.conv2 read 53% of the peak there), and where no Winograd applies (at
  // stride 1 Winograd wins by far: Inception v3's 1x7 layers 1.7x).
  const bool strided = a.stride[0] != 1 || a.stride[1] != 1;
  const bool own_direct = w_data != nullptr && (strided || (!winograd_layer && !own_winograd)) &&
                          add_direct_alternative(l, n, step, *w_data, wd[2], wd[3], has_bias,
                                                 pd.src_desc(), pd.dst_desc());
  if (!timed.empty() || own_winograd || channels_last || own_pointwise || own_direct) {
    ++l.report.timed_choices;
  }
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
  l.report.flops += 2.0 * static_cast<double>(od[0] * od[1] * od[2] * od[3]) *
                    static_cast<double>(wd[1] * wd[2] * wd[3]);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.pd = pd;
  r.src = src;
  r.src_md = pd.src_desc();
  r.weights = weights;
  r.weights_md = pd.weights_desc();
  r.bias = bias;
}

static void backward_convolution(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const auto& a = std::get<Conv2D>(n.attrs);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto fwd = std::any_cast<dnnl::convolution_forward::primitive_desc>(r.pd);
  const md_t dst_md = fwd.dst_desc();
  const int dy = l.gradient_before_relu(node, dst_md);
  const onednn::Window window = convolution_window(a);
  const auto direct = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto is_ref = [](const auto& pd) {
    return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
  };
  const auto any = [](const md_t& md) {
    return md_t(onednn::dims_of(md), dnnl::memory::data_type::f32, tag::any);
  };

  const int x = n.inputs[0];
  if (l.wants_gradient(x)) {
    // Ask for the forward's layouts (no reorders); let oneDNN choose when only its reference
    // implementation takes them.
    auto make = [&](const md_t& src, const md_t& w, const md_t& dst) {
      return onednn::convolution_backward_data(l.engine, direct, src, w, dst, window, fwd, attr);
    };
    dnnl::convolution_backward_data::primitive_desc pd;
    try {
      pd = make(fwd.src_desc(), fwd.weights_desc(), dst_md);
    } catch (const dnnl::error&) {
      pd = {};
    }
    if (!pd || is_ref(pd)) {
      pd = make(any(fwd.src_desc()), any(fwd.weights_desc()), any(dst_md));
    }
    Step step;
    step.name = n.name + ":backward_data";
    step.op = "convolution_backward_data";
    step.primitive = dnnl::convolution_backward_data(pd);
    // tfpin's Winograd as its alternative: dx is a convolution of dy too.
    add_data_gradient(
        l, node, std::move(step), pd, dy, dst_md, pd.diff_dst_desc(), pd.weights_desc(),
        pd.diff_src_desc(), [&](Step& s) {
          if (add_winograd_backward_data_alternative(l, node, s, pd.diff_dst_desc(),
                                                     pd.weights_desc(), pd.diff_src_desc())) {
            ++l.report.timed_choices;
          }
        });
  }

  const bool has_bias = r.bias >= 0;
  const md_t b_md = has_bias ? fwd.bias_desc() : md_t();
  auto make = [&](const md_t& src, const md_t& dw, const md_t& dst) {
    return onednn::convolution_backward_weights(l.engine, direct, src, dw, b_md, dst, window, fwd,
                                                attr);
  };
  dnnl::convolution_backward_weights::primitive_desc pd;
  try {
    pd = make(fwd.src_desc(), fwd.weights_desc(), dst_md);
  } catch (const dnnl::error&) {
    pd = {};
  }
  if (!pd || is_ref(pd)) pd = make(any(fwd.src_desc()), any(fwd.weights_desc()), any(dst_md));
  Step step;
  step.name = n.name + ":backward_weights";
  step.op = "convolution_backward_weights";
  step.primitive = dnnl::convolution_backward_weights(pd);
  step.args.push_back(Arg::in(
      DNNL_ARG_SRC, l.reordered(r.src, r.src_md, pd.src_desc(), n.name + ":src"), pd.src_desc()));
  step.args.push_back(Arg::in(DNNL_ARG_DIFF_DST,
                              l.reordered(dy, dst_md, pd.diff_dst_desc(), n.name + ":diff_dst"),
                              pd.diff_dst_desc()));
  add_weight_gradients(l, node, std::move(step), pd, pd.diff_weights_desc(),
                       has_bias ? pd.diff_bias_desc() : md_t(), [&](Step& s) {
                         if (add_winograd_weight_gradient_alternative(
                                 l, node, s, pd.src_desc(), pd.diff_dst_desc(),
                                 pd.diff_weights_desc(), has_bias ? pd.diff_bias_desc() : md_t())) {
                           ++l.report.timed_choices;
                         }
                       });
}

TFPIN_REGISTER_OP(convolution, .infer = infer_convolution, .lower = lower_convolution,
                  .backward = backward_convolution, .has_parameters = true);

}  // namespace tfpin::engine::detail
