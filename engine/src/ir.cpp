// Building and validating the IR from a Graph, and the graph-level passes (batch-norm folding,
// ReLU, activation and residual-add fusion, identities).
#include "ir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <set>

#include "op_registry.hpp"

namespace tfpin::engine::detail {

std::string dims_string(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

std::int64_t element_count(const Dims& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d <= 0) return 0;
    if (n > std::numeric_limits<std::int64_t>::max() / d) return -1;  // overflow
    n *= d;
  }
  return n;
}

Status graph_error(const Ir& ir, int node, const std::string& what) {
  return {StatusCode::invalid_graph, fmt::format("{}: {}", ir.describe_node(node), what)};
}

std::string Ir::describe_node(int node) const {
  const Node& n = nodes[static_cast<std::size_t>(node)];
  return fmt::format("node '{}' ({})", n.name, to_string(n.kind));
}

void Ir::relink() {
  for (Value& v : values) {
    v.consumers.clear();
    if (v.kind == ValueKind::activation) v.producer = -1;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.dead) continue;
    for (int in : n.inputs)
      values[static_cast<std::size_t>(in)].consumers.push_back(static_cast<int>(i));
    for (const PostOp& p : n.post_ops) {
      if (p.kind == PostOp::Kind::sum) {
        values[static_cast<std::size_t>(p.value)].consumers.push_back(static_cast<int>(i));
      }
    }
    values[static_cast<std::size_t>(n.output)].producer = static_cast<int>(i);
  }
  for (Value& v : values) v.is_output = false;
  for (const auto& [v, def] : outputs) values[static_cast<std::size_t>(v)].is_output = true;
}

namespace {

constexpr std::int64_t max_elements = std::int64_t{1} << 48;  // 1 PiB of floats: beyond any machine

// `scalar`: no dimensions is valid (a 0-d constant, one value: a binary operation's scale).
Status check_dims(const std::string& what, const Dims& dims, bool scalar = false) {
  if (dims.empty() && !scalar) {
    return {StatusCode::invalid_graph, fmt::format("{} has no dimensions", what)};
  }
  for (std::int64_t d : dims) {
    if (d <= 0) {
      return {StatusCode::invalid_graph,
              fmt::format("{} has dimensions {}: every dimension must be at least 1", what,
                          dims_string(dims))};
    }
  }
  std::int64_t n = element_count(dims);
  if (n < 0 || n > max_elements) {
    return {StatusCode::out_of_memory,
            fmt::format("{} has dimensions {}: more than 2^48 elements, no machine holds that",
                        what, dims_string(dims))};
  }
  return {};
}

// One element-wise sum for every caller: a binary add of two activations of one shape (no
// broadcast, no constant) is a residual sum, which the fusion passes fold into the convolution
// before it. Graph::add states that intent; an importer's Add need not choose.
void canonicalize_sum(Ir& ir, int node) {
  Node& n = ir.nodes[static_cast<std::size_t>(node)];
  if (n.kind != OpKind::binary || std::get<Binary>(n.attrs).kind != BinaryKind::add) return;
  const Value& a = ir.values[static_cast<std::size_t>(n.inputs[0])];
  const Value& b = ir.values[static_cast<std::size_t>(n.inputs[1])];
  const bool image_or_matrix = a.dims.size() == 4 || a.dims.size() == 2;
  if (a.dims == b.dims && image_or_matrix && a.kind != ValueKind::constant &&
      b.kind != ValueKind::constant) {
    n.kind = OpKind::add;
    n.attrs = std::monostate{};
  }
}

Status infer(Ir& ir, int node, Dims& out) {
  const OpDef* op = find_op(ir.nodes[static_cast<std::size_t>(node)].kind);
  if (op == nullptr) return graph_error(ir, node, "no definition of this operator is registered");
  return op->infer(ir, node, out);
}

// Marks nodes that no output depends on as dead.
void remove_unused(Ir& ir) {
  std::vector<bool> needed(ir.values.size(), false);
  for (const auto& [v, def] : ir.outputs) needed[static_cast<std::size_t>(v)] = true;
  for (std::size_t i = ir.nodes.size(); i-- > 0;) {
    Node& n = ir.nodes[i];
    if (n.dead) continue;
    if (!needed[static_cast<std::size_t>(n.output)]) {
      n.dead = true;
      continue;
    }
    for (int in : n.inputs) needed[static_cast<std::size_t>(in)] = true;
    for (const PostOp& p : n.post_ops) {
      if (p.kind == PostOp::Kind::sum) needed[static_cast<std::size_t>(p.value)] = true;
    }
  }
  ir.relink();
}

}  // namespace

