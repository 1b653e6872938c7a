// The engine's graph: f32 tensors and inference operators, built with a small builder API.
//
// Dimensions are always given in logical order: N, C, H, W for images (whatever the memory layout),
// N, C for matrices. Weights: convolution O, I/groups, KH, KW; inner product O, I (I in C, H, W
// order when the input is a flattened image, as in PyTorch). The layout (NCHW or NHWC) only says
// how a graph input or output is laid out in the caller's memory; inside, the compiler picks
// oneDNN's blocked layouts.
//
// The builder never fails: it records what it is told, and Runtime::create validates everything
// (unknown tensors, shapes, attributes) and reports the first problem by node name.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tfpin::engine {

using TensorId = std::int32_t;
inline constexpr TensorId no_tensor = -1;

enum class Layout { nchw, nhwc, nc };
const char* to_string(Layout layout);  // "NCHW", "NHWC", "NC"
// "NCHW"/"nchw", "NHWC"/"nhwc" (also tf_cnn_benchmarks' "channels_first"/"channels_last").
std::optional<Layout> parse_layout(std::string_view text);

enum class OpKind {
  convolution,
  batch_norm,
  relu,
  max_pool,
  avg_pool,
  lrn,
  concat,
  add,
  inner_product,
  softmax,
  flatten,
  dropout,
  eltwise,  // the activations other than ReLU (Eltwise)
  binary,   // add or multiply with broadcasting (Binary)
};
const char* to_string(OpKind kind);

struct Conv2D {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};  // top, left, bottom, right
  std::int64_t groups = 1;
  std::array<std::int64_t, 2> dilation{1, 1};  // 1: dense kernel (ONNX's and PyTorch's meaning)
};

struct Pool2D {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};  // top, left, bottom, right
  bool ceil_mode = false;  // output size rounds up (extra padding at bottom/right)
  bool count_include_pad =
      true;  // average pooling: divide by the kernel area (else by the valid count)
};

// Across-channel local response normalisation: y = x / (k + alpha/size * sum(x^2 over size
// channels))^beta
struct Lrn {
  std::int64_t size = 5;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float k = 1.0f;
};

struct BatchNorm {
  float epsilon = 1e-5f;
};

struct Dropout {
  float rate = 0.5f;  // identity at inference; kept for the graph's shape
};

// Elementwise activations, with ONNX's definitions and defaults.
enum class EltwiseKind {
  leaky_relu,    // x >= 0 ? x : alpha x                       (alpha: 0.01)
  clip,          // min(max(x, alpha), beta)                   (ReLU6: 0, 6)
  sigmoid,       // 1 / (1 + e^-x)
  hard_sigmoid,  // max(0, min(1, alpha x + beta))             (alpha 0.2, beta 0.5)
  hard_swish,    // x max(0, min(1, x / 6 + 1 / 2))
  tanh,
};
const char* to_string(EltwiseKind kind);

struct Eltwise {
  EltwiseKind kind = EltwiseKind::sigmoid;
  float alpha = 0.0f;
  float beta = 0.0f;
};

enum class BinaryKind { add, mul };
const char* to_string(BinaryKind kind);

struct Binary {
  BinaryKind kind = BinaryKind::add;
};

using OpAttrs =
    std::variant<std::monostate, Conv2D, Pool2D, Lrn, BatchNorm, Dropout, Eltwise, Binary>;

struct TensorDef {
  enum class Kind { input, constant, value };
  Kind kind = Kind::value;
  std::string name;
  std::vector<std::int64_t> dims;  // inputs and constants; values get theirs at compile
  Layout layout = Layout::nchw;    // inputs
  std::shared_ptr<const std::vector<float>> data;  // constants
  int producer = -1;                               // node index, for values
};

struct NodeDef {
  OpKind kind = OpKind::relu;
  std::string name;
  std::vector<TensorId> inputs;
  TensorId output = no_tensor;
  OpAttrs attrs;
};

struct OutputDef {
  TensorId tensor = no_tensor;
  std::string name;
  std::optional<Layout> layout;  // default: NC for matrices, the first input's layout for images
};

class Graph {
 public:
  // A graph input the caller fills at setup. dims: N, C, H, W (or N, C); layout: its memory order.
  TensorId input(std::string name, std::vector<std::int64_t> dims, Layout layout = Layout::nchw);
  // Weights and other constants, logical order, row-major. Any rank; no dimensions: a scalar (one
  // value, e.g. a binary operation's b).
  TensorId constant(std::string name, std::vector<std::int64_t> dims, std::vector<float> values);

  // weights O, I/groups, KH, KW; bias (O) or no_tensor.
  TensorId convolution(TensorId x, TensorId weights, TensorId bias, const Conv2D& attrs,
                       std::string name = {});
  // Inference batch norm with per-channel scale (gamma), shift (beta), running mean and variance.
  TensorId batch_norm(TensorId x, TensorId scale, TensorId shift, TensorId mean, TensorId variance,
                      const BatchNorm& attrs = {}, std::string name = {});
  TensorId relu(TensorId x, std::string name = {});
  TensorId max_pool(TensorId x, const Pool2D& attrs, std::string name = {});
  TensorId avg_pool(TensorId x, const Pool2D& attrs, std::string name = {});
  TensorId lrn(TensorId x, const Lrn& attrs = {}, std::string name = {});
  // Along channels (axis 1), the only axis the model zoo needs.
  TensorId concat(std::vector<TensorId> xs, std::string name = {});
  // Same shapes, neither a constant (residual connections: fused into the convolution before it).
  // Refuses a broadcast, where binary(add) would take it.
  TensorId add(TensorId a, TensorId b, std::string name = {});
  // a (op) b with b broadcast to a's shape, NumPy's rule: b has a's rank or less, aligned to the
  // right, each of its dimensions 1 or a's (per-channel C,1,1 or N,C,1,1 scales, scalars). b may
  // be a constant; a may not. The result has a's shape. An add of two activations of one shape
  // compiles as add() does (one sum, fused the same way).
  TensorId binary(BinaryKind kind, TensorId a, TensorId b, std::string name = {});
  // Elementwise activation of a 4-D or 2-D tensor.
  TensorId eltwise(TensorId x, const Eltwise& attrs, std::string name = {});
  // x: N, I (or N, C, H, W, taken as flattened in C, H, W order); weights O, I; bias (O) or
  // no_tensor.
  TensorId inner_product(TensorId x, TensorId weights, TensorId bias, std::string name = {});
  TensorId softmax(TensorId x, std::string name = {});  // over axis 1 (N, C or N, C, H, W)
  TensorId flatten(TensorId x, std::string name = {});  // N, C, H, W -> N, C*H*W (C, H, W order)
  TensorId dropout(TensorId x, const Dropout& attrs = {}, std::string name = {});

  void output(TensorId x, std::string name, std::optional<Layout> layout = std::nullopt);

  [[nodiscard]] const std::vector<TensorDef>& tensors() const { return tensors_; }
  [[nodiscard]] const std::vector<NodeDef>& nodes() const { return nodes_; }
  [[nodiscard]] const std::vector<OutputDef>& outputs() const { return outputs_; }

 private:
  TensorId add_node(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs, std::string name);
  std::vector<TensorDef> tensors_;
  std::vector<NodeDef> nodes_;
  std::vector<OutputDef> outputs_;
};

}  // namespace tfpin::engine
