// Sibling 1x1 convolutions at batch 1 as one convolution (pointwise_siblings.hpp).
#include "pointwise_siblings.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "common.hpp"
#include "pointwise.hpp"

namespace tfpin::engine::detail {

namespace {

bool is_member_candidate(const Ir& ir, const Node& n) {
  if (n.dead || n.kind != OpKind::convolution) return false;
  const auto& a = std::get<Conv2D>(n.attrs);
  if (a.groups != 1 || a.dilation != std::array<std::int64_t, 2>{1, 1} ||
      std::any_of(a.padding.begin(), a.padding.end(), [](std::int64_t p) { return p != 0; })) {
    return false;
  }
  for (std::size_t k = 1; k < n.inputs.size(); ++k) {
    if (ir.values[static_cast<std::size_t>(n.inputs[k])].kind != ValueKind::constant) return false;
  }
  const Dims& w = ir.values[static_cast<std::size_t>(n.inputs[1])].dims;
  if (w[2] != 1 || w[3] != 1) return false;
  if (n.post_ops.size() > 1 || (n.post_ops.size() == 1 && n.post_ops[0].kind != PostOp::Kind::relu))
    return false;
  const Value& out = ir.values[static_cast<std::size_t>(n.output)];
  if (out.is_output || out.dims[0] != 1) return false;
  for (int c : out.consumers) {
    const Node& consumer = ir.nodes[static_cast<std::size_t>(c)];
    if (consumer.kind == OpKind::concat) return false;
    for (const PostOp& p : consumer.post_ops) {
      if (p.kind == PostOp::Kind::sum && p.value == n.output) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::vector<int>> pointwise_sibling_groups(const Ir& ir, const std::vector<int>& order,
                                                       std::int64_t block) {
  // (input, stride, with ReLU) -> candidates in topological order
  using Key = std::tuple<int, std::array<std::int64_t, 2>, bool>;
  std::map<Key, std::vector<int>> siblings;
  for (int node : order) {
    const Node& n = ir.nodes[static_cast<std::size_t>(node)];
    if (!is_member_candidate(ir, n)) continue;
    siblings[{n.inputs[0], std::get<Conv2D>(n.attrs).stride, !n.post_ops.empty()}].push_back(node);
  }
  std::vector<std::vector<int>> groups(ir.nodes.size());
  for (const auto& [key, nodes] : siblings) {
    auto channels = [&](int node) {
      return ir.values[static_cast<std::size_t>(ir.nodes[static_cast<std::size_t>(node)].output)]
          .dims[1];
    };
    std::vector<int> members;
    for (int node : nodes) {
      if (channels(node) % block == 0) members.push_back(node);
    }
    for (int node : nodes) {
      if (channels(node) % block != 0) {
        members.push_back(node);
        break;
      }
    }
    if (members.size() < 2) continue;
    // The first in `order` among them leads: it is lowered before any member's consumer.
    const int leader =
        *std::find_if(nodes.begin(), nodes.end(), [&](int node) {
          return std::find(members.begin(), members.end(), node) != members.end();
        });
    groups[static_cast<std::size_t>(leader)] = std::move(members);
  }
  return groups;
}

bool lower_pointwise_siblings(Lowering& l, int node) {
  const std::vector<int>& group = l.sibling_groups[static_cast<std::size_t>(node)];
  if (group.size() < 2) return false;
  const Node& first = node_of(l.ir, group.front());
  const int x = first.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& first_out = value_of(l.ir, first.output).dims;
  std::int64_t channels = 0;
  for (int m : group) channels += value_of(l.ir, node_of(l.ir, m).output).dims[1];
  const Dims merged_dims{1, channels, first_out[2], first_out[3]};

  // The merged output in the ISA's blocked layout, whatever the layout options: only whole
  // channel blocks make the slices the members' outputs.
  const std::int64_t block = onednn::native_channel_block();
  const std::int64_t pixels = first_out[2] * first_out[3];
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const std::int64_t c = value_of(l.ir, node_of(l.ir, group[k]).output).dims[1];
    const bool aligned = offset % block == 0 && (offset * pixels * 4) % 64 == 0;
    if (!aligned || (k + 1 < group.size() && c % block != 0)) return false;
    offset += c;
  }
  const md_t dst_md = channel_sliceable_md(merged_dims, block);
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  md_t src_md = any_md(xd);
  if (!is_plain(x_md)) {
    src_md = x_md;
  } else if (xd[1] % block == 0) {
    src_md = channel_sliceable_md(xd, block);
  }
  const dnnl::memory::dims wdims{channels, xd[1], 1, 1};
  const md_t w_user(wdims, dnnl::memory::data_type::f32, tag::oihw);
  const md_t w_any(wdims, dnnl::memory::data_type::f32, tag::any);
  const md_t b_md({channels}, dnnl::memory::data_type::f32, tag::x);
  const auto& a = std::get<Conv2D>(first.attrs);
  const onednn::Window window{{a.stride[0], a.stride[1]}, {0, 0}, {0, 0}, {0, 0}};
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = onednn::convolution_forward(l.engine, dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::convolution_direct, src_md, w_any, b_md,
                                     dst_md, window, l.attributes(first));
  } catch (const dnnl::error&) {
    return false;
  }
  if (pd.dst_desc() != dst_md || std::string(pd.impl_info_str()).find("ref") != std::string::npos) {
    return false;
  }

  std::vector<float> weights;
  std::vector<float> bias;
  std::string name;
  for (int m : group) {
    const Node& n = node_of(l.ir, m);
    const std::vector<float>& w = *value_of(l.ir, n.inputs[1]).data;
    weights.insert(weights.end(), w.begin(), w.end());
    const std::int64_t c = value_of(l.ir, n.output).dims[1];
    if (n.inputs.size() > 2) {
      const std::vector<float>& b = *value_of(l.ir, n.inputs[2]).data;
      bias.insert(bias.end(), b.begin(), b.end());
    } else {
      bias.insert(bias.end(), static_cast<std::size_t>(c), 0.0f);
    }
    name += (name.empty() ? "" : "+") + n.name;
  }
  Step step;
  step.name = name;
  step.op = l.op_label(first);
  step.primitive = dnnl::convolution_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  step.args.push_back(
      Arg::in(DNNL_ARG_WEIGHTS,
              l.constant_values(weights, w_user, pd.weights_desc(), name + ":weights"),
              pd.weights_desc()));
  step.args.push_back(Arg::in(DNNL_ARG_BIAS,
                              l.constant_values(bias, b_md, pd.bias_desc(), name + ":bias"),
                              pd.bias_desc()));
  const int dst = l.new_arena_buffer(pd.dst_desc(), name);
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  // tfpin's own 1x1 kernel beside oneDNN's, on the joined weights.
  if (add_pointwise_alternative(l, first, name, step, weights, true, pd.src_desc(),
                                pd.dst_desc())) {
    ++l.report.timed_choices;
  }
  l.add_step(std::move(step), pd);

  offset = 0;
  for (int m : group) {
    const Node& n = node_of(l.ir, m);
    const Dims& od = value_of(l.ir, n.output).dims;
    const md_t slice_md = channel_sliceable_md(od, block);
    Buffer slice;
    slice.kind = BufferKind::arena;
    slice.bytes = slice_md.get_size();
    slice.name = n.name;
    slice.alias_of = dst;
    slice.alias_offset = static_cast<std::uint64_t>(offset * pixels) * sizeof(float);
    l.buffers.push_back(std::move(slice));
    l.define(n.output, slice_md, static_cast<int>(l.buffers.size() - 1));
    l.computed_with_sibling[static_cast<std::size_t>(m)] = true;
    l.report.flops += 2.0 * static_cast<double>(od[1] * od[2] * od[3]) * static_cast<double>(xd[1]);
    offset += od[1];
  }
  l.report.merged_convolutions += static_cast<int>(group.size());
  return true;
}

}  // namespace tfpin::engine::detail