Status build_ir(const Graph& graph, Ir& ir) {
  ir = Ir{};
  const auto& tensors = graph.tensors();
  std::set<std::string> input_names;
  bool have_image_input = false;
  for (const TensorDef& t : tensors) {
    Value v;
    v.name = t.name;
    v.dims = t.dims;
    v.layout = t.layout;
    v.producer = t.producer;
    switch (t.kind) {
      case TensorDef::Kind::input: {
        v.kind = ValueKind::input;
        if (t.name.empty()) return {StatusCode::invalid_graph, "a graph input has an empty name"};
        if (!input_names.insert(t.name).second) {
          return {StatusCode::invalid_graph,
                  fmt::format("two graph inputs are named '{}'", t.name)};
        }
        Status s = check_dims(fmt::format("input '{}'", t.name), t.dims);
        if (!s.ok()) return s;
        if (t.dims.size() != 2 && t.dims.size() != 4) {
          return {StatusCode::invalid_graph,
                  fmt::format("input '{}' has dimensions {}: expected N, C, H, W or N, C", t.name,
                              dims_string(t.dims))};
        }
        bool image = t.dims.size() == 4;
        if (image == (t.layout == Layout::nc)) {
          return {
              StatusCode::invalid_graph,
              fmt::format("input '{}' has dimensions {} and layout {}: images are NCHW or NHWC, "
                          "matrices NC",
                          t.name, dims_string(t.dims), to_string(t.layout))};
        }
        if (image && !have_image_input) {
          ir.default_image_layout = t.layout;
          have_image_input = true;
        }
        break;
      }
      case TensorDef::Kind::constant: {
        v.kind = ValueKind::constant;
        v.data = t.data;
        Status s = check_dims(fmt::format("constant '{}'", t.name), t.dims, true);
        if (!s.ok()) return s;
        auto expected = static_cast<std::size_t>(element_count(t.dims));
        std::size_t got = t.data ? t.data->size() : 0;
        if (got != expected) {
          return {
              StatusCode::invalid_graph,
              fmt::format("constant '{}' has dimensions {} ({} values) but {} values were given",
                          t.name, dims_string(t.dims), expected, got)};
        }
        break;
      }
      case TensorDef::Kind::value:
        v.kind = ValueKind::activation;
        break;
    }
    ir.values.push_back(std::move(v));
  }

  const auto& nodes = graph.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeDef& d = nodes[i];
    Node n;
    n.kind = d.kind;
    n.name = d.name;
    n.output = d.output;
    n.attrs = d.attrs;
    ir.nodes.push_back(n);
    int self = static_cast<int>(i);
    for (std::size_t k = 0; k < d.inputs.size(); ++k) {
      TensorId id = d.inputs[k];
      // A node can only read tensors created before it: anything else is unknown here.
      if (id < 0 || id >= d.output) {
        return graph_error(ir, self,
                           fmt::format("input #{} refers to tensor {}, which does not exist (known "
                                       "tensors at this point: 0..{})",
                                       k, id, d.output - 1));
      }
      ir.nodes.back().inputs.push_back(id);
    }
    Dims out;
    Status s = infer(ir, self, out);
    if (!s.ok()) return s;
    s = check_dims(fmt::format("the output of {}", ir.describe_node(self)), out);
    if (!s.ok()) return s;
    ir.values[static_cast<std::size_t>(d.output)].dims = std::move(out);
    canonicalize_sum(ir, self);
  }

  if (graph.outputs().empty()) return {StatusCode::invalid_graph, "the graph has no outputs"};
  std::set<std::string> output_names;
  for (const OutputDef& o : graph.outputs()) {
    if (o.tensor < 0 || static_cast<std::size_t>(o.tensor) >= ir.values.size()) {
      return {
          StatusCode::invalid_graph,
          fmt::format("output '{}' refers to tensor {}, which does not exist", o.name, o.tensor)};
    }
    if (o.name.empty()) return {StatusCode::invalid_graph, "a graph output has an empty name"};
    if (!output_names.insert(o.name).second) {
      return {StatusCode::invalid_graph, fmt::format("two graph outputs are named '{}'", o.name)};
    }
    const Value& v = ir.values[static_cast<std::size_t>(o.tensor)];
    OutputDef def = o;
    bool image = v.dims.size() == 4;
    if (!def.layout) def.layout = image ? ir.default_image_layout : Layout::nc;
    if (v.dims.size() != 2 && v.dims.size() != 4) {
      return {StatusCode::invalid_graph,
              fmt::format("output '{}' has dimensions {}: expected 2 or 4 dimensions", o.name,
                          dims_string(v.dims))};
    }
    if (image == (*def.layout == Layout::nc)) {
      return {StatusCode::invalid_graph,
              fmt::format("output '{}' has dimensions {} and layout {}: images are NCHW or NHWC, "
                          "matrices NC",
                          o.name, dims_string(v.dims), to_string(*def.layout))};
    }
    ir.outputs.emplace_back(o.tensor, def);
  }
  remove_unused(ir);
  return {};
}

