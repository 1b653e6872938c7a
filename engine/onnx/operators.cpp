// One converter per ONNX operator: checks the attributes it understands (refusing the rest), maps
// the node onto the engine's Graph. Attribute defaults and meanings are ONNX's (onnx/Operators.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "importer.hpp"

namespace tfpin::engine::onnx_import {

namespace {

std::string out_name(Importer& im) { return im.node().output(0); }

bool is_data(const ValueState& v) { return v.tensor.has_value() || v.graph_input; }

void expect_rank4(Importer& im, const ValueState& v, const char* what) {
  if (v.dims.size() != 4) {
    im.unsupported(fmt::format("{} '{}' has rank {} ({}); only 2-D {} on N,C,H,W images is "
                               "supported",
                               "input", v.name, v.dims.size(), dims_text(v.dims), what));
  }
}

// Two spatial values of an ints attribute (kernel_shape, strides, dilations), or the default.
std::array<std::int64_t, 2> pair_attribute(Importer& im, const char* name, std::int64_t fallback) {
  const std::vector<std::int64_t> v = im.ints_attribute(name);
  if (v.empty()) return {fallback, fallback};
  if (v.size() != 2) {
    im.invalid(fmt::format("{} has {} values where a 2-D operator needs 2", name, v.size()));
  }
  for (std::int64_t x : v) {
    if (x < 1) im.invalid(fmt::format("{} [{}] must be at least 1", name, fmt::join(v, ", ")));
  }
  return {v[0], v[1]};
}

// pads / auto_pad for the spatial axes of `input` (top, left, bottom, right).
std::array<std::int64_t, 4> spatial_padding(Importer& im, const Dims& input,
                                            std::array<std::int64_t, 2> kernel,
                                            std::array<std::int64_t, 2> stride,
                                            std::array<std::int64_t, 2> dilation) {
  const std::string auto_pad = im.string_attribute("auto_pad", "NOTSET");
  const std::vector<std::int64_t> pads = im.ints_attribute("pads");
  if (auto_pad == "NOTSET") {
    if (pads.empty()) return {0, 0, 0, 0};
    if (pads.size() != 4) {
      im.invalid(fmt::format("pads has {} values where a 2-D operator needs 4", pads.size()));
    }
    for (std::int64_t p : pads) {
      if (p < 0) im.unsupported(fmt::format("negative pads [{}]", fmt::join(pads, ", ")));
    }
    return {pads[0], pads[1], pads[2], pads[3]};  // ONNX: x1_begin, x2_begin, x1_end, x2_end
  }
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  // SAME_UPPER or SAME_LOWER: Importer::run refused every other value before shape inference.
  std::array<std::int64_t, 4> out{};
  for (std::size_t axis = 0; axis < 2; ++axis) {
    const std::int64_t in = input[2 + axis];
    const std::int64_t out_size = (in + stride[axis] - 1) / stride[axis];
    const std::int64_t span = (kernel[axis] - 1) * dilation[axis] + 1;
    const std::int64_t total = std::max<std::int64_t>(0, (out_size - 1) * stride[axis] + span - in);
    const std::int64_t small = total / 2;
    const std::int64_t large = total - small;
    out[axis] = auto_pad == "SAME_UPPER" ? small : large;
    out[axis + 2] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return out;
}

// Data input 0, unwrapping a Pad folded into this node's padding.
TensorId padded_data(Importer& im, std::array<std::int64_t, 4>& padding) {
  ValueState& x = im.input(0);
  if (x.pad) {
    for (std::size_t i = 0; i < 4; ++i) padding[i] += x.pad->spatial[i];
    return *x.tensor;
  }
  return im.data(0);
}

void convert_conv(Importer& im) {
  im.known_attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  ValueState& x = im.input(0);
  expect_rank4(im, x, "convolution");
  const ConstantData& w = im.constant(1, "weights");
  if (w.dims.size() != 4) {
    im.unsupported(fmt::format("weights '{}' have shape {}; only 2-D convolutions (O,I,KH,KW) are "
                               "supported",
                               im.input(1).name, dims_text(w.dims)));
  }
  Conv2D attrs;
  attrs.stride = pair_attribute(im, "strides", 1);
  attrs.dilation = pair_attribute(im, "dilations", 1);
  attrs.groups = im.int_attribute("group", 1);
  const std::array<std::int64_t, 2> kernel{w.dims[2], w.dims[3]};
  if (const auto shape = im.ints_attribute("kernel_shape");
      !shape.empty() && (shape.size() != 2 || shape[0] != kernel[0] || shape[1] != kernel[1])) {
    im.invalid(fmt::format("kernel_shape [{}] differs from the weights' {}x{}",
                           fmt::join(shape, ", "), kernel[0], kernel[1]));
  }
  attrs.padding = spatial_padding(im, x.dims, kernel, attrs.stride, attrs.dilation);
  const TensorId input = padded_data(im, attrs.padding);
  const TensorId weights = im.constant_tensor(1, "weights");
  const TensorId bias = im.has_input(2) ? im.constant_tensor(2, "bias") : no_tensor;
  im.define(0, im.graph().convolution(input, weights, bias, attrs, out_name(im)));
}

void convert_batch_normalization(Importer& im) {
  im.known_attributes({"epsilon", "momentum", "spatial", "training_mode", "is_test",
                       "consumed_inputs"});
  if (im.int_attribute("training_mode", 0) != 0) {
    im.unsupported("training_mode=1 (batch statistics): import is for inference");
  }
  if (im.int_attribute("spatial", 1) != 1) im.unsupported("spatial=0 (per-activation statistics)");
  im.only_first_output();
  expect_rank4(im, im.input(0), "batch normalization");
  BatchNorm attrs;
  attrs.epsilon = im.float_attribute("epsilon", 1e-5f);
  const TensorId x = im.data(0);
  const TensorId scale = im.constant_tensor(1, "scale");
  const TensorId shift = im.constant_tensor(2, "B");
  const TensorId mean = im.constant_tensor(3, "mean");
  const TensorId variance = im.constant_tensor(4, "var");
  im.define(0, im.graph().batch_norm(x, scale, shift, mean, variance, attrs, out_name(im)));
}

void convert_relu(Importer& im) {
  im.known_attributes({});
  im.define(0, im.graph().relu(im.data(0, /*elementwise=*/true), out_name(im)));
}

void eltwise(Importer& im, EltwiseKind kind, float alpha, float beta) {
  im.define(0, im.graph().eltwise(im.data(0, /*elementwise=*/true), Eltwise{kind, alpha, beta},
                                  out_name(im)));
}

void convert_leaky_relu(Importer& im) {
  im.known_attributes({"alpha"});
  eltwise(im, EltwiseKind::leaky_relu, im.float_attribute("alpha", 0.01f), 0.0f);
}

void convert_sigmoid(Importer& im) {
  im.known_attributes({});
  eltwise(im, EltwiseKind::sigmoid, 0.0f, 0.0f);
}

void convert_tanh(Importer& im) {
  im.known_attributes({});
  eltwise(im, EltwiseKind::tanh, 0.0f, 0.0f);
}

void convert_hard_sigmoid(Importer& im) {
  im.known_attributes({"alpha", "beta"});
  eltwise(im, EltwiseKind::hard_sigmoid, im.float_attribute("alpha", 0.2f),
          im.float_attribute("beta", 0.5f));
}

void convert_hard_swish(Importer& im) {
  im.known_attributes({});
  eltwise(im, EltwiseKind::hard_swish, 1.0f / 6.0f, 0.5f);
}

// A scalar bound of Clip (opset 11: optional inputs).
float clip_bound(Importer& im, std::size_t i, float fallback) {
  if (!im.has_input(i)) return fallback;
  const ConstantData& c = im.constant(i, i == 1 ? "min" : "max");
  if (c.is_int || c.elements() != 1) im.unsupported("min and max must be float scalars");
  return c.floats[0];
}

void convert_clip(Importer& im) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  float low = -inf;
  float high = inf;
  if (im.opset() < 11) {
    im.known_attributes({"min", "max"});
    low = im.float_attribute("min", -std::numeric_limits<float>::max());
    high = im.float_attribute("max", std::numeric_limits<float>::max());
  } else {
    im.known_attributes({});
    low = clip_bound(im, 1, -inf);
    high = clip_bound(im, 2, inf);
  }
  eltwise(im, EltwiseKind::clip, low, high);
}

// Add and Mul: NumPy broadcasting where one operand has the result's shape.
void binary(Importer& im, BinaryKind kind) {
  im.known_attributes({"broadcast", "axis"});  // opset < 7: explicit broadcast flags
  if (im.opset() < 7) {
    im.unsupported("opset < 7 broadcasting (attributes broadcast/axis) is not supported");
  }
  const Dims& out = im.output_dims(0);
  std::size_t big = 0;
  std::size_t small = 1;
  if (im.input(0).dims != out) {
    if (im.input(1).dims != out) {
      im.unsupported(fmt::format("both operands broadcast ({} and {} to {}); one must have the "
                                 "result's shape",
                                 dims_text(im.input(0).dims), dims_text(im.input(1).dims),
                                 dims_text(out)));
    }
    std::swap(big, small);  // both operations are commutative
  }
  const ValueState& b = im.input(small);
  if (!is_data(im.input(big)) && is_data(b) && b.dims == out) std::swap(big, small);
  const ValueState& other = im.input(small);
  const bool same_shape = other.dims == out;
  // Equal shapes are elementwise at any rank; broadcasting needs the engine's real N,C,H,W or N,C.
  const TensorId a_tensor = im.data(big, /*elementwise=*/same_shape);
  if (!same_shape && out.size() != 4 && out.size() != 2) {
    im.unsupported(fmt::format("broadcasts {} to {}; broadcasting is supported onto N,C,H,W and "
                               "N,C tensors only",
                               dims_text(other.dims), dims_text(out)));
  }
  TensorId b_tensor = no_tensor;
  if (other.graph_input || !other.constant) {
    b_tensor = im.data(small, same_shape);
  } else if (same_shape) {
    // A constant of a's shape, in the engine's view of that shape.
    if (other.constant->is_int) im.unsupported(fmt::format("operand '{}' is int64", other.name));
    b_tensor = im.make_constant(out_name(im) + ":b", im.engine_dims(big), other.constant->floats);
  } else {
    b_tensor = im.constant_tensor(small, "operand");
  }
  im.define(0, im.graph().binary(kind, a_tensor, b_tensor, out_name(im)));
}

void convert_add(Importer& im) { binary(im, BinaryKind::add); }
void convert_mul(Importer& im) { binary(im, BinaryKind::mul); }

void convert_sum(Importer& im) {
  im.known_attributes({});
  const Dims& out = im.output_dims(0);
  for (std::size_t i = 0; i < im.input_count(); ++i) {
    if (im.input(i).dims != out) {
      im.unsupported(fmt::format("input '{}' ({}) broadcasts to {}; Sum of equal shapes only",
                                 im.input(i).name, dims_text(im.input(i).dims), dims_text(out)));
    }
  }
  if (im.input_count() == 1) {
    im.data(0, true);
    im.define_alias(0, im.input(0));
    return;
  }
  TensorId total = im.data(0, true);
  for (std::size_t i = 1; i < im.input_count(); ++i) {
    const std::string name =
        i + 1 == im.input_count() ? out_name(im) : fmt::format("{}:sum{}", out_name(im), i);
    total = im.graph().add(total, im.data(i, true), name);
  }
  im.define(0, total);
}

void pool(Importer& im, bool max) {
  if (max) {
    im.known_attributes({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                         "storage_order", "strides"});
    if (im.int_attribute("storage_order", 0) != 0) im.unsupported("storage_order=1");
    im.only_first_output();  // Indices
  } else {
    // dilations: opset 19
    im.known_attributes({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                         "pads", "strides"});
  }
  const ValueState& x = im.input(0);
  expect_rank4(im, x, "pooling");
  const std::array<std::int64_t, 2> dilation = pair_attribute(im, "dilations", 1);
  if (dilation != std::array<std::int64_t, 2>{1, 1}) im.unsupported("dilated pooling");
  Pool2D attrs;
  if (im.attribute("kernel_shape") == nullptr) im.invalid("kernel_shape is required");
  attrs.kernel = pair_attribute(im, "kernel_shape", 1);
  attrs.stride = pair_attribute(im, "strides", 1);
  attrs.ceil_mode = im.int_attribute("ceil_mode", 0) != 0;
  attrs.count_include_pad = im.int_attribute("count_include_pad", 0) != 0;
  attrs.padding = spatial_padding(im, x.dims, attrs.kernel, attrs.stride, dilation);
  TensorId input = no_tensor;
  if (x.pad && !max) {
    // Average pooling of zero-padded data counts the zeros: the pool's own padding with
    // count_include_pad, provided the pool's own padding (if any) counts them too.
    const bool own_padding = attrs.padding != std::array<std::int64_t, 4>{0, 0, 0, 0};
    if (own_padding && !attrs.count_include_pad) {
      im.unsupported("a Pad in front of an average pooling with padding of its own and "
                     "count_include_pad=0");
    }
    attrs.count_include_pad = true;
    input = padded_data(im, attrs.padding);
  } else {
    input = im.data(0);
  }
  im.define(0, max ? im.graph().max_pool(input, attrs, out_name(im))
                   : im.graph().avg_pool(input, attrs, out_name(im)));
}

void convert_max_pool(Importer& im) { pool(im, true); }
void convert_average_pool(Importer& im) { pool(im, false); }

void global_pool(Importer& im, bool max) {
  im.known_attributes({});
  const ValueState& x = im.input(0);
  expect_rank4(im, x, "pooling");
  Pool2D attrs;
  attrs.kernel = {x.dims[2], x.dims[3]};
  const TensorId input = im.data(0);
  im.define(0, max ? im.graph().max_pool(input, attrs, out_name(im))
                   : im.graph().avg_pool(input, attrs, out_name(im)));
}

void convert_global_average_pool(Importer& im) { global_pool(im, false); }
void convert_global_max_pool(Importer& im) { global_pool(im, true); }

void convert_concat(Importer& im) {
  im.known_attributes({"axis"});
  const auto rank = static_cast<std::int64_t>(im.output_dims(0).size());
  std::int64_t axis = im.int_attribute("axis", 1);
  if (axis < 0) axis += rank;
  if (axis != 1 || (rank != 4 && rank != 2)) {
    im.unsupported(fmt::format("axis {} of a rank-{} tensor; only the channels (axis 1 of "
                               "N,C,H,W or N,C) are supported",
                               im.int_attribute("axis", 1), rank));
  }
  std::vector<TensorId> xs;
  for (std::size_t i = 0; i < im.input_count(); ++i) xs.push_back(im.data(i));
  if (xs.size() == 1) {
    im.define_alias(0, im.input(0));
    return;
  }
  im.define(0, im.graph().concat(std::move(xs), out_name(im)));
}

// An inner product x (N, K) . W^T + bias, W (O, K) built from `b` (K, O or O, K) times alpha.
void inner_product(Importer& im, const ConstantData& b, bool b_is_ok, float alpha,
                   std::optional<std::vector<float>> bias, const ConstantData* matrix_bias,
                   float beta) {
  const std::int64_t rows = b_is_ok ? b.dims[0] : b.dims[1];
  const std::int64_t cols = b_is_ok ? b.dims[1] : b.dims[0];
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t o = 0; o < rows; ++o) {
    for (std::int64_t k = 0; k < cols; ++k) {
      const std::size_t from = static_cast<std::size_t>(b_is_ok ? o * cols + k : k * rows + o);
      w[static_cast<std::size_t>(o * cols + k)] = alpha * b.floats[from];
    }
  }
  const std::string name = out_name(im);
  const TensorId x = im.data(0);
  const TensorId weights = im.make_constant(name + ":weights", {rows, cols}, std::move(w));
  const TensorId bias_tensor =
      bias ? im.make_constant(name + ":bias", {rows}, std::move(*bias)) : no_tensor;
  if (matrix_bias == nullptr) {
    im.define(0, im.graph().inner_product(x, weights, bias_tensor, name));
    return;
  }
  std::vector<float> scaled = matrix_bias->floats;
  for (float& v : scaled) v *= beta;
  const TensorId product = im.graph().inner_product(x, weights, no_tensor, name + ":product");
  const TensorId c = im.make_constant(name + ":C", matrix_bias->dims, std::move(scaled));
  im.define(0, im.graph().binary(BinaryKind::add, product, c, name));
}

void convert_gemm(Importer& im) {
  im.known_attributes({"alpha", "beta", "transA", "transB", "broadcast"});
  if (im.int_attribute("transA", 0) != 0) im.unsupported("transA=1 (A must be N x K data)");
  const ValueState& a = im.input(0);
  if (a.dims.size() != 2) im.unsupported(fmt::format("A has shape {}; 2-D only", dims_text(a.dims)));
  const ConstantData& b = im.constant(1, "B");
  if (b.is_int || b.dims.size() != 2) im.unsupported("B must be a 2-D float32 constant");
  const bool trans_b = im.int_attribute("transB", 0) != 0;
  const float alpha = im.float_attribute("alpha", 1.0f);
  const float beta = im.float_attribute("beta", 1.0f);
  const Dims& out = im.output_dims(0);
  std::optional<std::vector<float>> bias;
  const ConstantData* matrix_bias = nullptr;
  if (im.has_input(2) && beta != 0.0f) {
    const ConstantData& c = im.constant(2, "C");
    if (c.is_int) im.unsupported("C must be float32");
    const std::int64_t n = out[1];
    const bool scalar = c.elements() == 1 && c.dims.size() <= 2;
    const bool vector = (c.dims.size() == 1 && c.dims[0] == n) ||
                        (c.dims.size() == 2 && c.dims[0] == 1 && c.dims[1] == n);
    if (scalar || vector) {
      bias = std::vector<float>(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) {
        (*bias)[static_cast<std::size_t>(j)] = beta * c.floats[scalar ? 0 : static_cast<std::size_t>(j)];
      }
    } else {
      matrix_bias = &c;
    }
  }
  inner_product(im, b, trans_b, alpha, std::move(bias), matrix_bias, beta);
}

void convert_mat_mul(Importer& im) {
  im.known_attributes({});
  const ValueState& a = im.input(0);
  if (a.dims.size() != 2) {
    im.unsupported(fmt::format("A has shape {}; only 2-D MatMul (N x K times a K x M constant)",
                               dims_text(a.dims)));
  }
  const ConstantData& b = im.constant(1, "B");
  if (b.is_int || b.dims.size() != 2) im.unsupported("B must be a 2-D float32 constant");
  inner_product(im, b, /*b_is_ok=*/false, 1.0f, std::nullopt, nullptr, 1.0f);
}

// Reshape, Squeeze, Unsqueeze, Flatten: what the engine can lay out is N,C,H,W -> N,C*H*W (a
// flatten) and shapes that do not change.
void reshape_to(Importer& im) {
  const ValueState& x = im.input(0);
  const Dims& out = im.output_dims(0);
  if (x.dims == out) {
    im.data(0, true);
    im.define_alias(0, im.input(0));
    return;
  }
  if (x.dims.size() == 4 && out.size() == 2 && out[0] == x.dims[0] &&
      out[1] == x.dims[1] * x.dims[2] * x.dims[3]) {
    im.define(0, im.graph().flatten(im.data(0), out_name(im)));
    return;
  }
  im.unsupported(fmt::format("reshapes {} to {}; only N,C,H,W to N,C*H*W (a flatten) is supported",
                             dims_text(x.dims), dims_text(out)));
}

void convert_reshape(Importer& im) {
  im.known_attributes({"allowzero", "shape"});
  reshape_to(im);
}
void convert_squeeze(Importer& im) {
  im.known_attributes({"axes"});
  reshape_to(im);
}
void convert_flatten(Importer& im) {
  im.known_attributes({"axis"});
  reshape_to(im);
}

void convert_softmax(Importer& im) {
  im.known_attributes({"axis"});
  const ValueState& x = im.input(0);
  const auto rank = static_cast<std::int64_t>(x.dims.size());
  const std::int64_t given = im.int_attribute("axis", im.opset() < 13 ? 1 : -1);
  const std::int64_t axis = given < 0 ? given + rank : given;
  // Before opset 13 the input is coerced to 2-D at `axis`: the same as axis 1 of N,C, or of
  // N,C,1,1.
  const bool spatial_ones = rank == 4 && x.dims[2] == 1 && x.dims[3] == 1;
  const bool ok = (rank == 2 && axis == 1) || (rank == 4 && axis == 1 && (im.opset() >= 13 || spatial_ones));
  if (!ok) {
    im.unsupported(fmt::format("axis {} of shape {}; only the channels (axis 1) of N,C or "
                               "N,C,H,W are supported",
                               given, dims_text(x.dims)));
  }
  im.define(0, im.graph().softmax(im.data(0), out_name(im)));
}

void convert_lrn(Importer& im) {
  im.known_attributes({"alpha", "beta", "bias", "size"});
  expect_rank4(im, im.input(0), "LRN");
  Lrn attrs;
  if (im.attribute("size") == nullptr) im.invalid("size is required");
  attrs.size = im.int_attribute("size", 5);
  attrs.alpha = im.float_attribute("alpha", 1e-4f);
  attrs.beta = im.float_attribute("beta", 0.75f);
  attrs.k = im.float_attribute("bias", 1.0f);
  im.define(0, im.graph().lrn(im.data(0), attrs, out_name(im)));
}

// Inference: Dropout and Identity pass their input through.
void convert_dropout(Importer& im) {
  im.known_attributes({"ratio", "is_test", "seed"});
  im.only_first_output();  // mask
  if (im.has_input(2)) {
    const ConstantData& mode = im.constant(2, "training_mode");
    if (!mode.ints.empty() && mode.ints[0] != 0) im.unsupported("training_mode=true");
  }
  im.data(0, true);
  im.define_alias(0, im.input(0));
}

void convert_identity(Importer& im) {
  im.known_attributes({});
  im.define_alias(0, im.input(0));
}

void convert_constant(Importer& im) {
  im.known_attributes({"value", "value_float", "value_floats", "value_int", "value_ints",
                       "sparse_value", "value_string", "value_strings"});
  ConstantData c;
  if (const auto* a = im.attribute("value")) {
    c = read_tensor(a->t(), im.model_dir(), fmt::format("{}: value", im.where()));
  } else if (const auto* f = im.attribute("value_float")) {
    c.floats = {f->f()};
  } else if (const auto* fs = im.attribute("value_floats")) {
    c.floats.assign(fs->floats().begin(), fs->floats().end());
    c.dims = {static_cast<std::int64_t>(c.floats.size())};
  } else if (const auto* i = im.attribute("value_int")) {
    c.is_int = true;
    c.ints = {i->i()};
  } else if (const auto* is = im.attribute("value_ints")) {
    c.is_int = true;
    c.ints.assign(is->ints().begin(), is->ints().end());
    c.dims = {static_cast<std::int64_t>(c.ints.size())};
  } else {
    im.unsupported("only dense float32 and int64 constants are supported");
  }
  im.define_constant(0, std::move(c));
}

// Pad: zero padding of the spatial axes, folded into the convolution or average pooling that
// reads it.
void convert_pad(Importer& im) {
  im.known_attributes({"mode", "pads", "value"});
  if (im.string_attribute("mode", "constant") != "constant") {
    im.unsupported(fmt::format("mode '{}'; only constant (zero) padding before a convolution",
                               im.string_attribute("mode", "constant")));
  }
  std::vector<std::int64_t> pads;
  float value = 0.0f;
  if (im.opset() < 11) {
    pads = im.ints_attribute("pads");
    value = im.float_attribute("value", 0.0f);
  } else {
    const ConstantData& p = im.constant(1, "pads");
    if (!p.is_int) im.invalid("pads must be int64");
    pads = p.ints;
    if (im.has_input(2)) {
      const ConstantData& v = im.constant(2, "constant_value");
      if (v.is_int || v.elements() != 1) im.unsupported("constant_value must be a float scalar");
      value = v.floats[0];
    }
    if (im.has_input(3)) im.unsupported("the axes input (opset 18)");
  }
  ValueState& x = im.input(0);
  expect_rank4(im, x, "padding");
  if (pads.size() != 8) im.invalid(fmt::format("pads has {} values for a rank-4 input", pads.size()));
  if (value != 0.0f || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0 ||
      std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; })) {
    im.unsupported(fmt::format("pads [{}] with value {}; only non-negative zero padding of H and W "
                               "(folded into the next convolution)",
                               fmt::join(pads, ", "), value));
  }
  if (std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; })) {
    im.data(0);
    im.define_alias(0, x);  // PyTorch exports zero Pads in front of some poolings
    return;
  }
  PendingPad pad{{pads[2], pads[3], pads[6], pads[7]}};
  TensorId tensor = no_tensor;
  if (x.pad) {
    for (std::size_t i = 0; i < 4; ++i) pad.spatial[i] += x.pad->spatial[i];
    tensor = *x.tensor;
  } else {
    tensor = im.data(0);
  }
  im.define_pad(0, tensor, pad);
}

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = {
      {"Add", convert_add},
      {"AveragePool", convert_average_pool},
      {"BatchNormalization", convert_batch_normalization},
      {"Clip", convert_clip},
      {"Concat", convert_concat},
      {"Constant", convert_constant},
      {"Conv", convert_conv},
      {"Dropout", convert_dropout},
      {"Flatten", convert_flatten},
      {"Gemm", convert_gemm},
      {"GlobalAveragePool", convert_global_average_pool},
      {"GlobalMaxPool", convert_global_max_pool},
      {"HardSigmoid", convert_hard_sigmoid},
      {"HardSwish", convert_hard_swish},
      {"Identity", convert_identity},
      {"LRN", convert_lrn},
      {"LeakyRelu", convert_leaky_relu},
      {"MatMul", convert_mat_mul},
      {"MaxPool", convert_max_pool},
      {"Mul", convert_mul},
      {"Pad", convert_pad},
      {"Relu", convert_relu},
      {"Reshape", convert_reshape},
      {"Sigmoid", convert_sigmoid},
      {"Softmax", convert_softmax},
      {"Squeeze", convert_squeeze},
      {"Sum", convert_sum},
      {"Tanh", convert_tanh},
      {"Unsqueeze", convert_squeeze},
  };
  return table;
}

}  // namespace

Converter find_converter(const std::string& op_type) {
  const auto& table = converters();
  const auto it = table.find(op_type);
  return it == table.end() ? nullptr : it->second;
}

std::vector<std::string> converter_names() {
  std::vector<std::string> names;
  for (const auto& [name, convert] : converters()) names.push_back(name);
  return names;
}

}  // namespace tfpin::engine::onnx_import
