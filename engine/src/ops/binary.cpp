// Addition or multiplication with b broadcast to a's shape (NumPy's rule, right-aligned):
// per-channel scales and shifts (C,1,1), squeeze-and-excitation gates (N,C,1,1), scalars. b may be
// a constant. Training: a's gradient is dy (add) or dy b (mul); b's is the same summed over its
// broadcast dimensions.
#include <optional>

#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_binary(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 2, 2, "2 (a, b)"));
  Node& n = node_of(ir, node);
  const Value& a = value_of(ir, n.inputs[0]);
  const Value& b = value_of(ir, n.inputs[1]);
  if (a.kind == ValueKind::constant) {
    return graph_error(ir, node,
                       fmt::format("a '{}' {} is a constant: only b may be one (swap the "
                                   "operands, or fold the operation)",
                                   a.name, dims_string(a.dims)));
  }
  TFPIN_TRY(expect_image_or_matrix(ir, node, 0, "a"));
  bool broadcasts = b.dims.size() <= a.dims.size();
  const std::size_t offset = broadcasts ? a.dims.size() - b.dims.size() : 0;
  for (std::size_t d = 0; broadcasts && d < b.dims.size(); ++d) {
    broadcasts = b.dims[d] == 1 || b.dims[d] == a.dims[d + offset];
  }
  if (!broadcasts) {
    return graph_error(
        ir, node,
        fmt::format("b '{}' {} does not broadcast to a '{}' {}: b needs at most a's number of "
                    "dimensions, each (aligned to the right) 1 or a's",
                    b.name, dims_string(b.dims), a.name, dims_string(a.dims)));
  }
  out = a.dims;
  return {};
}

namespace {

// b's dimensions with 1s in front, to a's rank.
static Dims broadcast_dims(const Dims& b, std::size_t rank) {
  Dims d(rank - b.size(), 1);
  d.insert(d.end(), b.begin(), b.end());
  return d;
}

static md_t row_major(const Dims& dims) {
  static constexpr tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd};
  return md_t(to_dnnl(dims), dnnl::memory::data_type::f32, tags[dims.size() - 1]);
}

// `dims` in the format of `like` (of `like_dims`), when it is one the engine makes.
static std::optional<md_t> same_format(const md_t& like, const Dims& like_dims, const Dims& dims) {
  const std::vector<tag> candidates =
      like_dims.size() == 4 ? std::vector<tag>{tag::nchw, tag::nhwc, tag::nChw16c, tag::nChw8c}
                            : std::vector<tag>{tag::nc};
  for (tag t : candidates) {
    if (md_t(to_dnnl(like_dims), dnnl::memory::data_type::f32, t) == like) {
      return md_t(to_dnnl(dims), dnnl::memory::data_type::f32, t);
    }
  }
  return std::nullopt;
}

static bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

static dnnl::algorithm algorithm_of(const Node& n) {
  return std::get<Binary>(n.attrs).kind == BinaryKind::add ? dnnl::algorithm::binary_add
                                                           : dnnl::algorithm::binary_mul;
}

// b (value `b`, broadcast to `dims`) in layout `want`.
static int operand_b(Lowering& l, int b, const Dims& dims, const md_t& want) {
  const Value& v = value_of(l.ir, b);
  if (v.kind == ValueKind::constant) return l.constant_as(b, row_major(dims), want);
  if (v.dims.size() == dims.size()) return l.read_as(b, want);
  // A matrix against an image: its row-major form is that of its broadcast dimensions.
  const int plain = l.read_as(b, row_major(v.dims));
  return l.reordered(plain, row_major(dims), want, v.name + ":broadcast");
}

}  // namespace

