#include "tfpin/engine/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "op_registry.hpp"

namespace tfpin::engine {

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::nchw:
      return "NCHW";
    case Layout::nhwc:
      return "NHWC";
    case Layout::nc:
      return "NC";
  }
  return "?";
}

std::optional<Layout> parse_layout(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "nchw" || lower == "channels_first") return Layout::nchw;
  if (lower == "nhwc" || lower == "channels_last") return Layout::nhwc;
  return std::nullopt;
}

const char* to_string(OpKind kind) {
  const detail::OpDef* op = detail::find_op(kind);
  return op == nullptr ? "?" : op->name;
}

const char* to_string(EltwiseKind kind) {
  switch (kind) {
    case EltwiseKind::leaky_relu:
      return "leaky_relu";
    case EltwiseKind::clip:
      return "clip";
    case EltwiseKind::sigmoid:
      return "sigmoid";
    case EltwiseKind::hard_sigmoid:
      return "hard_sigmoid";
    case EltwiseKind::hard_swish:
      return "hard_swish";
    case EltwiseKind::tanh:
      return "tanh";
  }
  return "?";
}

const char* to_string(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::add:
      return "add";
    case BinaryKind::mul:
      return "mul";
  }
  return "?";
}

TensorId Graph::input(std::string name, std::vector<std::int64_t> dims, Layout layout) {
  TensorDef t;
  t.kind = TensorDef::Kind::input;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.layout = layout;
  tensors_.push_back(std::move(t));
  return static_cast<TensorId>(tensors_.size() - 1);
}

TensorId Graph::constant(std::string name, std::vector<std::int64_t> dims,
                         std::vector<float> values) {
  TensorDef t;
  t.kind = TensorDef::Kind::constant;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.data = std::make_shared<const std::vector<float>>(std::move(values));
  tensors_.push_back(std::move(t));
  return static_cast<TensorId>(tensors_.size() - 1);
}

TensorId Graph::add_node(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs,
                         std::string name) {
  NodeDef n;
  n.kind = kind;
  n.name = name.empty() ? fmt::format("{}_{}", to_string(kind), nodes_.size()) : std::move(name);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  TensorDef out;
  out.kind = TensorDef::Kind::value;
  out.name = n.name;
  out.producer = static_cast<int>(nodes_.size());
  tensors_.push_back(std::move(out));
  n.output = static_cast<TensorId>(tensors_.size() - 1);
  nodes_.push_back(std::move(n));
  return nodes_.back().output;
}

TensorId Graph::convolution(TensorId x, TensorId weights, TensorId bias, const Conv2D& attrs,
                            std::string name) {
  std::vector<TensorId> inputs{x, weights};
  if (bias != no_tensor) inputs.push_back(bias);
  return add_node(OpKind::convolution, std::move(inputs), attrs, std::move(name));
}

TensorId Graph::batch_norm(TensorId x, TensorId scale, TensorId shift, TensorId mean,
                           TensorId variance, const BatchNorm& attrs, std::string name) {
  return add_node(OpKind::batch_norm, {x, scale, shift, mean, variance}, attrs, std::move(name));
}

TensorId Graph::relu(TensorId x, std::string name) {
  return add_node(OpKind::relu, {x}, std::monostate{}, std::move(name));
}

TensorId Graph::max_pool(TensorId x, const Pool2D& attrs, std::string name) {
  return add_node(OpKind::max_pool, {x}, attrs, std::move(name));
}

TensorId Graph::avg_pool(TensorId x, const Pool2D& attrs, std::string name) {
  return add_node(OpKind::avg_pool, {x}, attrs, std::move(name));
}

TensorId Graph::lrn(TensorId x, const Lrn& attrs, std::string name) {
  return add_node(OpKind::lrn, {x}, attrs, std::move(name));
}

TensorId Graph::concat(std::vector<TensorId> xs, std::string name) {
  return add_node(OpKind::concat, std::move(xs), std::monostate{}, std::move(name));
}

TensorId Graph::add(TensorId a, TensorId b, std::string name) {
  return add_node(OpKind::add, {a, b}, std::monostate{}, std::move(name));
}

TensorId Graph::binary(BinaryKind kind, TensorId a, TensorId b, std::string name) {
  // Default names after the operation ("mul_7"), as the activations below.
  if (name.empty()) name = fmt::format("{}_{}", to_string(kind), nodes_.size());
  return add_node(OpKind::binary, {a, b}, Binary{kind}, std::move(name));
}

TensorId Graph::eltwise(TensorId x, const Eltwise& attrs, std::string name) {
  if (name.empty()) name = fmt::format("{}_{}", to_string(attrs.kind), nodes_.size());
  return add_node(OpKind::eltwise, {x}, attrs, std::move(name));
}

TensorId Graph::inner_product(TensorId x, TensorId weights, TensorId bias, std::string name) {
  std::vector<TensorId> inputs{x, weights};
  if (bias != no_tensor) inputs.push_back(bias);
  return add_node(OpKind::inner_product, std::move(inputs), std::monostate{}, std::move(name));
}

TensorId Graph::softmax(TensorId x, std::string name) {
  return add_node(OpKind::softmax, {x}, std::monostate{}, std::move(name));
}

TensorId Graph::flatten(TensorId x, std::string name) {
  return add_node(OpKind::flatten, {x}, std::monostate{}, std::move(name));
}

TensorId Graph::dropout(TensorId x, const Dropout& attrs, std::string name) {
  return add_node(OpKind::dropout, {x}, attrs, std::move(name));
}

void Graph::output(TensorId x, std::string name, std::optional<Layout> layout) {
  outputs_.push_back(OutputDef{x, std::move(name), layout});
}

}  // namespace tfpin::engine
