// Local response normalisation across channels (AlexNet/GoogLeNet as first published).
#include <cmath>

#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_lrn(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  TFPIN_TRY(expect_rank(ir, node, 0, 4, "input"));
  Node& n = node_of(ir, node);
  const auto& a = std::get<Lrn>(n.attrs);
  if (a.size < 1 || a.size % 2 == 0) {
    return graph_error(ir, node,
                       fmt::format("size={} is invalid: it must be a positive odd number", a.size));
  }
  if (!(a.k > 0.0f) || !std::isfinite(a.alpha) || !std::isfinite(a.beta) || !std::isfinite(a.k)) {
    return graph_error(ir, node,
                       fmt::format("k={} alpha={} beta={} are invalid: k must be positive and all "
                                   "finite",
                                   a.k, a.alpha, a.beta));
  }
  out = value_of(ir, n.inputs[0]).dims;
  return {};
}

static void lower_lrn(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const auto& a = std::get<Lrn>(n.attrs);
  const int x = n.inputs[0];
  const md_t& x_md = l.value_md[static_cast<std::size_t>(x)];
  const dnnl::lrn_forward::primitive_desc pd =
      onednn::lrn_forward(l.engine, x_md, a.size, a.alpha, a.beta, a.k, l.attributes(n));
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::lrn_forward(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, l.read_as(x, pd.src_desc()), pd.src_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
}

TFPIN_REGISTER_OP(lrn, .infer = infer_lrn, .lower = lower_lrn);

}  // namespace tfpin::engine::detail
