// The compiler's own view of a graph: values with their shapes, nodes with their fused post-ops.
// Built (and validated) from a Graph by build_ir; rewritten by the fusion passes; lowered to
// oneDNN.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/status.hpp"

namespace tfpin::engine::detail {

using Dims = std::vector<std::int64_t>;

enum class ValueKind { input, constant, activation };

struct Value {
  ValueKind kind = ValueKind::activation;
  std::string name;
  Dims dims;
  Layout layout = Layout::nchw;                    // inputs: the caller's memory order
  std::shared_ptr<const std::vector<float>> data;  // constants
  int producer = -1;                               // node index (activations)
  std::vector<int> consumers;                      // live node indices
  bool is_output = false;
};

struct PostOp {
  enum class Kind { relu, sum, eltwise };
  Kind kind = Kind::relu;
  int value = -1;         // sum: the value added (the residual)
  bool in_place = false;  // sum: every other reader of the residual runs before the convolution
  Eltwise eltwise;        // eltwise: the activation (inference only)
};

struct Node {
  OpKind kind = OpKind::relu;
  std::string name;
  std::vector<int> inputs;  // value indices
  int output = -1;
  OpAttrs attrs;
  std::vector<PostOp> post_ops;
  bool dead = false;
  // Derived at shape inference: effective padding of pooling with ceil_mode (and of the max
  // pooling a batch norm took over, below).
  std::array<std::int64_t, 4> padding{0, 0, 0, 0};
  // Training: the max pooling after this batch norm + ReLU, computed in the same step
  // (fuse_batch_norm_max_pools); the node's output is then the pooled tensor.
  std::optional<Pool2D> fused_max_pool;
};

struct Ir {
  std::vector<Value> values;
  // In topological order as built (the builder can only refer to earlier tensors); training's
  // max_pools_before_concats appends nodes, so what runs after the passes goes by
  // topological_order (schedule.hpp), not by index.
  std::vector<Node> nodes;
  std::vector<std::pair<int, OutputDef>> outputs;  // value, definition
  Layout default_image_layout = Layout::nchw;

  // Rebuilds every value's consumer list from the live nodes (post-op sum values included).
  void relink();
  [[nodiscard]] std::string describe_node(int node) const;  // "node 'conv1' (convolution)"
};

// Validates ids, attributes and shapes. Errors name the node and what is wrong.
Status build_ir(const Graph& graph, Ir& ir);

// Passes. Each keeps ir valid; run them in this order.
int fold_batch_norms(Ir& ir);  // conv -> batch_norm: scale the weights, shift the bias
int fuse_relus(Ir& ir);        // conv/inner_product/add/batch_norm -> relu: post-op
// conv/inner_product -> eltwise (ReLU6, hard swish, sigmoid...): post-op. Inference only: the
// backward of these activations needs the pre-activation tensor, which the fused step never writes.
int fuse_eltwises(Ir& ir);
int fuse_residual_adds(Ir& ir);  // conv -> add: sum post-op
void drop_identities(Ir& ir);    // dropout: consumers read its input
// Training, first: avg_pool -> 1x1 convolution (stride 1, no padding, one group; the pooling
// keeping the size) becomes the convolution, then the pooling. Both are linear and act on
// different axes, so they commute, and the pooling then averages the convolution's K channels
// instead of its C (Inception v3's branch_pool: 192-2048 channels in, 32-192 out).
int move_average_pools(Ir& ir);
// Training, after fuse_relus: concat -> max_pool (the concat read by the pooling alone) becomes a
// max_pool per part, then a concat of the pooled parts: pooling is per channel, the concat then
// copies a quarter as much at stride 2, and a part's batch norm + ReLU can take its pooling
// (below). GoogLeNet's maxpool3 and maxpool4.
int max_pools_before_concats(Ir& ir);
// Training, after fuse_relus: batch_norm + ReLU -> max_pool (the ReLU's output read by the pooling
// alone, channels a multiple of 16, windows of at most 127 taps) becomes one node.
int fuse_batch_norm_max_pools(Ir& ir);

std::string dims_string(const Dims& dims);
std::int64_t element_count(const Dims& dims);

// Helpers for error messages.
Status graph_error(const Ir& ir, int node, const std::string& what);

}  // namespace tfpin::engine::detail
