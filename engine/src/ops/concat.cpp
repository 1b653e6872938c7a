// Concatenation along channels (Inception/GoogLeNet branches). Its backward hands each input the
// channel slice of the output's gradient (a reorder from a sub-memory view); when that gradient
// comes in parts (the output feeds several branches), each slice is summed from the parts' slices
// directly.
#include <algorithm>

#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_concat(Ir& ir, int node, Dims& out) {
  Node& n = node_of(ir, node);
  if (n.inputs.empty()) return graph_error(ir, node, "has no inputs, expected at least 1");
  const Value& first = value_of(ir, n.inputs[0]);
  if (first.dims.size() != 4 && first.dims.size() != 2) {
    return graph_error(ir, node,
                       fmt::format("input '{}' has dimensions {}, expected 4 or 2", first.name,
                                   dims_string(first.dims)));
  }
  Dims o = first.dims;
  o[1] = 0;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const Value& v = value_of(ir, n.inputs[k]);
    bool same = v.dims.size() == first.dims.size();
    for (std::size_t d = 0; same && d < v.dims.size(); ++d) {
      same = d == 1 || v.dims[d] == first.dims[d];
    }
    if (!same) {
      return graph_error(
          ir, node,
          fmt::format("input #{} '{}' has dimensions {} but input #0 '{}' has {}: "
                      "all but the channels must match",
                      k, v.name, dims_string(v.dims), first.name, dims_string(first.dims)));
    }
    o[1] += v.dims[1];
  }
  out = o;
  return {};
}

static void lower_concat(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  std::vector<md_t> srcs;
  for (int x : n.inputs) srcs.push_back(l.value_md[static_cast<std::size_t>(x)]);
  // Inputs all in one layout whose channel slices are runs (nChw16c, nChw8c, nchw), each starting
  // on a block: the output in that layout too. oneDNN's own choice can put the channel blocks
  // outermost, which the consumers then reorder back and the backward cannot slice in place.
  const std::optional<std::int64_t> block = channel_sliceable_block(srcs[0]);
  bool sliceable = block.has_value();
  std::int64_t channels = 0;
  for (std::size_t k = 0; sliceable && k < srcs.size(); ++k) {
    sliceable = channel_sliceable_block(srcs[k]) == block && channels % *block == 0;
    channels += value_of(l.ir, n.inputs[k]).dims[1];
  }
  std::optional<dnnl::concat::primitive_desc> chosen;
  if (sliceable) {
    try {
      chosen = onednn::concat(l.engine, channel_sliceable_md(value_of(l.ir, n.output).dims, *block),
                              1, srcs, l.attributes(n));
    } catch (const dnnl::error&) {
      // (oneDNN has no implementation for it: its own choice of layout below.)
    }
  }
  const dnnl::concat::primitive_desc pd =
      chosen ? *chosen : onednn::concat(l.engine, 1, srcs, l.attributes(n));
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::concat(pd);
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const int x = n.inputs[k];
    step.args.push_back(Arg::in(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k),
                                l.read_as(x, pd.src_desc(static_cast<int>(k))),
                                pd.src_desc(static_cast<int>(k))));
  }
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

namespace {

// A run of one input's gradient: `length` floats at `to` in it, summed from the parts at `from`.
struct SliceRun {
  std::size_t output = 0;  // index among the step's outputs
  std::size_t from = 0;
  std::size_t to = 0;
  std::size_t length = 0;
};

// Each input's gradient as the sum of the output gradient's parts, read slice by slice in one
// step: the whole sum is never written and read back (a third less memory traffic than a sum
// step, then a reorder per slice). Only where every slice is, image by image, one contiguous run
// in the output's layout and in the input's (channel_sliceable_block); false otherwise.
bool backward_concat_from_parts(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const auto& parts = l.gradient_parts(n.output);
  if (parts.size() < 2) return false;
  const md_t y_md = l.value_md[static_cast<std::size_t>(n.output)];
  const std::optional<std::int64_t> block = channel_sliceable_block(y_md);
  if (!block) return false;
  const Dims& od = value_of(l.ir, n.output).dims;
  std::int64_t pixels = 1;
  for (std::size_t d = 2; d < od.size(); ++d) pixels *= od[d];
  auto padded = [&](std::int64_t channels) { return (channels + *block - 1) / *block * *block; };
  if (static_cast<std::int64_t>(y_md.get_size()) != od[0] * padded(od[1]) * pixels * 4) {
    return false;
  }
  std::vector<int> wanted;  // input indices given a gradient
  std::vector<std::int64_t> begins;
  std::int64_t begin = 0;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const int x = n.inputs[k];
    const std::int64_t channels = value_of(l.ir, x).dims[1];
    begins.push_back(begin);
    // The next slice starts inside this one's last block: not a run of whole blocks.
    if (begin % *block != 0) return false;
    begin += channels;
    if (!l.wants_gradient(x)) continue;
    const md_t& want = l.value_md[static_cast<std::size_t>(x)];
    if (channel_sliceable_block(want) != block ||
        static_cast<std::int64_t>(want.get_size()) != od[0] * padded(channels) * pixels * 4) {
      return false;
    }
    wanted.push_back(static_cast<int>(k));
  }
  if (wanted.empty()) return false;

