// Concatenation along channels (Inception/GoogLeNet branches). Its backward hands each input the
// channel slice of the output's gradient (a reorder from a sub-memory view).
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
  const dnnl::concat::primitive_desc pd = onednn::concat(l.engine, 1, srcs, l.attributes(n));
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

static void backward_concat(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
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