namespace {

Node* producer_node(Ir& ir, int value) {
  int p = ir.values[static_cast<std::size_t>(value)].producer;
  if (p < 0) return nullptr;
  Node& n = ir.nodes[static_cast<std::size_t>(p)];
  return n.dead ? nullptr : &n;
}

bool single_internal_use(const Ir& ir, int value, int consumer) {
  const Value& v = ir.values[static_cast<std::size_t>(value)];
  return v.kind == ValueKind::activation && !v.is_output && v.consumers.size() == 1 &&
         v.consumers[0] == consumer;
}

// Moves `from`'s output to `into`: `into` now produces what `from` produced; `from` dies.
void absorb(Ir& ir, int into, int from) {
  Node& a = ir.nodes[static_cast<std::size_t>(into)];
  Node& b = ir.nodes[static_cast<std::size_t>(from)];
  a.output = b.output;
  b.dead = true;
  ir.relink();
}

const std::vector<float>& data_of(const Ir& ir, int value) {
  return *ir.values[static_cast<std::size_t>(value)].data;
}

bool is_constant(const Ir& ir, int value) {
  return ir.values[static_cast<std::size_t>(value)].kind == ValueKind::constant;
}

int add_constant(Ir& ir, std::string name, Dims dims, std::vector<float> values) {
  Value v;
  v.kind = ValueKind::constant;
  v.name = std::move(name);
  v.dims = std::move(dims);
  v.data = std::make_shared<const std::vector<float>>(std::move(values));
  ir.values.push_back(std::move(v));
  return static_cast<int>(ir.values.size() - 1);
}

// Is node `ancestor` upstream of node `node` (through inputs and sum post-ops)?
bool is_ancestor(const Ir& ir, int ancestor, int node) {
  std::vector<bool> seen(ir.nodes.size(), false);
  std::vector<int> stack{node};
  while (!stack.empty()) {
    int n = stack.back();
    stack.pop_back();
    const Node& nd = ir.nodes[static_cast<std::size_t>(n)];
    auto visit = [&](int value) {
      int p = ir.values[static_cast<std::size_t>(value)].producer;
      if (p < 0 || seen[static_cast<std::size_t>(p)]) return;
      seen[static_cast<std::size_t>(p)] = true;
      stack.push_back(p);
    };
    for (int in : nd.inputs) visit(in);
    for (const PostOp& p : nd.post_ops) {
      if (p.kind == PostOp::Kind::sum) visit(p.value);
    }
  }
  return seen[static_cast<std::size_t>(ancestor)];
}

}  // namespace

