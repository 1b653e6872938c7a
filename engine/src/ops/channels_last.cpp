// A convolution's channels-last alternative (channels_last.hpp): x reordered to nhwc, oneDNN's
// brgemm convolution, y reordered back, all in the lane's scratchpad.
#include "channels_last.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>

#include "../schedule.hpp"
#include "common.hpp"

namespace tfpin::engine::detail {

namespace {

constexpr std::uint64_t scratch_alignment = 64;
// ResNet-50's 3x3 stride-2 layers have 116 to 462 FLOPs per byte of their nhwc copies at any batch.
constexpr double min_flops_per_copied_byte = 100;

std::uint64_t aligned(std::uint64_t bytes) {
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

bool is_sum(const PostOp& p) { return p.kind == PostOp::Kind::sum; }

// The three primitives and where each one's memory is: the step's buffers (KernelCall::data:
// src, weights[, bias], dst) and, at these offsets, the scratchpad.
struct ChannelsLastConvolution {
  dnnl::engine engine;
  dnnl::reorder to_nhwc;
  dnnl::convolution_forward convolution;
  dnnl::reorder from_nhwc;
  md_t src_md, src_nhwc, weights_md, bias_md, dst_nhwc, dst_md;
  md_t to_scratch_md, convolution_scratch_md, from_scratch_md;
  bool has_bias = false;
  std::uint64_t dst_offset = 0;  // src_nhwc at 0
  std::uint64_t to_scratch_offset = 0;
  std::uint64_t convolution_scratch_offset = 0;
  std::uint64_t from_scratch_offset = 0;

  void run(const KernelCall& call) const {
    dnnl::stream& stream = *call.stream;
    std::byte* scratch = call.scratch;
    auto memory = [&](const md_t& md, void* data) { return dnnl::memory(md, engine, data); };
    dnnl::memory x = memory(src_nhwc, scratch);
    dnnl::memory y = memory(dst_nhwc, scratch + dst_offset);
    to_nhwc.execute(stream,
                    {{DNNL_ARG_FROM, memory(src_md, call.data[0])},
                     {DNNL_ARG_TO, x},
                     {DNNL_ARG_SCRATCHPAD, memory(to_scratch_md, scratch + to_scratch_offset)}});
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, x},
        {DNNL_ARG_WEIGHTS, memory(weights_md, call.data[1])},
        {DNNL_ARG_DST, y},
        {DNNL_ARG_SCRATCHPAD,
         memory(convolution_scratch_md, scratch + convolution_scratch_offset)}};
    if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(bias_md, call.data[2]));
    convolution.execute(stream, args);
    from_nhwc.execute(
        stream, {{DNNL_ARG_FROM, y},
                 {DNNL_ARG_TO, memory(dst_md, call.data[has_bias ? 3 : 2])},
                 {DNNL_ARG_SCRATCHPAD, memory(from_scratch_md, scratch + from_scratch_offset)}});
    stream.wait();
  }
};

}  // namespace

bool add_channels_last_alternative(Lowering& l, int node, Step& step,
                                   const dnnl::convolution_forward::primitive_desc& pd,
                                   const onednn::Window& window, const dnnl::primitive_attr& attr,
                                   const md_t& w_user) {
  const Node& n = node_of(l.ir, node);
  const Dims& wd = value_of(l.ir, n.inputs[1]).dims;
  const bool pointwise = wd[2] == 1 && wd[3] == 1;
  // Training's backward steps read the forward's layouts; a sum post-op would need the residual
  // in nhwc too.
  if (!l.options.channels_last || l.training() || pointwise ||
      std::any_of(n.post_ops.begin(), n.post_ops.end(), is_sum)) {
    return false;
  }
  const md_t src_md = pd.src_desc();
  const md_t dst_md = pd.dst_desc();
  const md_t src_nhwc(onednn::dims_of(src_md), dnnl::memory::data_type::f32, tag::nhwc);
  const md_t dst_nhwc(onednn::dims_of(dst_md), dnnl::memory::data_type::f32, tag::nhwc);
  if (src_md == src_nhwc || dst_md == dst_nhwc) return false;  // already channels-last
  // The reorders pass over x and y twice each: on a layer with few FLOPs per byte of them (a stem
  // that widens 3 channels to 64 at full resolution: 61 per byte at batch 32) they cost more than
  // the faster kernel saves, and their copies would be the largest scratchpad of the network.
  const auto copy_bytes = static_cast<double>(src_nhwc.get_size() + dst_nhwc.get_size());
  if (node_cost(l.ir, node).flops < min_flops_per_copied_byte * copy_bytes) return false;

  const bool has_bias = n.inputs.size() > 2;
  const md_t b_md = has_bias ? pd.bias_desc() : md_t();
  const md_t w_any(onednn::dims_of(w_user), dnnl::memory::data_type::f32, tag::any);
  dnnl::convolution_forward::primitive_desc brgemm;
  try {
    brgemm = onednn::convolution_forward(l.engine, dnnl::prop_kind::forward_inference,
                                         dnnl::algorithm::convolution_direct, src_nhwc, w_any, b_md,
                                         dst_nhwc, window, attr);
  } catch (const dnnl::error&) {
    return false;
  }
  const char* impl = brgemm.impl_info_str();
  if (impl == nullptr || std::string(impl).find("brg") == std::string::npos ||
      brgemm.src_desc() != src_nhwc || brgemm.dst_desc() != dst_nhwc) {
    return false;  // only oneDNN's brgemm kernels repay the two reorders
  }
  dnnl::primitive_attr reorder_attr;
  reorder_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc to(l.engine, src_md, l.engine, src_nhwc, reorder_attr);
  const dnnl::reorder::primitive_desc from(l.engine, dst_nhwc, l.engine, dst_md, reorder_attr);

  auto state = std::make_shared<ChannelsLastConvolution>();
  state->engine = l.engine;
  state->to_nhwc = dnnl::reorder(to);
  state->convolution = dnnl::convolution_forward(brgemm);
  state->from_nhwc = dnnl::reorder(from);
  state->src_md = src_md;
  state->src_nhwc = src_nhwc;
  state->weights_md = brgemm.weights_desc();
  state->bias_md = b_md;
  state->dst_nhwc = dst_nhwc;
  state->dst_md = dst_md;
  state->to_scratch_md = to.scratchpad_desc();
  state->convolution_scratch_md = brgemm.scratchpad_desc();
  state->from_scratch_md = from.scratchpad_desc();
  state->has_bias = has_bias;
  state->dst_offset = aligned(src_nhwc.get_size());
  state->to_scratch_offset = state->dst_offset + aligned(dst_nhwc.get_size());
  state->convolution_scratch_offset =
      state->to_scratch_offset + aligned(to.scratchpad_desc().get_size());
  state->from_scratch_offset =
      state->convolution_scratch_offset + aligned(brgemm.scratchpad_desc().get_size());

  Alternative alt;
  alt.args = step.args;
  alt.args[1] =
      Arg::in(DNNL_ARG_WEIGHTS, l.parameter_as(n.inputs[1], w_user, brgemm.weights_desc()),
              brgemm.weights_desc());
  alt.scratchpad_bytes = state->from_scratch_offset + aligned(from.scratchpad_desc().get_size());
  alt.impl = std::string(channels_last_prefix) + impl;
  alt.kernel = [state](const KernelCall& call) { state->run(call); };
  step.alternatives.push_back(std::move(alt));
  return true;
}

}  // namespace tfpin::engine::detail