  // Runs of at most `chunk` floats, so that both threads get work and the parts after the first
  // two are added in the cache.
  constexpr std::int64_t chunk = 4096;
  std::vector<SliceRun> runs;
  for (std::size_t j = 0; j < wanted.size(); ++j) {
    const auto k = static_cast<std::size_t>(wanted[j]);
    const std::int64_t length = padded(value_of(l.ir, n.inputs[k]).dims[1]) * pixels;
    for (std::int64_t image = 0; image < od[0]; ++image) {
      const std::int64_t from = (image * padded(od[1]) + begins[k]) * pixels;
      const std::int64_t to = image * length;
      for (std::int64_t at = 0; at < length; at += chunk) {
        runs.push_back({j, static_cast<std::size_t>(from + at), static_cast<std::size_t>(to + at),
                        static_cast<std::size_t>(std::min(chunk, length - at))});
      }
    }
  }

  Step step;
  step.name = n.name + ":diff_src";
  step.op = "sum+concat_backward";
  for (const auto& [b, md] : parts) {
    step.args.push_back(Arg::in(0, l.reordered(b, md, y_md, n.name + ":gradient"), y_md));
  }
  std::vector<int> dxs;
  for (int k : wanted) {
    const int x = n.inputs[static_cast<std::size_t>(k)];
    const md_t& want = l.value_md[static_cast<std::size_t>(x)];
    dxs.push_back(l.new_arena_buffer(want, fmt::format("{}:diff_src{}", n.name, k)));
    step.args.push_back(Arg::out(0, dxs.back(), want));
  }
  const std::size_t count = parts.size();
  step.kernel = [runs = std::move(runs), count](const KernelCall& call) {
    const std::span<void* const> sources = call.data.first(count);
    const auto total = static_cast<std::ptrdiff_t>(runs.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t r = 0; r < total; ++r) {
      const SliceRun& run = runs[static_cast<std::size_t>(r)];
      auto* dx = static_cast<float*>(call.data[count + run.output]);
      sum_floats(sources, run.from, dx + run.to, run.length);
    }
  };
  l.add_kernel_step(std::move(step));
  for (std::size_t j = 0; j < wanted.size(); ++j) {
    const int x = n.inputs[static_cast<std::size_t>(wanted[j])];
    l.add_gradient(x, dxs[j], l.value_md[static_cast<std::size_t>(x)]);
  }
  return true;
}

}  // namespace

static void backward_concat(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  if (backward_concat_from_parts(l, node)) return;
  const Dims& od = value_of(l.ir, n.output).dims;
  const md_t y_md = l.value_md[static_cast<std::size_t>(n.output)];
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const int x = n.inputs[k];
    const Dims& xd = value_of(l.ir, x).dims;
    dnnl::memory::dims offsets(xd.size(), 0);
    offsets[1] = offset;
    offset += xd[1];
    if (!l.wants_gradient(x)) continue;
    const md_t want = l.value_md[static_cast<std::size_t>(x)];
    const std::string name = fmt::format("{}:diff_src{}", n.name, k);
    const int dx = l.new_arena_buffer(want, name);
    try {
      // A slice of a blocked layout exists only at whole blocks of channels.
      const md_t slice = y_md.submemory_desc(to_dnnl(xd), offsets);
      l.add_reorder(name, l.gradient_as(n.output, y_md), slice, dx, want);
    } catch (const dnnl::error&) {
      const md_t plain = plain_md(od, od.size() == 4 ? Layout::nchw : Layout::nc);
      const md_t slice = plain.submemory_desc(to_dnnl(xd), offsets);
      l.add_reorder(name, l.gradient_as(n.output, plain), slice, dx, want);
    }
    l.add_gradient(x, dx, want);
  }
}

TFPIN_REGISTER_OP(concat, .infer = infer_concat, .lower = lower_concat,
                  .backward = backward_concat);

}  // namespace tfpin::engine::detail