int fold_batch_norms(Ir& ir) {
  int folded = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& bn = ir.nodes[i];
    if (bn.dead || bn.kind != OpKind::batch_norm || !bn.post_ops.empty()) continue;
    int x = bn.inputs[0];
    Node* conv = producer_node(ir, x);
    if (conv == nullptr || conv->kind != OpKind::convolution || !conv->post_ops.empty()) continue;
    if (!single_internal_use(ir, x, static_cast<int>(i))) continue;
    bool constants = is_constant(ir, conv->inputs[1]) &&
                     (conv->inputs.size() < 3 || is_constant(ir, conv->inputs[2]));
    for (std::size_t k = 1; k < 5; ++k) constants = constants && is_constant(ir, bn.inputs[k]);
    if (!constants) continue;

    const float eps = std::get<BatchNorm>(bn.attrs).epsilon;
    const auto& gamma = data_of(ir, bn.inputs[1]);
    const auto& beta = data_of(ir, bn.inputs[2]);
    const auto& mean = data_of(ir, bn.inputs[3]);
    const auto& var = data_of(ir, bn.inputs[4]);
    const Value& wv = ir.values[static_cast<std::size_t>(conv->inputs[1])];
    const std::vector<float>& w = *wv.data;
    const std::size_t oc = static_cast<std::size_t>(wv.dims[0]);
    const std::size_t per_oc = w.size() / oc;
    std::vector<float> nw(w.size());
    std::vector<float> nb(oc);
    for (std::size_t o = 0; o < oc; ++o) {
      const double s = gamma[o] / std::sqrt(static_cast<double>(var[o]) + eps);
      for (std::size_t k = 0; k < per_oc; ++k) {
        nw[o * per_oc + k] = static_cast<float>(w[o * per_oc + k] * s);
      }
      const double b = conv->inputs.size() > 2 ? data_of(ir, conv->inputs[2])[o] : 0.0;
      nb[o] = static_cast<float>((b - mean[o]) * s + beta[o]);
    }
    Dims wdims = wv.dims;
    std::string name = conv->name;
    int conv_index = ir.values[static_cast<std::size_t>(x)].producer;
    int w_new = add_constant(ir, name + "/folded_weights", std::move(wdims), std::move(nw));
    int b_new =
        add_constant(ir, name + "/folded_bias", Dims{static_cast<std::int64_t>(oc)}, std::move(nb));
    Node& c = ir.nodes[static_cast<std::size_t>(conv_index)];  // add_constant may move values only
    c.inputs.resize(2);
    c.inputs[1] = w_new;
    c.inputs.push_back(b_new);
    absorb(ir, conv_index, static_cast<int>(i));
    ++folded;
  }
  return folded;
}

int fuse_relus(Ir& ir) {
  int fused = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& relu = ir.nodes[i];
    if (relu.dead || relu.kind != OpKind::relu) continue;
    int x = relu.inputs[0];
    Node* p = producer_node(ir, x);
    if (p == nullptr) continue;
    bool can = p->kind == OpKind::convolution || p->kind == OpKind::inner_product ||
               p->kind == OpKind::add || p->kind == OpKind::batch_norm;
    if (!can || !single_internal_use(ir, x, static_cast<int>(i))) continue;
    if (p->kind == OpKind::batch_norm && !p->post_ops.empty()) continue;
    if (!p->post_ops.empty() && p->post_ops.back().kind == PostOp::Kind::relu) continue;
    p->post_ops.push_back(PostOp{PostOp::Kind::relu, -1, false, {}});
    absorb(ir, ir.values[static_cast<std::size_t>(x)].producer, static_cast<int>(i));
    ++fused;
  }
  return fused;
}