static void lower_binary(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int a = n.inputs[0];
  const int b = n.inputs[1];
  const Dims& ad = value_of(l.ir, a).dims;
  const Dims bd = broadcast_dims(value_of(l.ir, b).dims, ad.size());
  const md_t& a_md = l.value_md[static_cast<std::size_t>(a)];
  const dnnl::primitive_attr attr = l.attributes(n);
  // oneDNN's jit kernel wants b in a's format (2.6: a blocked a with a plain broadcast b runs on
  // the reference kernel). Try a's layout first, then a plain a (one reorder), else take the
  // reference kernel.
  std::vector<md_t> src0s{a_md};
  if (!is_plain(a_md)) {
    src0s.push_back(plain_md(ad, ad.size() == 4 ? l.ir.default_image_layout : Layout::nc));
  }
  dnnl::binary::primitive_desc pd;
  dnnl::binary::primitive_desc reference;
  for (const md_t& src0 : src0s) {
    std::vector<md_t> src1s;
    if (std::optional<md_t> same = same_format(src0, ad, bd)) src1s.push_back(*same);
    src1s.push_back(row_major(bd));
    for (const md_t& src1 : src1s) {
      dnnl::binary::primitive_desc candidate;
      try {
        candidate = onednn::binary(l.engine, algorithm_of(n), src0, src1, src0, attr);
      } catch (const dnnl::error&) {
        continue;
      }
      if (!is_reference(candidate)) {
        pd = candidate;
        break;
      }
      if (!reference) reference = candidate;
    }
    if (pd) break;
  }
  if (!pd) pd = reference;
  if (!pd) pd = onednn::binary(l.engine, algorithm_of(n), a_md, row_major(bd), a_md, attr);

  const int src0 = l.read_as(a, pd.src0_desc());
  const int src1 = operand_b(l, b, bd, pd.src1_desc());
  const int dst = l.new_arena_buffer(pd.dst_desc(), n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.primitive = dnnl::binary(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC_0, src0, pd.src0_desc()));
  step.args.push_back(Arg::in(DNNL_ARG_SRC_1, src1, pd.src1_desc()));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.define(n.output, pd.dst_desc(), dst);
  // For the backward: a as src, b (broadcast, as the forward read it) in place of weights.
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.pd = pd;
  r.src = src0;
  r.src_md = pd.src0_desc();
  r.weights = src1;
  r.weights_md = pd.src1_desc();
}

static void backward_binary(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const bool add = std::get<Binary>(n.attrs).kind == BinaryKind::add;
  const int a = n.inputs[0];
  const int b = n.inputs[1];
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto fwd = std::any_cast<dnnl::binary::primitive_desc>(r.pd);
  const md_t y_md = fwd.dst_desc();
  const int dy = l.gradient_as(n.output, y_md);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // dy times the other operand, broadcast as in the forward.
  auto times = [&](int other, const md_t& other_md, const std::string& name) {
    const dnnl::binary::primitive_desc pd =
        onednn::binary(l.engine, dnnl::algorithm::binary_mul, y_md, other_md, y_md, attr);
    const int out = l.new_arena_buffer(pd.dst_desc(), n.name + ":" + name);
    Step step;
    step.name = n.name + ":" + name;
    step.op = "binary_mul_backward";
    step.primitive = dnnl::binary(pd);
    step.args.push_back(Arg::in(DNNL_ARG_SRC_0, dy, y_md));
    step.args.push_back(Arg::in(DNNL_ARG_SRC_1, other, other_md));
    step.args.push_back(Arg::out(DNNL_ARG_DST, out, pd.dst_desc()));
    l.add_step(std::move(step), pd);
    return out;
  };
  if (l.wants_gradient(a)) {
    l.add_gradient(a, add ? dy : times(r.weights, r.weights_md, "diff_src0"), y_md);
  }
  if (!l.wants_gradient(b)) return;
  const Dims& ad = value_of(l.ir, a).dims;
  const Dims& b_dims = value_of(l.ir, b).dims;
  const Dims bd = broadcast_dims(b_dims, ad.size());
  const int full = add ? dy : times(r.src, r.src_md, "diff_src1");
  if (bd == ad) {
    l.add_gradient(b, full, y_md);
    return;
  }
  // Summed over the broadcast dimensions, into b's row-major shape.
  const dnnl::reduction::primitive_desc pd =
      onednn::reduction_sum(l.engine, y_md, row_major(bd), attr);
  const int db = l.new_arena_buffer(pd.dst_desc(), n.name + ":diff_src1_sum");
  Step step;
  step.name = n.name + ":diff_src1_sum";
  step.op = "reduction_sum";
  step.primitive = dnnl::reduction(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, full, y_md));
  step.args.push_back(Arg::out(DNNL_ARG_DST, db, pd.dst_desc()));
  l.add_step(std::move(step), pd);
  l.add_gradient(b, db, row_major(b_dims));
}

TFPIN_REGISTER_OP(binary, .infer = infer_binary, .lower = lower_binary,
                  .backward = backward_binary);

}  // namespace tfpin::engine::detail