int move_average_pools(Ir& ir) {
  int moved = 0;
  for (std::size_t q = 0; q < ir.nodes.size(); ++q) {
    Node& conv = ir.nodes[q];
    if (conv.dead || conv.kind != OpKind::convolution || !conv.post_ops.empty()) continue;
    const int a = conv.inputs[0];
    const int p = ir.values[static_cast<std::size_t>(a)].producer;
    if (p < 0 || ir.nodes[static_cast<std::size_t>(p)].dead) continue;
    Node& pool = ir.nodes[static_cast<std::size_t>(p)];
    if (pool.kind != OpKind::avg_pool || !single_internal_use(ir, a, static_cast<int>(q))) continue;
    const auto& c = std::get<Conv2D>(conv.attrs);
    const Dims& w = ir.values[static_cast<std::size_t>(conv.inputs[1])].dims;
    const bool pointwise = c.groups == 1 && c.stride == std::array<std::int64_t, 2>{1, 1} &&
                           c.padding == std::array<std::int64_t, 4>{0, 0, 0, 0} &&
                           c.dilation == std::array<std::int64_t, 2>{1, 1} && w[2] == 1 &&
                           w[3] == 1;
    // The convolution then runs on the pooling's input: as many pixels only where the pooling
    // keeps the size.
    const Dims& x = ir.values[static_cast<std::size_t>(pool.inputs[0])].dims;
    const Dims& y = ir.values[static_cast<std::size_t>(conv.output)].dims;
    const bool same_size = x[2] == y[2] && x[3] == y[3];
    // A bias is averaged too: exact only where every window's divisor counts its valid taps.
    const auto& attrs = std::get<Pool2D>(pool.attrs);
    const bool padded = pool.padding != std::array<std::int64_t, 4>{0, 0, 0, 0};
    const bool bias_kept = conv.inputs.size() < 3 || !attrs.count_include_pad || !padded;
    // Fewer channels out than in: the pooling then has less to average (and the moved value
    // grows past no size check). A ReLU reading the convolution would no longer fuse into it.
    const bool narrows = w[0] <= w[1];
    bool relu_follows = false;
    for (int consumer : ir.values[static_cast<std::size_t>(conv.output)].consumers) {
      relu_follows =
          relu_follows || ir.nodes[static_cast<std::size_t>(consumer)].kind == OpKind::relu;
    }
    if (!pointwise || !same_size || !bias_kept || !narrows || relu_follows) continue;
    // Swap them in place (the convolution takes the pooling's slot: the order stays
    // topological): x -> conv -> a (now K channels) -> pool -> the convolution's old output.
    Node moved_conv = conv;
    Node moved_pool = pool;
    moved_conv.inputs[0] = pool.inputs[0];
    moved_conv.output = a;
    moved_pool.inputs[0] = a;
    moved_pool.output = conv.output;
    ir.values[static_cast<std::size_t>(a)].dims = y;
    ir.values[static_cast<std::size_t>(a)].producer = p;
    ir.values[static_cast<std::size_t>(conv.output)].producer = static_cast<int>(q);
    ir.nodes[static_cast<std::size_t>(p)] = std::move(moved_conv);
    ir.nodes[q] = std::move(moved_pool);
    ir.relink();
    ++moved;
  }
  return moved;
}

int max_pools_before_concats(Ir& ir) {
  int moved = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    if (ir.nodes[i].dead || ir.nodes[i].kind != OpKind::max_pool) continue;
    const int joined = ir.nodes[i].inputs[0];
    const int c = ir.values[static_cast<std::size_t>(joined)].producer;
    if (c < 0 || ir.nodes[static_cast<std::size_t>(c)].dead ||
        ir.nodes[static_cast<std::size_t>(c)].kind != OpKind::concat ||
        !single_internal_use(ir, joined, static_cast<int>(i))) {
      continue;
    }
    // Copies: the nodes grow below. The new nodes go at the end; lowering and training follow
    // topological_order, not the indices.
    const Node pool = ir.nodes[i];
    const Node concat = ir.nodes[static_cast<std::size_t>(c)];
    std::vector<int> parts;
    const std::size_t first_part = ir.nodes.size();
    bool inferred = true;
    for (std::size_t k = 0; k < concat.inputs.size() && inferred; ++k) {
      Node part = pool;
      part.name = fmt::format("{}.{}", pool.name, k);
      part.inputs = {concat.inputs[k]};
      Value v;
      v.name = part.name;
      v.producer = static_cast<int>(ir.nodes.size());
      ir.values.push_back(std::move(v));
      part.output = static_cast<int>(ir.values.size() - 1);
      ir.nodes.push_back(std::move(part));
      Dims out;
      // The pooling was valid on the whole concat, so it is on each part (same height and width):
      // a failure here would be a bug, and leaves the graph as it was.
      inferred = infer(ir, static_cast<int>(ir.nodes.size() - 1), out).ok();
      ir.values.back().dims = out;
      parts.push_back(static_cast<int>(ir.values.size() - 1));
    }
    if (!inferred) {
      for (std::size_t k = first_part; k < ir.nodes.size(); ++k) ir.nodes[k].dead = true;
      ir.relink();
      continue;
    }
    Node joined_parts = concat;
    joined_parts.inputs = parts;
    joined_parts.output = pool.output;
    ir.values[static_cast<std::size_t>(pool.output)].producer = static_cast<int>(ir.nodes.size());
    ir.nodes.push_back(std::move(joined_parts));
    ir.nodes[i].dead = true;
    ir.nodes[static_cast<std::size_t>(c)].dead = true;
    ir.relink();
    ++moved;
  }
  return moved;
}

int fuse_batch_norm_max_pools(Ir& ir) {
  int fused = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& pool = ir.nodes[i];
    if (pool.dead || pool.kind != OpKind::max_pool) continue;
    const int x = pool.inputs[0];
    Node* bn = producer_node(ir, x);
    if (bn == nullptr || bn->kind != OpKind::batch_norm || bn->fused_max_pool) continue;
    if (bn->post_ops.size() != 1 || bn->post_ops[0].kind != PostOp::Kind::relu) continue;
    if (!single_internal_use(ir, x, static_cast<int>(i))) continue;
    const Dims& dims = ir.values[static_cast<std::size_t>(x)].dims;
    const auto& a = std::get<Pool2D>(pool.attrs);
    // The window index is kept in 7 bits; channel blocks of 8 or 16 hold no padding.
    if (dims.size() != 4 || dims[1] % 16 != 0 || a.kernel[0] * a.kernel[1] > 127) continue;
    bn->fused_max_pool = a;
    bn->padding = pool.padding;
    absorb(ir, ir.values[static_cast<std::size_t>(x)].producer, static_cast<int>(i));
    ++fused;
  }
  return fused;
}

int fuse_eltwises(Ir& ir) {
  int fused = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& act = ir.nodes[i];
    if (act.dead || act.kind != OpKind::eltwise) continue;
    int x = act.inputs[0];
    Node* p = producer_node(ir, x);
    if (p == nullptr) continue;
    bool can = p->kind == OpKind::convolution || p->kind == OpKind::inner_product;
    if (!can || !single_internal_use(ir, x, static_cast<int>(i))) continue;
    // One activation per producer (after a residual sum is fine), as with ReLU.
    if (!p->post_ops.empty() && p->post_ops.back().kind != PostOp::Kind::sum) continue;
    p->post_ops.push_back(PostOp{PostOp::Kind::eltwise, -1, false, std::get<Eltwise>(act.attrs)});
    absorb(ir, ir.values[static_cast<std::size_t>(x)].producer, static_cast<int>(i));
    ++fused;
  }
  return fused;
}

int fuse_residual_adds(Ir& ir) {
  int fused = 0;
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& add = ir.nodes[i];
    if (add.dead || add.kind != OpKind::add || !add.post_ops.empty()) continue;
    int best_conv = -1;
    int best_residual = -1;
    bool best_in_place = false;
    for (int side = 0; side < 2; ++side) {
      int c = add.inputs[static_cast<std::size_t>(side)];
      int r = add.inputs[static_cast<std::size_t>(1 - side)];
      if (c == r) continue;
      Node* conv = producer_node(ir, c);
      if (conv == nullptr || conv->kind != OpKind::convolution) continue;
      if (!single_internal_use(ir, c, static_cast<int>(i))) continue;
      bool has_sum = false;
      for (const PostOp& p : conv->post_ops) has_sum = has_sum || p.kind == PostOp::Kind::sum;
      if (has_sum) continue;
      int conv_index = ir.values[static_cast<std::size_t>(c)].producer;
      const Value& rv = ir.values[static_cast<std::size_t>(r)];
      // In place: the convolution may overwrite the residual when everyone else who reads it is
      // guaranteed to have run before (an ancestor of the convolution).
      bool in_place = rv.kind == ValueKind::activation && !rv.is_output;
      for (int consumer : rv.consumers) {
        if (consumer == static_cast<int>(i)) continue;
        in_place = in_place && is_ancestor(ir, consumer, conv_index);
      }
      if (best_conv < 0 || (in_place && !best_in_place)) {
        best_conv = conv_index;
        best_residual = r;
        best_in_place = in_place;
      }
    }
    if (best_conv < 0) continue;
    ir.nodes[static_cast<std::size_t>(best_conv)].post_ops.push_back(
        PostOp{PostOp::Kind::sum, best_residual, best_in_place, {}});
    absorb(ir, best_conv, static_cast<int>(i));
    ++fused;
  }
  return fused;
}

void drop_identities(Ir& ir) {
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    Node& n = ir.nodes[i];
    if (n.dead || n.kind != OpKind::dropout) continue;
    int from = n.output;
    int to = n.inputs[0];
    n.dead = true;
    for (Node& m : ir.nodes) {
      if (m.dead) continue;
      for (int& in : m.inputs) in = in == from ? to : in;
      for (PostOp& p : m.post_ops) p.value = p.value == from ? to : p.value;
    }
    for (auto& [v, def] : ir.outputs) v = v == from ? to : v;
  }
  ir.relink();
}

}  // namespace tfpin::engine::detail
